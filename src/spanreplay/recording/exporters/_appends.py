"""One trace file open for appending whole lines, repaired when a write fails half way.

A span is one line, written with one ``os.write`` to a file opened with
``O_APPEND``. On a regular file that write is whole or fails with nothing
written, except when the disk fills (ENOSPC), the process's file-size limit is
reached (EFBIG) or a signal lands: then the kernel writes part of the line and
reports how much. The rest is retried; when a retry fails, the part already on
disk would glue the next span's line onto half a line, and both would be lost to
every reader. So after such a failure the file is cut back to where the line
started (``ftruncate``), and when that is not safe the next line starts with a
newline instead, so only the half line is damaged.

When the cut is safe: the file is opened with ``O_APPEND`` and another process
may append to it too (the same run id recorded twice at once). Cutting back
must never remove what someone else wrote, so the file is cut only when every
part of the line landed back to back and nothing was written after it (the file
ends where the line's last part ended). Another writer that appends between
that check and the cut (two system calls apart) would lose its line; a run id
written by two processes at once is already a file readers flag, and the cut
happens only after a failed write, so that window is accepted. Otherwise the
half line stays and the next write begins with a newline.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

# os.write's shape: the seam tests use to put another writer between the parts of a line.
Write = Callable[[int, bytes | memoryview], int]

__all__ = ["LineFile"]


class LineFile:
    """A file descriptor open with ``O_APPEND``, written one complete line at a time.

    Attributes:
        fd: the descriptor.
        torn: the file ends with part of a line that could not be cut off, so the
            next write starts with a newline.
    """

    __slots__ = ("_lock", "_write", "fd", "torn")

    def __init__(self, fd: int, *, write: Write = os.write) -> None:
        self.fd = fd
        self.torn = False
        self._write = write
        # Lines of one run may end on several threads at once: a line written in parts
        # must not interleave with another thread's.
        self._lock = threading.Lock()

    def write_line(self, line: bytes) -> None:
        """Append ``line`` (ending in a newline) whole, or raise with the file ending on a line boundary.

        Raises the OSError of the failed write. Before raising, the part of the line
        already written is cut off when that is safe (see the module docstring); when
        it is not, ``torn`` is set and the next line starts on a fresh one.
        """
        with self._lock:
            # After a half line: a newline first (an empty line when another writer's whole
            # line followed the half one; readers pass over empty lines).
            data = b"\n" + line if self.torn else line
            fd = self.fd
            written = self._write(fd, data)
            if written == len(data):
                # The usual case: one system call, no bookkeeping.
                self.torn = False
                return
            self._finish(data, written)

    def _finish(self, data: bytes, written: int) -> None:
        """Write the rest of a line the kernel took only part of."""
        fd = self.fd
        # O_APPEND put the first part at the end of the file and moved the offset past it.
        end = os.lseek(fd, 0, os.SEEK_CUR)
        start = end - written
        back_to_back = True
        view = memoryview(data)
        try:
            while written < len(data):
                count = self._write(fd, view[written:])
                if count <= 0:
                    raise OSError(f"os.write wrote {count} bytes of a trace line")
                position = os.lseek(fd, 0, os.SEEK_CUR)
                # Another process appended between our parts: the line is split around its bytes.
                back_to_back = back_to_back and position == end + count
                end = position
                written += count
        except OSError:
            self._repair(start, end, back_to_back=back_to_back)
            raise
        self.torn = False

    def _repair(self, start: int, end: int, *, back_to_back: bool) -> None:
        try:
            if back_to_back and os.fstat(self.fd).st_size == end:
                os.ftruncate(self.fd, start)
                # Cut back to where this write began: the file ends as it did before it (a
                # half line left there by an earlier failure that could not be cut stays torn).
                return
        except OSError:
            pass
        self.torn = True

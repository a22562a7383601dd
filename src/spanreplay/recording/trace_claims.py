"""One recorder per trace file, across processes: the pytest plugin under pytest-xdist.

``pytest -n 2`` runs tests in two worker processes. Two tests that save the same
trace (``trace=`` naming one file, or a test run by two workers) would both find
it missing, both run live and both save it. Run one after the other, the second
finds the first's trace and replays it; ``claim_trace`` gives the workers that
order. The first to claim a missing trace records it and holds the claim until
its trace is saved or its test failed; another worker that asks waits, then finds
the trace and replays it (or, when the first saved nothing, records it itself).

The claim is an ``flock`` on a lock file beside the trace, so a worker that dies
(killed, out of memory) releases it with its process. The holder deletes the lock
file before it lets go, and whoever acquires it checks that the name still leads
to the file it locked (else it locks the new one): no lock file is left in the
trace folder. Where there is no ``flock`` (Windows) a claim waits for nothing;
``publish_trace`` still never overwrites a trace another recorder saved first.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path
from typing import Final

from spanreplay.model.private_files import open_nofollow

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["TraceClaim", "claim_trace", "publish_trace"]

# A fixed-length name: the trace's own name may already be as long as the file system allows.
_LOCK_PREFIX: Final = ".spanreplay-lock-"


class TraceClaim:
    """The claim of this process to record one trace, held until ``release``."""

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    def release(self) -> None:
        """Let the next recorder of the trace go on; releasing twice is harmless."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(fd)


def lock_path(trace: Path) -> Path:
    """The lock file that stands for ``trace``, in its folder."""
    return trace.with_name(_LOCK_PREFIX + hashlib.sha256(os.fsencode(trace.name)).hexdigest()[:16])


def claim_trace(trace: Path) -> TraceClaim:
    """Wait until no other process holds the claim on ``trace``, and take it.

    Makes the trace's folder if it is missing (another recorder may have removed
    it, empty, after a failed test).
    """
    path = lock_path(trace)
    if fcntl is None:
        return TraceClaim(path, None)
    while True:
        trace.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = open_nofollow(path, os.O_RDWR | os.O_CREAT)
        except FileNotFoundError:  # the folder went between the two calls
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            locked = os.fstat(fd)
            try:
                named = os.stat(path, follow_symlinks=False)
            except FileNotFoundError:
                named = None
        except BaseException:
            os.close(fd)
            raise
        if named is not None and (named.st_dev, named.st_ino) == (locked.st_dev, locked.st_ino):
            return TraceClaim(path, fd)
        # The holder deleted the file it locked before letting go: lock the one the name leads to now.
        os.close(fd)


def publish_trace(recorded: Path, trace: Path, *, replace: bool) -> bool:
    """Put the recorded file at ``trace`` in one step, in the same folder: a reader never sees half of it.

    With ``replace`` False a trace already there is kept and False returned: a
    recorder never overwrites the trace another saved first.
    """
    if replace:
        os.replace(recorded, trace)
        return True
    try:
        os.link(recorded, trace)
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: the claim is what keeps the order there
        if os.path.lexists(trace):
            return False
        os.replace(recorded, trace)
        return True
    os.unlink(recorded)
    return True

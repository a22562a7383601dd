"""Files and folders spanreplay writes traces and salts into, opened so a planted link cannot redirect them.

A trace folder may be shared (a CI workspace, a team's mount), and anyone who can
write to it can plant a symbolic link where the next run's file will be. Opening
that name the usual way appends the run to whatever the link points at (a shell
profile, another team's trace). So every trace and salt file is opened with
``O_NOFOLLOW`` (the open fails when the last component is a link; the folder
itself may be a link the user made) and ``O_CLOEXEC`` (a tool the agent starts
never inherits the descriptor), and the folders spanreplay makes are owner-only.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Final

from spanreplay.errors import SpanReplayError

__all__ = ["NOFOLLOW", "TraceFileLinkError", "make_private_dirs", "open_nofollow"]

# Absent on platforms without links (Windows): there is nothing to refuse there.
NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
# What open(O_NOFOLLOW) fails with on a link: ELOOP on Linux and macOS, EMLINK on FreeBSD,
# ENOTDIR on Linux when O_DIRECTORY asks for a folder.
_LINK_ERRNOS: Final = frozenset({errno.ELOOP, errno.EMLINK, errno.ENOTDIR})


class TraceFileLinkError(SpanReplayError, OSError):
    """A trace or salt file's name is a symbolic link, which spanreplay never opens through."""

    def __init__(self, path: Path) -> None:
        try:
            target = f" (to {os.readlink(path)!r})"
        except OSError:
            target = ""
        super().__init__(
            errno.ELOOP,
            f"{path} is a symbolic link{target}, and spanreplay never writes or reads a trace through a link: "
            "someone who can write to the trace folder could point it at any file. Remove the link, or "
            "pass a trace_dir only you can write to.",
        )
        self.path = path

    def __str__(self) -> str:
        return str(self.strerror)


def open_nofollow(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode)``; TraceFileLinkError when ``path`` is a link."""
    try:
        return os.open(path, flags | NOFOLLOW, mode)
    except OSError as error:
        if error.errno in _LINK_ERRNOS and _is_link(path):
            raise TraceFileLinkError(path) from None
        raise


def _is_link(path: Path) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each owner-only (0700).

    Only folders made here are changed: one the user made keeps the mode they gave
    it. ``chmod`` after ``mkdir`` because the umask may take bits off the mode given
    to ``mkdir`` (never add them, but a umask of 0277 would leave a folder its owner
    cannot write).
    """
    if folder.is_dir():
        return
    missing = []
    for candidate in (folder, *folder.parents):
        if candidate.exists() or candidate.is_symlink():
            break
        missing.append(candidate)
    for made in reversed(missing):
        try:
            made.mkdir(mode=0o700)
        except FileExistsError:
            continue  # another thread or process made it first: theirs, left as it is
        os.chmod(made, 0o700)
    if not folder.is_dir():
        # A dangling link or a file in the way: mkdir says which, in its own words.
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)

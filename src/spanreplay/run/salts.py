"""Per-run salts: the secret behind the exact checks of a run masked without a key.

A run recorded with masking on and no project key gets 32 random bytes of its
own, written (as hex) to ``{trace dir}/.spanreplay-salts/{run id}.salt``: an
owner-only file (0600) in an owner-only directory (0700), beside the run's trace
file and never in it. The readers skip the directory (its name starts with a
dot), ``spanreplay prune`` removes a run's salt with the run, and no span,
export or database row holds it. Replay finds it beside the trace file the run
was read from; a run read from anywhere else is replayed without it. The run
id names a salt file only when it is a plain run id (``_trace_paths``): one read
from a trace could otherwise point anywhere.

The salt folder and files are opened without following links (``O_NOFOLLOW``,
relative to the folder's own descriptor): a link planted in a shared trace
folder can neither receive a salt nor hand replay one.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Final

from spanreplay.model.private_files import NOFOLLOW, TraceFileLinkError, make_private_dirs, open_nofollow
from spanreplay.model.run_ids import checked_run_id, path_inside

__all__ = ["SALT_DIR", "create_salt", "read_salt", "salt_beside", "salt_path"]

SALT_DIR: Final = ".spanreplay-salts"
_SALT_BYTES: Final = 32
_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW
_DIR_FLAGS: Final = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
# Where a span was read from, as the file readers write it: "{file}:{line}", "{file} at byte {n}",
# "{file} record {n} (at byte {n})" or "{file}" (a whole JSON document).
_ORIGIN: Final = re.compile(r"(.+?)(?::\d+| at byte \d+| record \d+ \(at byte \d+\))?", re.DOTALL)


def salt_path(trace_dir: str | os.PathLike[str], run_id: str, *, where: str = "a trace") -> Path:
    """Where the salt of run ``run_id`` recorded to ``trace_dir`` is kept.

    The run id is most often read from a trace file (replay, prune): it names the
    salt only when it is a plain run id, and the path is checked to stay inside the
    salt folder; else ``UnsafeTraceValueError`` (``where`` says where it was read).
    """
    folder = Path(trace_dir) / SALT_DIR
    return path_inside(folder, f"{checked_run_id(run_id, where=where)}.salt")


def create_salt(trace_dir: str | os.PathLike[str], run_id: str) -> bytes:
    """A new random salt for the run, written owner-only beside its trace file; the salt
    already there when the run id was recorded to this directory before (its trace
    file holds both runs' spans, and one salt checks them all)."""
    # Not salt_path(): that resolves links to check where they lead, while this opens the
    # folder and the file without following any, and names a planted link as one.
    path = Path(trace_dir) / SALT_DIR / f"{checked_run_id(run_id, where='the run being recorded')}.salt"
    make_private_dirs(path.parent)
    salt = secrets.token_bytes(_SALT_BYTES)
    # The folder is opened once, without following a link, and the file inside it by name:
    # a link swapped in for the folder after this open changes nothing.
    folder = open_nofollow(path.parent, _DIR_FLAGS)
    try:
        try:
            fd = os.open(path.name, _FLAGS, 0o600, dir_fd=folder)
        except FileExistsError:
            if os.path.islink(path):  # O_EXCL refuses a link whatever it points at
                raise TraceFileLinkError(path) from None
            existing = read_salt(path)
            if existing is None:
                raise
            return existing
        try:
            data = salt.hex().encode() + b"\n"
            while data:
                data = data[os.write(fd, data) :]
        except OSError:
            os.unlink(path.name, dir_fd=folder)  # half a salt would refuse every later run of the id
            raise
        finally:
            os.close(fd)
    finally:
        os.close(folder)
    return salt


def read_salt(path: Path) -> bytes | None:
    """The salt in the file at ``path``; None when there is none, or it is not a salt."""
    try:
        # Non-blocking: a FIFO planted under the salt's name would otherwise hang the open.
        fd = open_nofollow(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            text = os.read(fd, 4 * _SALT_BYTES).strip()
        finally:
            os.close(fd)
        salt = bytes.fromhex(text.decode("ascii"))
    except (OSError, ValueError):
        return None
    return salt if len(salt) == _SALT_BYTES else None


def salt_beside(origin: str, run_id: str) -> Path | None:
    """The salt file of ``run_id`` beside the trace file a span was read from (``origin``,
    as the readers name it); None when the span was not read from a file.

    Raises ``UnsafeTraceValueError`` when the run id cannot name a file there.
    """
    match = _ORIGIN.fullmatch(origin)
    if match is None:
        return None
    trace_file = Path(match.group(1))
    if not trace_file.is_file():
        return None
    return salt_path(trace_file.parent, run_id, where=f"the trace file {str(trace_file)!r}")

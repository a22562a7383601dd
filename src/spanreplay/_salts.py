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
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Final

from ._trace_paths import checked_run_id, path_inside

__all__ = ["SALT_DIR", "create_salt", "read_salt", "salt_beside", "salt_path"]

SALT_DIR: Final = ".spanreplay-salts"
_SALT_BYTES: Final = 32
_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
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
    path = salt_path(trace_dir, run_id)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    salt = secrets.token_bytes(_SALT_BYTES)
    try:
        fd = os.open(path, _FLAGS, 0o600)
    except FileExistsError:
        existing = read_salt(path)
        if existing is None:
            raise
        return existing
    try:
        os.write(fd, salt.hex().encode() + b"\n")
    finally:
        os.close(fd)
    return salt


def read_salt(path: Path) -> bytes | None:
    """The salt in the file at ``path``; None when there is none, or it is not a salt."""
    try:
        text = path.read_bytes()[: 4 * _SALT_BYTES].strip()
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

"""Run ids as file names: the one pattern a run id must match, and paths kept inside their folder.

A run id names files (``{trace dir}/{run id}.jsonl``, its salt, an exported test),
and most run ids spanreplay sees were read from a trace file: data from outside,
whoever wrote it. So a run id becomes part of a path only once it matches
``RUN_ID`` (a letter or digit, then letters, digits, ``_``, ``.`` and ``-``: no
separator, no ``..``, no absolute path), and the path it makes is checked, once
resolved, to lie inside the folder it was built in. Either check failing raises
``UnsafeTraceValueError``, a sentence that names the value and the fix.

Recording checks the run ids it is given with the same pattern, so every run
spanreplay records can be replayed, pruned and exported by name.
"""

from __future__ import annotations

import os
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from spanreplay.errors import UnsafeTraceValueError

__all__ = ["RUN_ID", "RUN_ID_RULE", "checked_run_id", "is_run_id", "new_run_id", "path_inside"]

RUN_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,200}")
RUN_ID_RULE: Final = "a letter or digit, then at most 200 letters, digits, '_', '.' and '-'"


def new_run_id(now: datetime | None = None) -> str:
    """``run_20261129_021503_a1b2c3d4``: the UTC start time, then 32 random bits."""
    now = now or datetime.now(UTC)
    return f"run_{now:%Y%m%d_%H%M%S}_{secrets.token_hex(4)}"


def is_run_id(value: object) -> bool:
    """Whether ``value`` is a run id that can name a file."""
    return isinstance(value, str) and RUN_ID.fullmatch(value) is not None


def checked_run_id(value: object, *, where: str) -> str:
    """``value``, when it is a run id that can name a file; else ``UnsafeTraceValueError``.

    Args:
        value: the run id, as read (from a trace file, a span, an argument).
        where: where it was read, for the message ("the trace file traces/x.jsonl").
    """
    if is_run_id(value):
        assert isinstance(value, str)
        return value
    shown = repr(value) if len(repr(value)) <= 120 else repr(value)[:117] + "..."
    raise UnsafeTraceValueError(
        f"The run id {shown} in {where} cannot name a trace file: a run id is {RUN_ID_RULE}, so that no "
        "run id leads outside its folder. The trace was not written by spanreplay or was edited; "
        "give the run another id, or leave this trace out."
    )


def path_inside(folder: str | os.PathLike[str], name: str) -> Path:
    """``folder / name``, when it lies inside ``folder`` once both are resolved; else ``UnsafeTraceValueError``.

    The path returned is the unresolved one (as the user wrote ``folder``); the
    check resolves links and ``..``, so a name or a link planted in the folder
    that leads out of it is refused.
    """
    base = Path(folder)
    path = base / name
    resolved_base = base.resolve()
    resolved = path.resolve()
    if resolved == resolved_base or not resolved.is_relative_to(resolved_base):
        raise UnsafeTraceValueError(
            f"The file name {name!r} leads outside the folder {str(base)!r} (to {str(resolved)!r}); "
            f"spanreplay writes and deletes only inside it. Use a run id that is {RUN_ID_RULE}, "
            "and remove any link in the folder that points out of it."
        )
    return path

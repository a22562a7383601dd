"""``spanreplay.checkpoint(name, value)``: the agent's own state, recorded and checked on replay.

A boundary tells replay what the world said; a checkpoint tells it what the
agent made of it. Recorded as a step of kind ``state_update`` (the Postgres step
log's name for it) whose output is the value, masked like any output. On replay
the current value is masked the same way and compared with the recorded one: a
difference is a ``StateChangedError`` at that checkpoint, where the state went
wrong, rather than a changed input at the next boundary, or nothing at all when
the state never reaches one.
"""

from __future__ import annotations

import difflib
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Final, TypeVar

import orjson

from spanreplay import semconv as sc
from spanreplay.errors import StateChangedError
from spanreplay.model import typed_values as _typed
from spanreplay.model.payloads import encode_output
from spanreplay.readers._base import SpanReplayWarning
from spanreplay.run.base import Run, run_for_boundary

if TYPE_CHECKING:
    from spanreplay.model.events import Event, EventLog

T = TypeVar("T")

__all__ = ["checkpoint"]

_MAX_DIFF_LINES: Final = 60
_PREVIEW: Final = 120


def checkpoint(name: str, value: T) -> T:
    """Record ``value``, a piece of the agent's own state, as checkpoint ``name``; returns ``value``.

    Record mode: a ``state_update`` step whose output is ``value`` (masked, like a
    boundary's output; values JSON cannot say are written as a tool's output is).
    Replay mode: ``value`` is compared, masked, with the value recorded at this
    checkpoint; a difference raises ``StateChangedError`` (a ``ReplayDivergenceError``)
    and ends the replay as diverged. Outside any run it does nothing.

    Checkpoints of one name are matched in call order, like boundaries. A recording
    that holds no checkpoint of this name (made before the code had it) is not
    compared: replay warns once and goes on.

    Args:
        name: what the value is (``"cart"``, ``"plan"``): the step's key.
        value: the state itself, JSON-serializable (or a type a tool may return).
    """
    run = run_for_boundary(f"checkpoint {name!r}")
    if run is None:
        return value
    log = run.replayed_log
    if log is not None:
        _check(run, log, name, value)
    elif run.records:
        run.begin(sc.KIND_STATE, name, None).finish(value)
    return value


def _check(run: Run, log: EventLog, name: str, value: Any) -> None:
    key = run._names(name)
    if not any(e.kind == sc.KIND_STATE and e.key == key for e in log):
        _warn_unrecorded(run, name)
        return
    recorded = run.begin(sc.KIND_STATE, name, None).recorded
    assert recorded is not None  # a replaying run's call always holds its recorded event
    current = _masked(run, key, value)
    expected = orjson.loads(recorded.output_json) if recorded.output_json is not None else None
    # Compared as canonical JSON, not with ==: 1, 1.0 and true are equal in Python, not in a recording.
    if orjson.dumps(current, option=orjson.OPT_SORT_KEYS) == orjson.dumps(expected, option=orjson.OPT_SORT_KEYS):
        return
    error = _changed(run.run_id, recorded, expected, current)
    run.refuse(error)
    raise error


def _masked(run: Run, key: str, value: Any) -> Any:
    """``value`` as the recording would hold it: encoded as an output, masked, read back as JSON."""
    data, _, _ = _typed.to_json(value)
    session = run._masking
    if session is not None:
        data = session.mask(sc.KIND_STATE, key, data, part="output").value
    return orjson.loads(encode_output(data))


def _changed(run_id: str, recorded: Event, expected: Any, current: Any) -> StateChangedError:
    diff = _diff(expected, current)
    where = f"checkpoint {recorded.key!r} (call id {recorded.call_id}, seq {recorded.seq})"
    return StateChangedError(
        f"Replay of run {run_id} diverged at seq {recorded.seq}: the state at {where} differs from "
        f"the recorded state.\nRecorded: {_preview(expected)}\nAttempted: {_preview(current)}\n"
        f"State diff (- recorded, + attempted):\n{diff}\n"
        "Every step served before it matched, so the change is in the code that built this state "
        "since the last boundary (values are compared masked, as recorded).",
        name=recorded.key,
        diff=diff,
        run_id=run_id,
        seq=recorded.seq,
        call_id=recorded.call_id,
        recorded=f"{where} = {_preview(expected)}",
        attempted=f"{where} = {_preview(current)}",
    )


def _diff(expected: Any, current: Any) -> str:
    def lines(value: Any) -> list[str]:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode().splitlines()

    diff = list(difflib.unified_diff(lines(expected), lines(current), "recorded", "attempted", lineterm="", n=2))
    if len(diff) > _MAX_DIFF_LINES:
        diff = [*diff[:_MAX_DIFF_LINES], f"... ({len(diff) - _MAX_DIFF_LINES} more diff lines)"]
    return "\n".join(diff)


def _preview(value: Any) -> str:
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 3] + "..."


# The names each open replay has warned about: once per replay and name.
_warned: weakref.WeakKeyDictionary[Run, set[str]] = weakref.WeakKeyDictionary()


def _warn_unrecorded(run: Run, name: str) -> None:
    names = _warned.setdefault(run, set())
    if name in names:
        return
    names.add(name)
    warnings.warn(
        f"Run {run.run_id} holds no checkpoint {name!r} (it was recorded before the code had it), so the "
        "state there is not compared; record the run again to check it.",
        SpanReplayWarning,
        stacklevel=4,
    )

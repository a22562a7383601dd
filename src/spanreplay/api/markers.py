"""Version markers: ``spanreplay.patched("change-id")`` keeps old recordings replayable.

An intentional change to the agent (a new retry policy, one more tool call)
makes every run recorded before it diverge. Wrapping the change in a marker
keeps both paths::

    if spanreplay.patched("retry-v2"):
        new path
    else:
        old path

Recording (and outside any run), ``patched`` returns True and the run records
a step of kind ``marker`` and key ``retry-v2``. Replaying, it returns True when
the run recorded that marker and False when the run was recorded before the
marker existed, so the old path runs against the old recording.

The marker is recorded once per scope and id, where the scope first asks for
it: once per run for code that runs in one task, as Temporal records
``workflow.patched`` once per workflow, so a marker asked for in a loop adds one
step, not one per turn; later calls return the first answer without a step. A
task or thread started in the run is a scope of its own (see ``_branches``) and
records its own marker, so whichever branch the scheduler runs first, each
branch's marker has the same call id on replay as when it was recorded. On
replay:

- the scope recorded the marker: the first call takes the recorded marker step,
  like any boundary, so the steps after it keep their recorded seq, and a marker
  reached at another point of the code diverges as another call would;
- the run recorded the marker elsewhere only (a tool that asks for it: its work
  never runs on replay): True, and no step is taken;
- the run has no such marker (recorded before it existed): False, and no step
  is taken, no seq, no call id, so the run's recorded steps line up as they did.

A recording that holds a marker the code no longer asks for ends with that
step left over (diverged): keep the ``patched`` call, even once its old branch
is gone, for as long as runs recorded with the marker must replay.
"""

from __future__ import annotations

import re
import threading
import weakref
from typing import Final

from spanreplay import semconv as sc
from spanreplay.errors import ConfigurationError
from spanreplay.run.base import Run, run_for_boundary

__all__ = ["patched"]

# A marker id is a call-id segment: no "/" (the scope separator) and no "#" (the ordinal).
_MARKER_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")

# Per run, the answer each (scope call id, marker id) got; a run's entry goes with the run.
_answers: weakref.WeakKeyDictionary[Run, dict[tuple[str, str], bool]] = weakref.WeakKeyDictionary()
# Per replayed run, the marker ids its recording holds anywhere.
_recorded_ids: weakref.WeakKeyDictionary[Run, frozenset[str]] = weakref.WeakKeyDictionary()
# Held while a marker is first asked for, so two threads in one scope record it once.
_lock = threading.RLock()


def patched(change_id: str) -> bool:
    """Whether the code should take the path that ``change_id`` introduced.

    True when recording and outside any run; when replaying, True if the run
    recorded the marker and False if it was recorded before the marker existed.
    The marker is recorded as a step of kind ``marker``, once per run and id
    (once per task or thread of the run that asks for it).

    Args:
        change_id: names the change, e.g. ``"retry-v2"``: letters, digits and
            ``_ . : -``, starting with a letter or digit, at most 200 characters.

    Raises:
        ConfigurationError: ``change_id`` is not such a name.
    """
    if not isinstance(change_id, str) or not _MARKER_ID.fullmatch(change_id):
        raise ConfigurationError(
            f"spanreplay.patched({change_id!r}): a marker id is a name such as 'retry-v2' made of letters, "
            "digits and '_', '.', ':', '-' (at most 200, starting with a letter or digit); it becomes "
            "part of the step's call id."
        )
    run = run_for_boundary(f"{sc.KIND_MARKER} {change_id!r}")
    if run is None:
        return True
    scope = run._scope()
    with _lock:
        answers = _answers.get(run)
        if answers is None:
            answers = _answers[run] = {}
        answer = answers.get((scope.call_id, change_id))
        if answer is None:
            answer = answers[(scope.call_id, change_id)] = _first_answer(run, scope.call_id, change_id)
    return answer


def _first_answer(run: Run, scope_id: str, change_id: str) -> bool:
    """The answer to a scope's first ``patched(change_id)``, taking or recording its step."""
    log = run.replayed_log
    if log is not None:
        key = run._names(change_id)
        own = f"{sc.KIND_MARKER}:{key}#0"
        recorded = log.by_call_id(f"{scope_id}/{own}" if scope_id else own)
        if recorded is None or recorded.kind != sc.KIND_MARKER:
            # Recorded elsewhere in the run (True) or not at all (False): no step to take here.
            ids = _recorded_ids.get(run)
            if ids is None:
                ids = _recorded_ids[run] = frozenset(e.key for e in log if e.kind == sc.KIND_MARKER)
            return key in ids
    return bool(run.boundary(sc.KIND_MARKER, change_id, None, _true))


def _true() -> bool:
    return True

"""The replay engine: serves boundary calls from an EventLog and reports divergence."""

from __future__ import annotations

import difflib
import threading
from collections.abc import Sequence
from typing import Any

import orjson

from . import _jsonpath
from . import _semconv as sc
from ._events import Event, EventLog
from .errors import (
    DifferentCallError,
    InputChangedError,
    LeftoverEventsError,
    UnexpectedCallError,
)

_MAX_DIFF_LINES = 60


class ReplayEngine:
    """Matches the calls the code makes against the recording, by call id.

    A call is served when the recording has the same call id with the same input.
    Concurrent siblings (``asyncio.gather``, thread pools) may take their ordinals
    in another order than they did when recorded; when the call id's input differs
    but an unserved sibling with the same kind, key and input exists, that sibling
    is served instead. Serving a call also serves everything recorded inside it:
    the real work never runs, so neither do its nested boundaries.
    """

    def __init__(self, log: EventLog, *, ignore_paths: Sequence[str] = ()) -> None:
        self.log = log
        self._ignore = tuple(_jsonpath.parse(p) for p in ignore_paths) if ignore_paths else ()
        self._served: set[str] = set()
        self._lock = threading.Lock()
        self._seqs = frozenset([event.seq for event in log.events])
        self._children: dict[str, list[Event]] = {}
        for event in log.events:
            self._children.setdefault(event.parent_call_id, []).append(event)

    @property
    def run_id(self) -> str:
        return self.log.run_id

    def take(self, scope_id: str, call_id: str, kind: str, key: str, seq: int, input_json: bytes) -> Event:
        """The recorded event for this call, or the divergence error that explains why not."""
        with self._lock:
            event = self.log.by_call_id(call_id)
            if (
                event is not None
                and call_id not in self._served
                and event.kind == kind
                and event.key == key
                and self._same_input(event.input_json, input_json)
            ):
                self._serve(event)
                return event
            sibling = self._sibling(scope_id, kind, key, input_json)
            if sibling is not None:
                self._serve(sibling)
                return sibling
            attempted = _describe(kind, key, call_id, seq, input_json)
            if event is not None and call_id not in self._served and event.kind == kind and event.key == key:
                diff = self._diff(event.input_json, input_json)
                raise InputChangedError(
                    f"Replay of run {self.run_id} diverged at seq {event.seq} (call id {call_id}): "
                    f"the code made the recorded {kind} call {key!r} with a different input.\n"
                    f"Recorded: {event.describe()}\nAttempted: {attempted}\n"
                    f"Input diff (- recorded, + attempted):\n{diff}\n"
                    "Fix the code so it sends the recorded input, or leave volatile fields out of "
                    "the comparison with ignore_paths=[...].",
                    diff=diff,
                    run_id=self.run_id,
                    seq=event.seq,
                    call_id=call_id,
                    recorded=event.describe(),
                    attempted=attempted,
                )
            if event is None and self.log.run.status == sc.RUN_STATUS_CRASHED and seq not in self._seqs:
                raise self._crash_point(call_id, seq, attempted)
            expected = self._next_unserved(scope_id)
            if expected is not None:
                raise DifferentCallError(
                    f"Replay of run {self.run_id} diverged at seq {expected.seq}: the recording holds "
                    f"a different call at this point.\nRecorded: {expected.describe()}\n"
                    f"Attempted: {attempted}\n"
                    "The code took another path than the recorded run; compare the branch that "
                    "chose this call with the recorded inputs before it (spanreplay show).",
                    run_id=self.run_id,
                    seq=expected.seq,
                    call_id=call_id,
                    recorded=expected.describe(),
                    attempted=attempted,
                )
            last = self.log.events[-1].seq if len(self.log) else 0
            raise UnexpectedCallError(
                f"Replay of run {self.run_id} diverged after seq {last}: the code made a call the "
                f"recording does not have.\nRecorded: nothing more in this scope "
                f"(run status {self.log.run.status})\nAttempted: {attempted}\n"
                + (
                    "The recorded process died here (the run crashed), so the recording ends at this point."
                    if self.log.run.status == sc.RUN_STATUS_CRASHED
                    else "The code makes more calls than the recorded run did; find what changed since the recording."
                ),
                run_id=self.run_id,
                seq=seq,
                call_id=call_id,
                recorded=None,
                attempted=attempted,
            )

    def _crash_point(self, call_id: str, seq: int, attempted: str) -> UnexpectedCallError:
        """The call that was running when the recorded process died (its span never ended)."""
        last = self.log.events[-1].seq if len(self.log) else 0
        where = f"seq {seq} never ended" if seq < last else f"nothing was recorded after seq {last}"
        return UnexpectedCallError(
            f"Replay of run {self.run_id} reached the point where the recorded process died: {where} "
            f"(call id {call_id}).\nRecorded: nothing for this call (the run crashed while it ran, or "
            f"before it)\nAttempted: {attempted}\nThe recording holds no outcome for this step; look at "
            "what killed the process here (a kill, an out-of-memory, a hang in this call).",
            run_id=self.run_id,
            seq=seq,
            call_id=call_id,
            recorded=None,
            attempted=attempted,
        )

    def check_finished(self) -> None:
        """Raise LeftoverEventsError if recorded events were never asked for."""
        with self._lock:
            left = [e for e in self.log if e.call_id not in self._served]
        if not left:
            return
        first = left[0]
        listed = "\n".join(f"  {e.describe()}" for e in left[:10])
        more = f"\n  ... and {len(left) - 10} more" if len(left) > 10 else ""
        raise LeftoverEventsError(
            f"Replay of run {self.run_id} ended with {len(left)} recorded event(s) never asked "
            f"for, the first at seq {first.seq} (call id {first.call_id}).\n"
            f"Recorded: {first.describe()}\nAttempted: nothing more, the run ended\n"
            f"Never asked for:\n{listed}{more}\n"
            "The code stopped earlier than the recorded run did; find the branch that ended it.",
            leftover=tuple(e.call_id for e in left),
            run_id=self.run_id,
            seq=first.seq,
            call_id=first.call_id,
            recorded=first.describe(),
            attempted=None,
        )

    @property
    def served(self) -> int:
        return len(self._served)

    # -- internals ------------------------------------------------------------

    def _serve(self, event: Event) -> None:
        served = self._served
        served.add(event.call_id)
        children = self._children.get(event.call_id)
        if not children:
            return
        # The real work never runs on replay, so neither do the boundaries nested in it.
        stack = list(children)
        while stack:
            child = stack.pop()
            served.add(child.call_id)
            stack.extend(self._children.get(child.call_id, ()))

    def _sibling(self, scope_id: str, kind: str, key: str, input_json: bytes) -> Event | None:
        for event in self._children.get(scope_id, ()):
            if (
                event.call_id not in self._served
                and event.kind == kind
                and event.key == key
                and self._same_input(event.input_json, input_json)
            ):
                return event
        return None

    def _next_unserved(self, scope_id: str) -> Event | None:
        for event in self._children.get(scope_id, ()):
            if event.call_id not in self._served:
                return event
        return None

    def _same_input(self, recorded: bytes, attempted: bytes) -> bool:
        if recorded == attempted:
            return True
        if not self._ignore:
            return False
        return bool(self._comparable(recorded) == self._comparable(attempted))

    def _comparable(self, data: bytes) -> Any:
        value = orjson.loads(data)
        for path in self._ignore:
            value = _jsonpath.delete(value, path)
        return value

    def _diff(self, recorded: bytes, attempted: bytes) -> str:
        def lines(data: bytes) -> list[str]:
            value = self._comparable(data) if self._ignore else orjson.loads(data)
            return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode().splitlines()

        diff = list(difflib.unified_diff(lines(recorded), lines(attempted), "recorded", "attempted", lineterm="", n=2))
        if len(diff) > _MAX_DIFF_LINES:
            diff = [*diff[:_MAX_DIFF_LINES], f"... ({len(diff) - _MAX_DIFF_LINES} more diff lines)"]
        return "\n".join(diff)


def _describe(kind: str, key: str, call_id: str, seq: int, input_json: bytes) -> str:
    text = input_json.decode("utf-8", "replace")
    if len(text) > 120:
        text = text[:117] + "..."
    return f"{kind} {key!r} (call id {call_id}, seq {seq}, input {text})"

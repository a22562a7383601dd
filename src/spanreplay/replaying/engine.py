"""The replay engine: serves boundary calls from an EventLog and reports divergence."""

from __future__ import annotations

import difflib
import itertools
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import orjson

from spanreplay import semconv as sc
from spanreplay.errors import (
    DifferentCallError,
    InputChangedError,
    LeftoverEventsError,
    ReplayDivergenceError,
    SpanReplayError,
    UnexpectedCallError,
)
from spanreplay.model import jsonpath as _jsonpath
from spanreplay.model.events import Event, EventLog
from spanreplay.readers._base import SpanReplayWarning

_MAX_DIFF_LINES = 60


class ReplayEngine:
    """Matches the calls the code makes against the recording, by call id.

    A call is served when the recording has the same call id with the same input,
    and every earlier call of its scope (its siblings: same enclosing boundary, same
    branch) has been served or ran at the same time as it when recorded. Order only
    bends where the recording was concurrent: when the call id's input differs but
    an unserved sibling with the same kind, key and input exists, and the two
    overlapped in time when recorded, that sibling is served instead (runs recorded
    before branch scopes took gather and thread-pool ordinals in completion order).
    A call made out of the recorded order is a DifferentCallError at that call.

    Serving a call also serves everything recorded inside it: the real work never
    runs, so neither do its nested boundaries.

    The first divergence (or refused call) is kept in ``first_failure``: the code
    may catch it and go on, but the replay still ends with it. Later calls are
    served where they match the recording and raise their own divergence where not.
    """

    def __init__(self, log: EventLog, *, ignore_paths: Sequence[str] = ()) -> None:
        self.log = log
        self.ignore_paths = tuple(ignore_paths)
        self._ignore = tuple(_jsonpath.parse(p) for p in ignore_paths) if ignore_paths else ()
        self._served: set[str] = set()
        self._lock = threading.Lock()
        self._seqs = frozenset([event.seq for event in log.events])
        # Siblings, by the scope they were called in (a boundary's call id, a branch's, or "").
        self._children: dict[str, list[Event]] = {}
        # What serving a call serves with it: the calls recorded inside it, branches included.
        self._nested: dict[str, list[Event]] = {}
        self._by_call_id = {event.call_id: event for event in log.events}
        # Each call's scope and its index among the scope's siblings.
        self._position: dict[str, tuple[str, int]] = {}
        for event in log.events:
            scope = event.parent_call_id
            siblings = self._children.setdefault(scope, [])
            self._position[event.call_id] = (scope, len(siblings))
            siblings.append(event)
            self._nested.setdefault(enclosing_call(event.call_id), []).append(event)
        # Per scope, the index of its first sibling not yet served: in-order replay checks one.
        self._cursor: dict[str, int] = {}
        # Calls the code reached with a changed input: not served, but no longer ahead of it.
        self._reached: set[str] = set()
        self.first_failure: SpanReplayError | None = None
        if self._ignore:
            self._warn_unmatched_ignore_paths()

    def _warn_unmatched_ignore_paths(self) -> None:
        """An ignore path that matches no recorded input is a typo or a wrong level: say so."""
        inputs = [event.input for event in self.log.events]
        for text, path in zip(self.ignore_paths, self._ignore, strict=True):
            if any(_jsonpath.matches(value, path) for value in inputs):
                continue
            where, keys = _jsonpath.keys_where_unmatched(inputs, path)
            place = "at the top level" if where == "$" else f"under {where}"
            found = f"{place} the inputs have: {', '.join(keys[:20])}" if keys else f"nothing is {place}"
            similar = _jsonpath.paths_ending_with(inputs, path)
            hint = f" Did you mean {' or '.join(similar)}?" if similar else ""
            warnings.warn(
                f"The ignore path {text!r} (ignore_paths=, --ignore) matches nothing in any recorded "
                f"input of run {self.run_id}, so it leaves nothing out of the comparison; {found}.{hint}",
                SpanReplayWarning,
                stacklevel=4,
            )

    def refuse(self, error: SpanReplayError) -> None:
        """Keep ``error`` as this replay's outcome unless a divergence came first."""
        with self._lock:
            if self.first_failure is None:
                self.first_failure = error

    def _diverged(self, error: ReplayDivergenceError) -> ReplayDivergenceError:
        if self.first_failure is None:
            self.first_failure = error
        self._note_gaps(error)
        return error

    def _note_gaps(self, error: ReplayDivergenceError) -> None:
        """Say what the recording itself said it cannot reproduce (concurrent siblings, a foreign trace's gaps)."""
        gaps = self.log.run.gaps
        if gaps:
            error.add_note(
                f"The recording of run {self.run_id} warned that it may not replay exactly: {'; '.join(gaps)}."
            )

    @property
    def run_id(self) -> str:
        return self.log.run_id

    def take(self, scope_id: str, call_id: str, kind: str, key: str, seq: int, input_json: bytes) -> Event:
        """The recorded event for this call, or the divergence error that explains why not."""
        with self._lock:
            event = self._by_call_id.get(call_id)
            same_call = event is not None and event.kind == kind and event.key == key
            # The recorded call under this id, not served yet, with the same input.
            recorded = (
                event
                if event is not None
                and same_call
                and call_id not in self._served
                and (event.input_json == input_json or self._same_input(event.input_json, input_json))
                else None
            )
            if recorded is not None:
                # The common case: next in its scope, settled here without the checks below.
                scope, index = self._position[call_id]
                if self._cursor.get(scope, 0) == index:
                    self._cursor[scope] = index + 1
                    self._serve(recorded)
                    return recorded
            try:
                if recorded is not None:
                    return self._take_out_of_order(recorded, kind, key, input_json)
                return self._take(scope_id, call_id, kind, key, seq, input_json, event)
            except ReplayDivergenceError as error:
                raise self._diverged(error) from None

    def _take_out_of_order(self, recorded: Event, kind: str, key: str, input_json: bytes) -> Event:
        """The recorded call, matched but not next in its scope: served when no call it waits for is left."""
        blocker = self._blocker(recorded)
        if blocker is None:
            self._serve(recorded)
            return recorded
        raise self._out_of_order(blocker, recorded, _describe(kind, key, recorded.call_id, input_json))

    def _take(
        self, scope_id: str, call_id: str, kind: str, key: str, seq: int, input_json: bytes, event: Event | None
    ) -> Event:
        """``take()`` when no unserved recorded call under ``call_id`` matches it (``event`` is the
        one there, if any): a sibling recorded elsewhere in the scope, or the divergence error that
        says why not."""
        same_call = event is not None and event.kind == kind and event.key == key
        sibling = self._sibling(scope_id, kind, key, input_json)
        if sibling is not None and event is not None and same_call:
            # The call the code made here was recorded elsewhere in this scope. Only calls that
            # ran at the same time may trade places: their order was the scheduler's.
            if event.call_id in self._served or _overlapped(event, sibling):
                blocker = self._blocker(sibling)
                if blocker is None:
                    self._serve(sibling)
                    return sibling
                raise self._out_of_order(blocker, sibling, _describe(kind, key, call_id, input_json))
            if call_id not in self._served:
                raise self._out_of_order(event, sibling, _describe(kind, key, call_id, input_json))
        attempted = _describe(kind, key, call_id, input_json)
        if event is not None and call_id not in self._served and same_call:
            self._reached.add(call_id)
            diff = self._diff(event.input_json, input_json)
            raise InputChangedError(
                f"Replay of run {self.run_id} diverged at seq {event.seq} (call id {call_id}): "
                f"the code made the recorded {kind} call {key!r} with a different input.\n"
                f"Recorded: {event.describe()}\nAttempted: {attempted}\n"
                f"Input diff (- recorded, + attempted):\n{diff}\n"
                "Fix the code so it sends the recorded input, or leave volatile fields out of the "
                "comparison: ignore_paths=[...] in spanreplay.replay(), --ignore PATH on the command line.",
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
        # The seq is the call's own, as in .seq, the caught-divergence note and `spanreplay check`;
        # the recording's last step is said beside it.
        raise UnexpectedCallError(
            f"Replay of run {self.run_id} diverged at seq {seq} (call id {call_id}): the code made a "
            f"call the recording does not have.\nRecorded: nothing more in this scope (the recording's "
            f"last step is seq {last}, run status {self.log.run.status})\nAttempted: {attempted}\n"
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
        error = LeftoverEventsError(
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
        self._note_gaps(error)
        raise error

    @property
    def served(self) -> int:
        return len(self._served)

    # -- internals ------------------------------------------------------------

    def _serve(self, event: Event) -> None:
        served = self._served
        served.add(event.call_id)
        nested = self._nested.get(event.call_id)
        if not nested:
            return
        # The real work never runs on replay, so neither do the boundaries nested in it,
        # in its own scope or in the tasks and threads it started.
        stack = list(nested)
        while stack:
            child = stack.pop()
            served.add(child.call_id)
            stack.extend(self._nested.get(child.call_id, ()))

    def _blocker(self, event: Event) -> Event | None:
        """The first earlier sibling of ``event`` still unserved that did not run at the same time.

        Called just before ``event`` is served when there is none: an in-order call moves
        its scope's cursor past itself, so the next one is checked in constant time.
        """
        scope, index = self._position[event.call_id]
        start = self._cursor.get(scope, 0)
        if start == index:  # in order: every earlier sibling was served
            self._cursor[scope] = index + 1
            return None
        siblings = self._children[scope]
        served = self._served
        while start < index and siblings[start].call_id in served:
            start += 1
        self._cursor[scope] = start
        for sibling in itertools.islice(siblings, start, index):
            if (
                sibling.call_id not in served
                and sibling.call_id not in self._reached
                and not _overlapped(sibling, event)
            ):
                return sibling
        return None

    def _out_of_order(self, expected: Event, taken: Event, attempted: str) -> DifferentCallError:
        return DifferentCallError(
            f"Replay of run {self.run_id} diverged at seq {expected.seq}: the code made a call out "
            f"of the recorded order.\nRecorded: {expected.describe()}, and after it, not at the same "
            f"time, seq {taken.seq}: {taken.describe()}\nAttempted: {attempted}, the call recorded at "
            f"seq {taken.seq}, before the one at seq {expected.seq}\n"
            "Calls that ran one after the other keep their order on replay (only calls that overlapped "
            "in time, such as those of one asyncio.gather, may trade places); find what skipped or "
            f"reordered the call at seq {expected.seq}.",
            run_id=self.run_id,
            seq=expected.seq,
            call_id=taken.call_id,
            recorded=expected.describe(),
            attempted=attempted,
        )

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


def _describe(kind: str, key: str, call_id: str, input_json: bytes) -> str:
    # No seq: the replay's own count of calls may differ from the recording's once the
    # code has taken another path, and a message names the recorded seq alone.
    text = input_json.decode("utf-8", "replace")
    if len(text) > 120:
        text = text[:117] + "..."
    return f"{kind} {key!r} (call id {call_id}, input {text})"


def _overlapped(a: Event, b: Event) -> bool:
    """Whether two recorded calls ran at the same time (their spans overlap); unknown is no."""
    if not (a.start_ns and a.end_ns and b.start_ns and b.end_ns):
        return False
    return a.start_ns < b.end_ns and b.start_ns < a.end_ns


_BRANCH_SEGMENT = sc.KIND_BRANCH + ":"


def enclosing_call(call_id: str) -> str:
    """The call id of the boundary a call was made in, past any branch scopes, or ``""``."""
    head = call_id.rpartition("/")[0]
    while head:
        parent, _, last = head.rpartition("/")
        if not last.startswith(_BRANCH_SEGMENT):
            return head
        head = parent
    return ""

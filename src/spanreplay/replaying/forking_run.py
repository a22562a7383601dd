"""Fork a recorded run and go live: its steps are served up to a point, then the real work runs.

``with spanreplay.fork("traces/", run_id, at=6) as run: main()`` records a new
run. Each call whose recorded step (and every step recorded inside it) comes
before seq ``at`` is served from the parent run, overrides included; from the
first call that reaches ``at`` on, the real work runs and is recorded. With
``at=None`` the fork replays as long as the code matches the recording and goes
live at the first call that does not. A call before ``at`` that does not match
is a divergence, as in a replay: the fork point was given, and the code must
reach it the recorded way.

The new run's trace holds the served steps too, each marked with the run it was
served from (``spanreplay.served_from``), with the parent's seqs and call ids, so
the fork replays on its own. Its root span names the parent
(``spanreplay.run.forked_from``) and its first live step
(``spanreplay.run.forked_at``). A served step costs nothing: its span carries
the request, not the parent's token usage. An override served in a fork is
recorded in the new run masked, like any recorded output.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

from spanreplay import semconv as sc
from spanreplay.errors import ConfigurationError, LiveEffectRefusedError, ReplayDivergenceError, UnfinishedEffectError
from spanreplay.model.error_records import rebuild_error
from spanreplay.model.events import Event, EventLog
from spanreplay.recording.recording_run import RecordingRun
from spanreplay.run.base import BoundaryCall, Scope, current_scope_var
from spanreplay.run.calls import Call
from spanreplay.sources import open_source

from .effects import refuse_live_effect, served_effect
from .engine import enclosing_call
from .overrides import Served
from .replaying_run import ReplayingRun, served_value

__all__ = ["ForkingRun", "fork"]


def fork(
    source: str | os.PathLike[str] | EventLog,
    run_id: str | None = None,
    *,
    at: int | None = None,
    overrides: Mapping[int | str, Any] | None = None,
    agent: str | None = None,
    allow_effects: bool = False,
    ignore_paths: Sequence[str] = (),
) -> ForkingRun:
    """Fork run ``run_id`` of ``source``: ``with spanreplay.fork("traces/", run_id, at=6) as run: ...``.

    Args:
        source: a trace file, directory, glob, or an EventLog (as for ``replay()``).
        run_id: the run to fork; may be left out when the source holds one run.
        at: the seq of the first step to run live; the steps before it are served from
            the recording. None: serve while the code matches the recording, and go
            live at the first call that does not.
        overrides: what-if edits of the served steps, as for ``replay(overrides=)``.
        agent: the new run's agent name (default: the parent's).
        allow_effects: go live even at a step that changes the world and whose
            recording holds no outcome (it may have happened already).
        ignore_paths: JSON paths left out of the input comparison of the served steps.

    Returns:
        The new run, a context manager like ``record()``; ``run.run_id`` is its id,
        ``run.forked_at`` the seq of its first live step once it went live.
    """
    log = source if isinstance(source, EventLog) else open_source(source).load(run_id)
    return ForkingRun(
        log, at=at, overrides=overrides, agent=agent, allow_effects=allow_effects, ignore_paths=ignore_paths
    )


class ForkingRun(RecordingRun):
    """A recorded run that starts as a replay of another one, then goes live."""

    serves_recorded = True

    def __init__(
        self,
        log: EventLog,
        *,
        at: int | None = None,
        overrides: Mapping[int | str, Any] | None = None,
        agent: str | None = None,
        run_id: str | None = None,
        allow_effects: bool = False,
        ignore_paths: Sequence[str] = (),
    ) -> None:
        last = log.events[-1].seq if len(log) else 0
        if at is not None and (isinstance(at, bool) or not isinstance(at, int) or not 1 <= at <= last + 1):
            raise ConfigurationError(
                f"fork(at={at!r}) is not a step of run {log.run_id}: give the seq of the first step to run live, "
                f"from 1 to {last + 1} ({last + 1}: after the last recorded step), or at=None to go live where "
                "the code stops matching the recording."
            )
        super().__init__(agent or log.run.agent or "agent", run_id, forked_from=log.run_id)
        # The parent run's replay, never entered: its engine matches the calls, it masks inputs
        # as the parent was masked, and it holds the overrides.
        self.parent = ReplayingRun(log, ignore_paths=ignore_paths, require_all_steps=False, overrides=overrides)
        self.at = at
        self.allow_effects = allow_effects
        # The seq of the first step run live; None while the fork serves the parent's steps.
        self.forked_at: int | None = None
        self._lock = threading.Lock()
        self._diverged: ReplayDivergenceError | None = None
        # The last seq recorded within each step (itself or a step nested in it): serving a
        # step serves those too, so it is served only when all of them come before ``at``.
        self._last_seq: dict[str, int] = {}
        # The steps recorded directly inside each step (through any tasks or threads it started).
        self._inside: dict[str, list[Event]] = {}
        for event in log:
            self._inside.setdefault(enclosing_call(event.call_id), []).append(event)
            self._last_seq[event.call_id] = max(self._last_seq.get(event.call_id, 0), event.seq)
            head = enclosing_call(event.call_id)
            while head:
                self._last_seq[head] = max(self._last_seq.get(head, 0), event.seq)
                head = enclosing_call(head)
        self._check_overrides_before_fork_point()

    def _check_overrides_before_fork_point(self) -> None:
        overrides = self.parent.overrides
        if overrides is None or self.at is None:
            return
        late = [(call_id, seq) for call_id, seq in overrides.seqs().items() if seq is not None and seq >= self.at]
        if late:
            call_id, seq = late[0]
            raise ConfigurationError(
                f"The override of seq {seq} ({call_id}) is at or after the fork point (at={self.at}) of run "
                f"{self.parent.run_id}: from there the real work runs, so it would never be served. Fork later "
                "(a larger at=) or drop the override."
            )

    # -- boundaries -----------------------------------------------------------

    @property
    def went_live(self) -> bool:
        """Whether the fork runs the real work now (from seq ``forked_at`` on)."""
        return self.forked_at is not None

    def call(self, call: BoundaryCall) -> Any:
        scope, key, call_id, seq = self._next_call(call.kind, call.key)
        if not self.went_live:
            step = self._serve(scope, call_id, call.kind, key, seq, call.input)
            if step is not None:
                if step.event.awaited:
                    return self.record_call_async(
                        scope, call_id, step.event.seq, key, self._served(call, step, awaits=True)
                    )
                return self.record_call(scope, call_id, step.event.seq, key, self._served(call, step, awaits=False))
        return self.record_call(scope, call_id, seq, key, call)

    def call_async(self, call: BoundaryCall) -> Awaitable[Any]:
        scope, key, call_id, seq = self._next_call(call.kind, call.key)
        if not self.went_live:
            step = self._serve(scope, call_id, call.kind, key, seq, call.input)
            if step is not None:
                return self.record_call_async(
                    scope, call_id, step.event.seq, key, self._served(call, step, awaits=True)
                )
        return self.record_call_async(scope, call_id, seq, key, call)

    def _served(self, call: BoundaryCall, step: _Step, *, awaits: bool) -> BoundaryCall:
        """``call`` with the parent's step served in place of its function, recorded as served."""
        event, override, decode = step.event, step.override, call.decode
        marked = {**(call.attributes or {}), sc.SERVED_FROM: self.parent.run_id}
        if awaits:

            async def work_async() -> Any:
                self._record_nested(event.call_id)
                return await served_value(event, override, decode, awaits=True)

            return replace(call, function=work_async, attributes=marked)

        def work() -> Any:
            self._record_nested(event.call_id)
            return served_value(event, override, decode, awaits=False)

        return replace(call, function=work, attributes=marked)

    def begin(
        self,
        kind: str,
        key: str,
        input: Any,
        *,
        attributes: dict[str, Any] | None = None,
        span_name: str | None = None,
        input_json: bytes | None = None,
    ) -> Call:
        scope, key, call_id, seq = self._next_call(kind, key)
        if not self.went_live:
            served = self._serve(scope, call_id, kind, key, seq, input)
            if served is not None:
                event = served.event
                marked = {**(attributes or {}), sc.SERVED_FROM: self.parent.run_id}
                call = self.begin_call(scope, call_id, event.seq, kind, key, input, marked)
                if span_name is not None:
                    call.rename(span_name)
                with call.activate():
                    self._record_nested(event.call_id)
                error = served.error or (
                    rebuild_error(event.error, where=f"run {event.run_id} seq {event.seq}")
                    if event.error is not None
                    else None
                )
                if error is None:
                    call.finish(event.output)
                else:
                    call.fail(error, output=event.output)
                if served.error is not None:
                    raise served.error  # the exception given in place of the step's outcome
                # The instrumentation serves the recorded exchange to its SDK, as in a replay.
                call.recorded = event
                return call
        call = self.begin_call(scope, call_id, seq, kind, key, input, attributes)
        if span_name is not None:
            call.rename(span_name)
        return call

    def _serve(self, scope: Scope, call_id: str, kind: str, key: str, seq: int, input: Any) -> _Step | None:
        """The parent's step for this call, or None when the fork goes live at it."""
        scope_id = scope.call_id
        parent = self.parent
        overrides = parent.overrides
        data = parent._encoded_input(kind, key, input, call_id)
        served: Served | None = None
        try:
            if overrides is not None and call_id in overrides:
                served = parent.take_override(scope_id, call_id, kind, key, seq, data, input)
                event = served.event
            else:
                event = parent._take(scope_id, call_id, kind, key, seq, data, input)
        except ReplayDivergenceError as exc:
            if self.at is not None and (exc.seq is None or exc.seq < self.at):
                # Before the fork point the code must make the recorded calls: fail closed.
                self._remember(exc)
                exc.add_note(
                    f"The fork goes live at seq {self.at}; before it the code must match run {parent.run_id}. "
                    "Fork at this step or earlier, or with at=None to go live where the code stops matching."
                )
                # The new run holds the refused call, with the divergence as its error: its seq has no gap.
                span, _ = self._start(scope, call_id, seq, kind, key, input, None)
                self.finish_boundary(span, kind, key, None, exc)
                raise
            self._go_live(seq, parent.events.by_call_id(call_id))
            return None
        in_recording = overrides is None or call_id not in overrides.added
        if in_recording and event.unfinished:
            # A side effect the recorded process died inside: it has no outcome to serve.
            # Before the fork point that ends the fork (fail closed); at or after it, the
            # fork goes live here only when allow_effects says running it again is safe.
            if self.at is not None and event.seq < self.at:
                try:
                    served_effect(parent.engine, event)
                except UnfinishedEffectError as exc:
                    self._remember(exc)
                    raise
            self._go_live(seq, event)
            return None
        if in_recording and self.at is not None and self._last_seq.get(call_id, event.seq) >= self.at:
            self._go_live(seq, event)
            return None
        if in_recording:
            # The new run numbers its steps as the parent did: the steps nested in this one
            # are served with it, and the next call takes the seq after them.
            self._seq = itertools.count(self._last_seq.get(call_id, event.seq) + 1)
        return _Step(event, served.error if served is not None else None, served)

    def _record_nested(self, call_id: str) -> None:
        """Write the steps recorded inside a served step, as served: the new run holds every seq.

        Run inside the served step's own scope (``record_call`` or ``Call.activate``), so
        their spans nest under its span. None of them runs: the step is served whole.
        """
        for nested in self._inside.get(call_id, ()):
            scope = self._scope()
            span, child = self._start(
                scope,
                nested.call_id,
                nested.seq,
                nested.kind,
                nested.key,
                nested.input,
                {sc.SERVED_FROM: self.parent.run_id},
            )
            token = current_scope_var.set(child)
            try:
                self._record_nested(nested.call_id)
            finally:
                current_scope_var.reset(token)
            error = (
                rebuild_error(nested.error, where=f"run {nested.run_id} seq {nested.seq}")
                if nested.error is not None
                else None
            )
            self.finish_boundary(span, nested.kind, nested.key, nested.output if error is None else None, error)

    def _go_live(self, seq: int, recorded: Event | None) -> None:
        """From this call on the real work runs: the one place a fork decides to go live.

        ``recorded`` is the parent's step at this point (None when it has none). A step
        that changes the world and whose recording holds no outcome may have happened
        already; it is refused (``LiveEffectRefusedError``) unless ``allow_effects``,
        before any real work runs.
        """
        try:
            refuse_live_effect(recorded, run_id=self.parent.run_id, allow_effects=self.allow_effects)
        except LiveEffectRefusedError as exc:
            self._remember(exc)
            raise
        with self._lock:
            if self.forked_at is not None:
                return
            self.forked_at = seq
        span = self._span
        if span is not None:
            try:
                span.set_attribute(sc.RUN_FORKED_AT, seq)
            except Exception:
                self.internal_failure("mark where the fork went live")

    def _remember(self, error: ReplayDivergenceError) -> None:
        """The first divergence decides how the fork ends, even when the code catches it."""
        with self._lock:
            if self._diverged is None:
                self._diverged = error

    def __enter__(self) -> ForkingRun:
        super().__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        diverged = self._diverged
        if diverged is not None and exc is not diverged and (exc is None or isinstance(exc, Exception)):
            # The code caught the divergence and went on: the new run still ends with it, and says so.
            super().__exit__(type(diverged), diverged, diverged.__traceback__)
            raise diverged
        super().__exit__(exc_type, exc, tb)


class _Step:
    """A step served from the parent: the event, an override's exception, and the override itself."""

    __slots__ = ("error", "event", "override")

    def __init__(self, event: Event, error: BaseException | None, override: Served | None) -> None:
        self.event = event
        self.error = error
        self.override = override

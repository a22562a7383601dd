"""``SPANREPLAY_RUN_SCOPE=trace``: in zero-code mode, each trace the application starts is a run.

A server handles many requests in one process; recording the process as one run
would mix them. With the trace scope, the first boundary reached inside a trace
(under a web request's or a job's span) opens a run for that trace, and the run
ends when the trace's local root span ends, failed if that span ended with
status ERROR. Boundaries reached outside any trace share one run of their own.

Replay serves the one run ``SPANREPLAY_RUN_ID`` names to the first trace (or the
code outside any trace) that reaches a boundary, and ends it when that trace's
root span ends. Any other trace that reaches a boundary is refused with an
error: it was not recorded in that run, and running it live would reach the
network.

Runs opened here are bound to no context (``enter_process_wide(shared=False)``):
``current_run()`` finds them through this module's factory, which looks at the
current span, so one trace's run is never found from another trace.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from types import TracebackType

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import StatusCode

from spanreplay import semconv as sc
from spanreplay.errors import ConfigurationError, SpanReplayError, TraceFailedError
from spanreplay.recording.alerts import launched_run
from spanreplay.run.base import Run

__all__ = ["OUTSIDE_ANY_TRACE", "RootSpanEnd", "TraceRuns", "end_run"]

OUTSIDE_ANY_TRACE = 0
"""The key of the run that boundaries reached outside any trace share (no valid trace id is 0)."""


ExcInfo = tuple[type[BaseException] | None, BaseException | None, TracebackType | None]


class TraceRuns:
    """The open runs of a process in the trace scope, by trace id."""

    def __init__(self, make: Callable[[], Run], *, replaying: bool) -> None:
        self._make = make
        # Replay has one recorded run to serve: the first trace to reach a boundary takes it.
        self._replaying = replaying
        self._runs: dict[int, Run] = {}
        self._taken_by: int | None = None
        self._lock = threading.Lock()

    def current(self) -> Run | None:
        """The run of the trace the caller is in, opened on first use (``current_run()``'s factory)."""
        context = trace.get_current_span().get_span_context()
        trace_id = context.trace_id if context.is_valid else OUTSIDE_ANY_TRACE
        with self._lock:
            run = self._runs.get(trace_id)
            if run is not None:
                return run
            if self._replaying and self._taken_by is not None:
                raise ConfigurationError(_second_trace(trace_id, self._taken_by))
            run = self._make()
            run.enter_process_wide(shared=False)
            self._runs[trace_id] = run
            if self._replaying:
                self._taken_by = trace_id
            return run

    def end_trace(self, trace_id: int, root: ReadableSpan) -> None:
        """End the run of ``trace_id`` as its ``root`` span ended, if the trace opened one."""
        with self._lock:
            run = self._runs.pop(trace_id, None)
        if run is not None:
            failure = _failure(root)
            end_run(run, (TraceFailedError, failure, None) if failure is not None else (None, None, None))

    def end_all(self, exc_info: ExcInfo) -> None:
        """End every run still open (at interpreter exit: root spans that never ended, the outside run)."""
        with self._lock:
            runs, self._runs = list(self._runs.values()), {}
        for run in runs:
            end_run(run, exc_info)


def end_run(run: Run, exc_info: ExcInfo) -> None:
    """End a run zero-code mode opened, and say how it ended (this runs at exit or in a processor)."""
    try:
        run.exit_process_wide(*exc_info)
    except SpanReplayError as exc:  # a divergence found at the end: said, not raised into the exporter
        sys.stderr.write(f"spanreplay: {exc}\n")
    finally:
        launched_run(run.run_id, None)
    note = run.end_note(exc_info[1])
    if note is not None:
        with contextlib.suppress(OSError, ValueError):  # stderr closed at exit: nothing to tell then
            sys.stderr.write(note + "\n")


class RootSpanEnd(SpanProcessor):
    """Ends a trace's run when the trace's local root span ends (one whose parent is absent or remote)."""

    def __init__(self, runs: TraceRuns) -> None:
        self.runs: TraceRuns | None = runs

    def on_end(self, span: ReadableSpan) -> None:
        runs = self.runs
        context = span.context
        if runs is None or context is None or (span.parent is not None and not span.parent.is_remote):
            return
        runs.end_trace(context.trace_id, span)


def _failure(span: ReadableSpan) -> TraceFailedError | None:
    if span.status.status_code is not StatusCode.ERROR:
        return None
    for event in span.events:
        if event.name == sc.EXCEPTION_EVENT and event.attributes:
            kind = event.attributes.get(sc.EXCEPTION_TYPE)
            message = event.attributes.get(sc.EXCEPTION_MESSAGE, "")
            if kind:
                return TraceFailedError(f"{kind}: {message}")
    return TraceFailedError(span.status.description or f"span {span.name!r} ended with status ERROR")


def _second_trace(trace_id: int, taken_by: int) -> str:
    def named(key: int) -> str:
        return "code outside any trace" if key == OUTSIDE_ANY_TRACE else f"trace {key:032x}"

    return (
        f"SPANREPLAY_RUN_SCOPE=trace replays one run per process, and {named(taken_by)} took it; "
        f"{named(trace_id)} reached a boundary too, and it is not in that recording (running it live "
        "would reach the network). Send the process only the request that started the recorded run, "
        "or replay each run in a process of its own."
    )

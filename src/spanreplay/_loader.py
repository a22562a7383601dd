"""``load()`` and ``runs()``: from a trace source to an EventLog or a list of runs."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from . import _codec
from . import _semconv as sc
from ._events import EventLog, RunInfo, RunSummary
from ._spans import SpanRecord
from .errors import PayloadIntegrityError, RunNotFoundError, TraceFormatError
from .readers import SpanReplayWarning, iter_spans
from .readers._sources import STDIN

Source = str | os.PathLike[str]

__all__ = ["load", "runs"]

# Present on every line that holds a spanreplay span: lines without it are skipped unparsed.
_RUN_MARKER = sc.RUN_ID.encode()


def runs(source: Source) -> list[RunSummary]:
    """The spanreplay runs in a source, oldest first. Empty when it holds none."""
    if _is_postgres(source):
        from .postgres import runs as postgres_runs

        return postgres_runs(os.fspath(source))
    return _summaries(iter_spans(source, contains=_RUN_MARKER))


def load(source: Source, run_id: str | None = None) -> EventLog:
    """The EventLog of one run, ordered by seq, duplicates dropped, payloads verified.

    Args:
        source: a trace file, a directory, a glob, ``-`` for stdin, or a Postgres
            DSN (``postgresql://...``).
        run_id: the run to load; may be left out when the source holds exactly one.

    Raises:
        RunNotFoundError: the run is not in the source (the message lists those that are).
        TraceFormatError: the source cannot be read, or spans of the run were lost.
        PayloadIntegrityError: a payload was cut or altered on the way.
    """
    if _is_postgres(source):
        from .postgres import load as postgres_load

        return postgres_load(os.fspath(source), run_id)
    spans: Iterable[SpanRecord]
    if os.fspath(source) == STDIN:
        # stdin can be read once: keep its spanreplay spans to pick the run from.
        spans = list(iter_spans(source, contains=_RUN_MARKER))
        if run_id is None:
            run_id = _only_run(_summaries(spans), source)
    elif run_id is None:
        run_id = _only_run(runs(source), source)
        spans = iter_spans(source, contains=run_id.encode())
    else:
        spans = iter_spans(source, contains=run_id.encode())
    return _build(run_id, _dedupe(s for s in spans if s.attributes.get(sc.RUN_ID) == run_id), source)


def _is_postgres(source: Source) -> bool:
    # A DSN, not a path: the run is read from agent_steps (see spanreplay.postgres).
    return os.fspath(source).startswith(("postgresql://", "postgres://"))


def _only_run(found: list[RunSummary], source: Source) -> str:
    if len(found) == 1:
        return found[0].run_id
    if not found:
        raise RunNotFoundError(
            f"{os.fspath(source)} holds no spanreplay runs; record one with spanreplay.record() "
            "(or spanreplay demo) and load the directory it wrote to.",
            run_id=None,
        )
    listed = ", ".join(r.run_id for r in found[-5:])
    raise RunNotFoundError(
        f"{os.fspath(source)} holds {len(found)} runs; name one (the latest: {listed}). "
        "spanreplay runs SOURCE lists them all.",
        run_id=None,
        available=tuple(r.run_id for r in found),
    )


def _dedupe(spans: Iterable[SpanRecord]) -> Iterator[SpanRecord]:
    """One span per (trace id, span id), preferring the copy that ended."""
    seen: dict[tuple[str, str], SpanRecord] = {}
    for span in spans:
        previous = seen.get(span.key)
        if previous is None or span.end_ns > previous.end_ns:
            seen[span.key] = span
    return iter(seen.values())


def _build(run_id: str, spans: Iterable[SpanRecord], source: Source) -> EventLog:
    root: SpanRecord | None = None
    events = []
    by_seq: dict[int, Any] = {}
    for span in spans:
        if _codec.is_run_span(span):
            if root is None or span.end_ns > root.end_ns:
                root = span
        elif _codec.is_boundary_span(span):
            event = _codec.span_to_event(span)
            other = by_seq.get(event.seq)
            if other is not None and other.call_id != event.call_id:
                raise TraceFormatError(
                    f"Run {run_id} has two different spans at seq {event.seq} ({other.call_id} and "
                    f"{event.call_id}, {span.origin}); two runs share one run id. Record again with "
                    "distinct run ids.",
                    source=span.origin,
                )
            by_seq[event.seq] = event
            events.append(event)
    if root is None and not events:
        found = [r.run_id for r in runs(source)] if os.fspath(source) != STDIN else []
        listed = f" It holds: {', '.join(found[-5:])}." if found else " It holds no spanreplay runs."
        raise RunNotFoundError(
            f"Run {run_id} is not in {os.fspath(source)}.{listed} spanreplay runs SOURCE lists them.",
            run_id=run_id,
            available=tuple(found),
        )
    info = _codec.span_to_run(root) if root is not None else RunInfo(run_id=run_id, status=sc.RUN_STATUS_CRASHED)
    _check_gaps(info, by_seq, source)
    return EventLog(info, tuple(events))


def _check_gaps(info: RunInfo, by_seq: dict[int, Any], source: Source) -> None:
    last = info.steps if info.steps is not None else max(by_seq, default=0)
    missing = [seq for seq in range(1, last + 1) if seq not in by_seq]
    if not missing:
        return
    shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
    if info.status == sc.RUN_STATUS_CRASHED:
        # Boundaries still running when the process died never ended, so never got written.
        warnings.warn(
            f"Run {info.run_id} crashed; the boundaries at seq {shown} were still running and left no span.",
            SpanReplayWarning,
            stacklevel=3,
        )
        return
    raise TraceFormatError(
        f"Run {info.run_id} in {os.fspath(source)} is missing the spans at seq {shown} of {last}: they "
        "were lost on the way (an exporter dropped them, or a file of the run is missing). Load the "
        "run's own trace file from the recording machine, or all the Collector's export files.",
        source=os.fspath(source),
    )


def _summaries(spans: Iterable[SpanRecord]) -> list[RunSummary]:
    roots: dict[str, SpanRecord] = {}
    steps: dict[str, set[tuple[str, str]]] = {}
    first: dict[str, SpanRecord] = {}
    for span in spans:
        run_id = span.attributes.get(sc.RUN_ID)
        if not isinstance(run_id, str):
            continue
        if _codec.is_run_span(span):
            previous = roots.get(run_id)
            if previous is None or span.end_ns > previous.end_ns:
                roots[run_id] = span
        elif _codec.is_boundary_span(span):
            steps.setdefault(run_id, set()).add(span.key)
            if run_id not in first or span.start_ns < first[run_id].start_ns:
                first[run_id] = span
    out = []
    for run_id in roots.keys() | steps.keys():
        root = roots.get(run_id)
        error: str | None = None
        if root is not None:
            try:
                info = _codec.span_to_run(root)
                error = str(info.error) if info.error else None
            except (PayloadIntegrityError, TraceFormatError) as exc:
                info = RunInfo(run_id=run_id, status=str(root.attributes.get(sc.RUN_STATUS, "error")))
                error = f"(unreadable error payload: {exc})"
        else:
            any_span = first[run_id]
            info = RunInfo(
                run_id=run_id,
                status=sc.RUN_STATUS_CRASHED,
                trace_id=any_span.trace_id,
                start_ns=any_span.start_ns,
                service_name=str(any_span.resource.get(sc.SERVICE_NAME, "")),
            )
        out.append(
            RunSummary(
                run_id=run_id,
                agent=info.agent,
                status=info.status,
                error=error,
                steps=len(steps.get(run_id, ())),
                trace_id=info.trace_id,
                start_ns=info.start_ns,
                end_ns=info.end_ns,
                service_name=info.service_name,
            )
        )
    out.sort(key=lambda r: (r.start_ns, r.run_id))
    return out

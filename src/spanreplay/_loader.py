"""``load()`` and ``runs()``: from a trace source to an EventLog or a list of runs.

Loading one run streams the source once and parses only the lines that hold
its run id (quoted, so ``run_1`` does not pull in ``run_10``): a Collector export
of thousands of runs costs a substring search per line, and a broken line of
another run is never even looked at. Spans may come in any order, in several
files and more than once (exporter retries); the loader dedupes them by
(trace id, span id), orders them by seq and checks that no seq is missing.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterable
from typing import Final

from . import _codec
from . import _semconv as sc
from ._events import Event, EventLog, RunInfo, RunSummary
from ._spans import SpanRecord
from .errors import RunNotFoundError, SpanReplayError, TraceFormatError
from .readers import SpanReplayWarning, _backends, iter_spans
from .readers._base import warn
from .readers._sources import STDIN

Source = str | os.PathLike[str]

__all__ = ["load", "runs"]

# On every line that holds a spanreplay span: runs() skips the other lines unparsed.
_RUN_MARKER: Final = sc.RUN_ID.encode()
# Run ids made of these characters appear verbatim inside a JSON string, whoever
# wrote the JSON (no producer escapes them), so `"run_id"` finds exactly its lines.
_VERBATIM = re.compile(r"[A-Za-z0-9_.:+-]+")
_SHOWN: Final = 10


def runs(source: Source) -> list[RunSummary]:
    """The spanreplay runs in a source, oldest first. Empty when it holds none.

    Args:
        source: a trace file, a directory, a glob, ``-`` for stdin, a Postgres
            DSN (``postgresql://...``), or a backend's query API
            (``jaeger+http://host:16686``, ``tempo+http://host:3200``: the runs
            that ended in its recent traces, see ``docs/formats.md``).

    Raises:
        TraceFormatError: the source cannot be read (the message names the file and line).
    """
    # Each run's model calls, tokens and USD, from the same spans read once (spanreplay.cost).
    from .cost._calls import CallCollector, read_calls
    from .cost._runs import with_costs

    name = os.fspath(source)
    if _is_postgres(source):  # keep: Postgres sources (spanreplay.postgres, tests/test_postgres.py)
        from .postgres import runs as postgres_runs

        return with_costs(postgres_runs(name), read_calls(name).calls)
    calls = CallCollector()
    if _backends.is_backend(name):
        backend = _backends.parse(name)
        spans = _backends.search_spans(backend, sc.RUN_STATUS, (sc.RUN_STATUS_OK, sc.RUN_STATUS_ERROR))
        return with_costs(_summaries(calls.passing(spans)), calls.result(name).calls)
    found = _summaries(calls.passing(iter_spans(source, contains=_RUN_MARKER)))
    if not found and name != STDIN:
        # Lines without a run id were skipped unread; with no run found, make sure
        # that is because the source holds none, not because its lines are broken.
        _validate(source)
    return with_costs(found, calls.result(name).calls)


def load(source: Source, run_id: str | None = None) -> EventLog:
    """The EventLog of one run, ordered by seq, duplicates dropped, payloads verified.

    Args:
        source: a trace file, a directory, a glob, ``-`` for stdin, a Postgres
            DSN (``postgresql://...``), or a backend's query API
            (``jaeger+http://host:16686``, ``tempo+http://host:3200``).
        run_id: the run to load; may be left out when the source holds exactly one.
            From a backend it may also be the id of the trace that holds the run.

    Raises:
        RunNotFoundError: the run is not in the source (the message lists those that are),
            or no run id was given and the source holds several runs or none.
        TraceFormatError: the source cannot be read, or spans of a completed run were lost.
        PayloadIntegrityError: a payload was cut or altered on the way.
        SchemaVersionError: the run was recorded by a newer spanreplay.
    """
    if _is_postgres(source):  # keep: Postgres sources (spanreplay.postgres, tests/test_postgres.py)
        from .postgres import load as postgres_load

        return postgres_load(os.fspath(source), run_id)
    name = os.fspath(source)
    if name == STDIN:
        return _load_stdin(run_id)
    if _backends.is_backend(name):
        return _load_backend(name, run_id)
    if run_id is None:
        run_id = _only_run(runs(source), name)
    spans = [s for s in iter_spans(source, contains=_needle(run_id)) if s.attributes.get(sc.RUN_ID) == run_id]
    if not spans:
        raise _not_found(run_id, name, _listed(source))
    return _build(run_id, spans, source)


def _is_postgres(source: Source) -> bool:
    # A DSN, not a path: the run is read from agent_steps (spanreplay.postgres).
    return os.fspath(source).startswith(("postgresql://", "postgres://"))


def _load_stdin(run_id: str | None) -> EventLog:
    # stdin can be read once: every spanreplay line is parsed, and only the wanted
    # run's spans are kept (all runs' when the run is to be picked from them).
    by_run: dict[str, list[SpanRecord]] = {}
    for span in iter_spans(STDIN, contains=_RUN_MARKER if run_id is None else _needle(run_id)):
        found = span.attributes.get(sc.RUN_ID)
        if isinstance(found, str) and (run_id is None or found == run_id):
            by_run.setdefault(found, []).append(span)
    if run_id is None:
        run_id = _only_run(_summaries(s for spans in by_run.values() for s in spans), "stdin")
    if run_id not in by_run:
        raise _not_found(run_id, "stdin", None)
    return _build(run_id, by_run[run_id], STDIN)


def _load_backend(name: str, run_id: str | None) -> EventLog:
    # A backend is searched, not streamed: by trace id, or for spans carrying the run id.
    backend = _backends.parse(name)
    if run_id is None:
        run_id = _only_run(runs(name), backend.shown)
    if _backends.is_trace_id(run_id):
        spans = _backends.trace_spans(backend, run_id)
        if spans is None:
            raise RunNotFoundError(
                f"{backend.name} at {backend.shown} has no trace {run_id.lower()}; check the id, or that the "
                "trace is still within the backend's retention.",
                run_id=run_id,
            )
        in_trace = sorted({s.attributes[sc.RUN_ID] for s in spans if isinstance(s.attributes.get(sc.RUN_ID), str)})
        if len(in_trace) != 1:
            what = "no spanreplay run" if not in_trace else f"{len(in_trace)} runs ({', '.join(in_trace[:5])})"
            raise RunNotFoundError(
                f"Trace {run_id.lower()} in {backend.shown} holds {what}; pass a run id instead "
                f"(spanreplay runs {backend.shown} lists them).",
                run_id=run_id,
                available=tuple(in_trace),
            )
        run_id = in_trace[0]
        # The run may continue in other traces (a run scoped to a process spans requests).
        spans += _backends.search_spans(backend, sc.RUN_ID, (run_id,))
    else:
        spans = list(_backends.search_spans(backend, sc.RUN_ID, (run_id,)))
    mine = [s for s in spans if s.attributes.get(sc.RUN_ID) == run_id]
    if not mine:
        raise RunNotFoundError(
            f"Run {run_id} is not in {backend.shown}: no trace of the last {backend.lookback} holds a span "
            f"with {sc.RUN_ID}={run_id}; pass the trace id instead, or widen the search with ?lookback=30d "
            "(and name the service with ?service=NAME for Jaeger).",
            run_id=run_id,
        )
    return _build(run_id, mine, name)


def _needle(run_id: str) -> bytes:
    return b'"' + run_id.encode() + b'"' if _VERBATIM.fullmatch(run_id) else _RUN_MARKER


def _listed(source: Source) -> list[str] | None:
    """The runs in a source, for an error message; None when listing them fails too."""
    try:
        return [r.run_id for r in runs(source)]
    except SpanReplayError:
        return None


def _not_found(run_id: str, name: str, found: list[str] | None) -> RunNotFoundError:
    if found:
        listed = ", ".join(found[-5:])
        holds = (
            f", which holds {len(found)} run{'s' if len(found) != 1 else ''} (the latest: {listed}); pass one of those"
        )
        fix = f" (spanreplay runs {name} lists them all)"
    elif found is None:
        lister = "-, with the same input piped to it," if name == "stdin" else name
        holds, fix = "", f"; spanreplay runs {lister} lists the runs it holds"
    else:
        holds, fix = ", which holds no spanreplay runs; pass the source the run was recorded to", ""
    return RunNotFoundError(f"Run {run_id} is not in {name}{holds}{fix}.", run_id=run_id, available=tuple(found or ()))


def _only_run(found: list[RunSummary], name: str) -> str:
    if len(found) == 1:
        return found[0].run_id
    if not found:
        raise RunNotFoundError(
            f"{name} holds no spanreplay runs; record one with spanreplay.record() (or spanreplay demo) "
            "and load the directory it wrote to.",
            run_id=None,
        )
    listed = ", ".join(r.run_id for r in found[-5:])
    raise RunNotFoundError(
        f"{name} holds {len(found)} runs, so name the one to load (the latest: {listed}); "
        f"spanreplay runs {name} lists them all.",
        run_id=None,
        available=tuple(r.run_id for r in found),
    )


def _dedupe(spans: Iterable[SpanRecord]) -> list[SpanRecord]:
    """One span per (trace id, span id), preferring the copy that ended last."""
    seen: dict[tuple[str, str], SpanRecord] = {}
    for span in spans:
        previous = seen.get(span.key)
        if previous is None or span.end_ns > previous.end_ns:
            seen[span.key] = span
    return list(seen.values())


def _build(run_id: str, spans: Iterable[SpanRecord], source: Source) -> EventLog:
    name = os.fspath(source)
    root: SpanRecord | None = None
    by_seq: dict[int, tuple[Event, SpanRecord]] = {}
    by_call: dict[str, tuple[Event, SpanRecord]] = {}
    for span in _dedupe(spans):
        if _codec.is_run_span(span):
            if root is not None and root.key != span.key:
                raise _shared_run_id(run_id, f"two run spans ({root.origin} and {span.origin})", span.origin)
            root = span
        elif _codec.is_boundary_span(span):
            event = _codec.span_to_event(span)
            if event.seq < 1:
                raise TraceFormatError(
                    f"Run {run_id} has a span with seq {event.seq} ({span.origin}); spanreplay numbers "
                    "boundaries from 1, so the file was edited or not written by spanreplay.",
                    source=span.origin,
                )
            # Retried copies were merged above: a second span at one seq is a second recording.
            for found in (by_seq.get(event.seq), by_call.get(event.call_id)):
                if found is not None:
                    other, other_span = found
                    raise _shared_run_id(
                        run_id,
                        f"two spans for {other.call_id} at seq {other.seq} ({other_span.origin}) and "
                        f"{event.call_id} at seq {event.seq} ({span.origin})",
                        span.origin,
                    )
            by_seq[event.seq] = by_call[event.call_id] = (event, span)
    info = _codec.span_to_run(root) if root is not None else RunInfo(run_id=run_id, status=sc.RUN_STATUS_CRASHED)
    missing = _missing(info, sorted(by_seq))
    if missing is not None:
        listed, last = missing
        if info.status == sc.RUN_STATUS_CRASHED:
            # Boundaries still running when the process died never ended, so never got written.
            warn(
                f"Run {run_id} crashed; the boundaries at seq {listed} were still running and left no span, "
                "so replay stops matching there."
            )
        else:
            raise TraceFormatError(
                f"Run {run_id} in {name} is missing the spans at seq {listed} of {last}, lost on the way (an "
                "exporter dropped them, a file of the run is missing, or the OpenTelemetry SDK's attribute "
                "count limit evicted their run id: raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, default 128); load "
                "the run's own trace file from the recording machine, or every file the Collector "
                f"exported{_damage(source)}.",
                source=name,
            )
    return EventLog(info, tuple(_codec.rebuild_inputs([event for event, _ in by_seq.values()])))


def _shared_run_id(run_id: str, what: str, origin: str) -> TraceFormatError:
    return TraceFormatError(
        f"Run {run_id} holds {what}, so two recordings share one run id; load each from its own file, "
        "or record again with distinct run ids.",
        source=origin,
    )


def _missing(info: RunInfo, present: list[int]) -> tuple[str, int] | None:
    """The missing seqs as text (the first few, then a count) and the last seq, or None."""
    last = info.steps if info.steps is not None else (present[-1] if present else 0)
    missing, expected = 0, 1
    shown: list[int] = []
    # Walk the gaps rather than every seq: a bogus step count must not make this loop forever.
    for seq in [*(s for s in present if s <= last), last + 1]:
        if seq > expected:
            missing += seq - expected
            shown.extend(range(expected, min(seq, expected + _SHOWN - len(shown))))
        expected = seq + 1
    if not missing:
        return None
    return ", ".join(map(str, shown)) + (f" and {missing - len(shown)} more" if missing > len(shown) else ""), last


def _damage(source: Source) -> str:
    """A damaged line the run filter skipped, which may have held the lost spans."""
    if os.fspath(source) == STDIN or _backends.is_backend(os.fspath(source)):
        return ""  # read once, already consumed; or a backend, which has no lines to check
    try:
        _validate(source)
    except TraceFormatError as exc:
        return f" (the source is also damaged, which may be where they went: {str(exc).rstrip('.')})"
    return ""


def _validate(source: Source) -> None:
    """Read every line of a source, raising on the first one that is broken."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpanReplayWarning)  # already shown by the first read
        for _ in iter_spans(source):
            pass


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
    out = [
        _summary(run_id, roots.get(run_id), first.get(run_id), len(steps.get(run_id, ())))
        for run_id in roots.keys() | first.keys()
    ]
    out.sort(key=lambda r: (r.start_ns, r.run_id))
    return out


def _summary(run_id: str, root: SpanRecord | None, first: SpanRecord | None, steps: int) -> RunSummary:
    error: str | None = None
    if root is not None:
        try:
            info = _codec.span_to_run(root)
            error = str(info.error) if info.error else None
        except SpanReplayError as exc:
            # A listing shows every run; the broken one says why (load() raises it).
            info = RunInfo(run_id=run_id, status=str(root.attributes.get(sc.RUN_STATUS, sc.RUN_STATUS_ERROR)))
            error = f"(unreadable run span: {exc})"
    else:
        assert first is not None  # a run id is listed because a root or a boundary carried it
        info = RunInfo(
            run_id=run_id,
            status=sc.RUN_STATUS_CRASHED,
            trace_id=first.trace_id,
            start_ns=first.start_ns,
            service_name=str(first.resource.get(sc.SERVICE_NAME, "")),
        )
    return RunSummary(
        run_id=run_id,
        agent=info.agent,
        status=info.status,
        error=error,
        steps=steps,
        trace_id=info.trace_id,
        start_ns=info.start_ns,
        end_ns=info.end_ns,
        service_name=info.service_name,
    )

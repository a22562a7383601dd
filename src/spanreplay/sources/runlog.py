"""From span records to what load() and runs() return: an EventLog, run summaries.

Every span source (files, stdin, Jaeger, Tempo) ends here: spans may come in any
order, from several files and more than once (exporter retries); a run's spans
are deduped by (trace id, span id), ordered by seq and checked for gaps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Final

from .. import _codec
from .. import _semconv as sc
from .._events import Event, EventLog, RunInfo, RunSummary
from .._input_refs import rebuild_inputs
from .._spans import SpanRecord
from ..errors import RunNotFoundError, SpanReplayError, TraceFormatError
from ..readers import warn

# Sees every span a listing reads, so that another consumer (cost's columns of
# ``spanreplay runs``) reads the source once with it.
SpanTap = Callable[[SpanRecord], object]

# On every line that holds a spanreplay span: a listing skips the other lines unparsed.
RUN_MARKER: Final = sc.RUN_ID.encode()
# Run ids made of these characters appear verbatim inside a JSON string, whoever
# wrote the JSON (no producer escapes them), so `"run_id"` finds exactly its lines.
_VERBATIM = re.compile(r"[A-Za-z0-9_.:+-]+")
_SHOWN: Final = 10


def needle(run_id: str) -> bytes:
    return b'"' + run_id.encode() + b'"' if _VERBATIM.fullmatch(run_id) else RUN_MARKER


def not_found(run_id: str, name: str, found: list[str] | None) -> RunNotFoundError:
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


def only_run(found: list[RunSummary], name: str) -> str:
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


def dedupe(spans: Iterable[SpanRecord]) -> list[SpanRecord]:
    """One span per (trace id, span id), preferring the copy that ended last.

    Copies of one span are exporter retries, or a run span written when it started
    and again when it ended: an ended copy replaces one that never ended. Two ended
    copies that record different things cannot both be the recording, and picking
    one would replay a guess, so they raise a TraceFormatError naming both.
    """
    seen: dict[tuple[str, str], SpanRecord] = {}
    for span in spans:
        previous = seen.get(span.key)
        if previous is not None and previous.ended and span.ended:
            _same_recording(previous, span)
        if previous is None or span.end_ns > previous.end_ns:
            seen[span.key] = span
    return list(seen.values())


def _same_recording(first: SpanRecord, second: SpanRecord) -> None:
    """Refuse two ended copies of one span that differ in what spanreplay reads from them."""
    if first.attributes == second.attributes:
        return  # the common case: a retried export, equal to the byte
    names = sorted(
        name
        for name in first.attributes.keys() | second.attributes.keys()
        if name.startswith("spanreplay.") and first.attributes.get(name) != second.attributes.get(name)
    )
    if not names:
        return  # a processor on the way added or changed attributes of its own: the recording is the same
    run_id = first.attributes.get(sc.RUN_ID)
    listed = [*names[:3], f"{len(names) - 3} more"] if len(names) > 4 else names
    shown = listed[0] if len(listed) == 1 else ", ".join(listed[:-1]) + " and " + listed[-1]
    raise TraceFormatError(
        f"Run {run_id} holds two ended copies of span {first.span_id} that differ in {shown} "
        f"({first.origin} and {second.origin}), so which one was recorded cannot be told; remove the "
        "wrong copy, or load the run's own trace file.",
        source=second.origin,
    )


def build_log(run_id: str, spans: Iterable[SpanRecord], name: str, damage: Callable[[], str]) -> EventLog:
    """The EventLog of one run from its spans; ``damage`` words, for the message, a broken line
    the run filter skipped (empty when there is none or nothing to check)."""
    root: SpanRecord | None = None
    by_seq: dict[int, tuple[Event, SpanRecord]] = {}
    by_call: dict[str, tuple[Event, SpanRecord]] = {}
    for span in dedupe(spans):
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
                f"exported{damage()}.",
                source=name,
            )
    return EventLog(info, tuple(rebuild_inputs([event for event, _ in by_seq.values()])))


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


def summaries(spans: Iterable[SpanRecord], tap: SpanTap | None = None) -> list[RunSummary]:
    """The runs the spans hold, oldest first; ``tap`` (when given) sees every span."""
    roots: dict[str, SpanRecord] = {}
    steps: dict[str, _Seqs] = {}
    first: dict[str, SpanRecord] = {}
    for span in spans:
        if tap is not None:
            tap(span)
        run_id = span.attributes.get(sc.RUN_ID)
        if not isinstance(run_id, str):
            continue
        if _codec.is_run_span(span):
            previous = roots.get(run_id)
            if previous is None or span.end_ns > previous.end_ns:
                roots[run_id] = span
        elif _codec.is_boundary_span(span):
            found = steps.get(run_id)
            if found is None:
                found = steps[run_id] = _Seqs()
            found.add(span)
            if run_id not in first or span.start_ns < first[run_id].start_ns:
                first[run_id] = span
    out = [
        _summary(run_id, roots.get(run_id), first.get(run_id), steps[run_id].count if run_id in steps else 0)
        for run_id in roots.keys() | first.keys()
    ]
    out.sort(key=lambda r: (r.start_ns, r.run_id))
    return out


class _Seqs:
    """The distinct seqs of one run's boundary spans, one bit each.

    A listing reads every span of every run, so what it keeps per span decides
    its memory: a set of span keys held hundreds of bytes per step. Copies of a
    span (exporter retries) share its seq, so distinct seqs count the steps. A
    seq far beyond the steps seen so far, or none (no recorder writes either),
    is counted by span key instead, so that a bogus seq cannot make the bitmap huge.
    """

    __slots__ = ("bits", "count", "odd")

    def __init__(self) -> None:
        self.bits = bytearray()
        self.count = 0
        self.odd: set[tuple[str, str]] = set()

    def add(self, span: SpanRecord) -> None:
        seq = span.attributes.get(sc.SEQ)
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            seq = 0
        byte, mask = seq >> 3, 1 << (seq & 7)
        if byte < len(self.bits) and self.bits[byte] & mask:
            return  # a copy of a step counted already
        if self.odd and span.key in self.odd:
            return
        if not 0 < seq <= 8 * self.count + _SLACK:
            self.odd.add(span.key)
            self.count += 1
            return
        if byte >= len(self.bits):
            self.bits.extend(bytes(max(byte + 1, 2 * len(self.bits)) - len(self.bits)))
        self.bits[byte] |= mask
        self.count += 1


# A seq up to eight times the steps counted so far, plus this, is kept as a bit:
# the bitmap stays within a few bytes a step, whatever seqs a file holds.
_SLACK: Final = 1 << 15


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

"""One run's EventLog built from its spans as they are read, each span dropped once decoded.

A long run's spans hold every payload twice over (the attribute text, its
digests, the resource, the scope) and its events hold each once: holding only
the events is what bounds ``load()``. Copies of a span (exporter retries, a side
effect's intent and its outcome) are told apart by their decoded events; when two
ended copies decode differently, the spans are read again (``again``) and
``dedupe`` names the attributes they differ in, as it would have for the list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from spanreplay import semconv as sc
from spanreplay.errors import SpanReplayError, TraceFormatError
from spanreplay.model import codec
from spanreplay.model.events import Event, EventLog, RunInfo
from spanreplay.model.input_refs import rebuild_inputs
from spanreplay.model.spans import SpanRecord

from .runlog import dedupe, missing_error, missing_seqs, shared_run_id, warn_crashed

__all__ = ["build_log"]


@dataclasses.dataclass(slots=True)
class _Copy:
    """The copy of one span that load() keeps so far: decoded, or why it cannot be."""

    end_ns: int
    ended: bool
    decoded: Event | SpanReplayError
    origin: str


def build_log(
    run_id: str,
    spans: Iterable[SpanRecord],
    name: str,
    damage: Callable[[], str],
    *,
    again: Callable[[], Iterable[SpanRecord]] | None = None,
) -> EventLog:
    """The EventLog of one run from its spans; ``damage`` words, for the message, a broken line
    the run filter skipped (empty when there is none or nothing to check).

    Args:
        again: the same spans, read anew, for the message that names how two ended
            copies of a span differ; a list of spans is its own.
    """
    if again is None and isinstance(spans, list):
        listed = spans

        def again() -> Iterable[SpanRecord]:
            return listed

    roots: list[SpanRecord] = []
    copies: dict[tuple[str, str], _Copy] = {}
    for span in spans:
        if codec.is_run_span(span):
            roots.append(span)
        elif codec.is_boundary_span(span):
            _keep(copies, span, again)
    root = _root(run_id, dedupe(roots))
    by_seq = _one_per_seq(run_id, copies)
    del copies
    info = codec.span_to_run(root) if root is not None else RunInfo(run_id=run_id, status=sc.RUN_STATUS_CRASHED)
    missing = missing_seqs(info, sorted(by_seq))
    if missing is not None:
        shown, last = missing
        if info.status != sc.RUN_STATUS_CRASHED:
            raise missing_error(run_id, name, shown, last, damage())
        warn_crashed(run_id, shown)
    return EventLog(info, tuple(rebuild_inputs([event for event, _ in by_seq.values()])))


def _one_per_seq(run_id: str, copies: dict[tuple[str, str], _Copy]) -> dict[int, tuple[Event, str]]:
    """The kept copies by seq; a copy that cannot be decoded, or two steps at one seq or call id, raise."""
    by_seq: dict[int, tuple[Event, str]] = {}
    by_call: dict[str, tuple[Event, str]] = {}
    for copy in copies.values():
        if isinstance(copy.decoded, SpanReplayError):
            raise copy.decoded
        event = copy.decoded
        if event.seq < 1:
            raise TraceFormatError(
                f"Run {run_id} has a span with seq {event.seq} ({copy.origin}); spanreplay numbers "
                "boundaries from 1, so the file was edited or not written by spanreplay.",
                source=copy.origin,
            )
        # Retried copies were merged above: a second span at one seq is a second recording.
        for found in (by_seq.get(event.seq), by_call.get(event.call_id)):
            if found is not None:
                other, where = found
                raise shared_run_id(
                    run_id,
                    f"two spans for {other.call_id} at seq {other.seq} ({where}) and "
                    f"{event.call_id} at seq {event.seq} ({copy.origin})",
                    copy.origin,
                )
        by_seq[event.seq] = by_call[event.call_id] = (event, copy.origin)
    return by_seq


def _keep(
    copies: dict[tuple[str, str], _Copy], span: SpanRecord, again: Callable[[], Iterable[SpanRecord]] | None
) -> None:
    """Decode ``span`` and keep it when it is the copy load() keeps (the one that ended last)."""
    previous = copies.get(span.key)
    try:
        decoded: Event | SpanReplayError = codec.span_to_event(span)
    except SpanReplayError as exc:
        decoded = exc
    if previous is not None and previous.ended and span.ended and not _alike(previous.decoded, decoded):
        if again is None:
            raise TraceFormatError(
                f"Run {span.attributes.get(sc.RUN_ID)} holds two ended copies of span {span.span_id} that "
                f"differ ({previous.origin} and {span.origin}), so which one was recorded cannot be told; "
                "remove the wrong copy, or load the run's own trace file.",
                source=span.origin,
            )
        # Names the attributes the copies differ in, or finds they differ only where spanreplay does not read.
        dedupe(s for s in again() if s.key == span.key)
    if previous is None or span.end_ns > previous.end_ns:
        copies[span.key] = _Copy(span.end_ns, span.ended, decoded, span.origin)


def _alike(first: Event | SpanReplayError, second: Event | SpanReplayError) -> bool:
    """Whether two ended copies of a span decode to the same step (their times aside)."""
    if isinstance(first, SpanReplayError) or isinstance(second, SpanReplayError):
        return False
    return first == dataclasses.replace(second, start_ns=first.start_ns, end_ns=first.end_ns)


def _root(run_id: str, roots: list[SpanRecord]) -> SpanRecord | None:
    if len(roots) > 1:
        first, second = roots[0], roots[1]
        raise shared_run_id(run_id, f"two run spans ({first.origin} and {second.origin})", second.origin)
    return roots[0] if roots else None

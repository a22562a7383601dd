"""From span records to what load() and runs() return: an EventLog, run summaries.

Every span source (files, stdin, Jaeger, Tempo) ends here: spans may come in any
order, from several files and more than once (exporter retries); a run's spans
are deduped by (trace id, span id), ordered by seq and checked for gaps.

A listing and a load must agree: a run that ``load()`` refuses is not "ok" in
``runs()``. The listing keeps a few bytes a step, so it cannot check all that a
load checks, but it notices what makes a load refuse a whole run (a damaged line
that held its spans, missing steps, two recordings under one id) and names it in
``RunSummary.damaged``; a file source then asks the load itself for its sentence.
"""

from __future__ import annotations

import dataclasses
import re
from array import array
from collections.abc import Callable, Iterable, Sequence
from itertools import chain
from typing import Final

from spanreplay import semconv as sc
from spanreplay.errors import RunNotFoundError, SpanReplayError, TraceFormatError
from spanreplay.model import codec as _codec
from spanreplay.model.events import RunInfo, RunSummary
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import Damage, listed_damage, warn

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


def damaged_run(run_id: str, owned: list[Damage]) -> TraceFormatError:
    """The refusal of a run that a damaged line (or a file skipped part way) held spans of."""
    files = [d for d in owned if d.whole_file]
    if files:
        what = f"{files[0].source} held spans of it but was read only in part ({files[0].reason})"
        fix = "raise the limit it names or repair the file"
    else:
        lines = "lines" if len(owned) > 1 else "line"
        what = f"the damaged {lines} {listed_damage(owned)} held spans of it"
        fix = f"repair the {lines}"
    return TraceFormatError(
        f"Run {run_id} cannot be loaded: {what}, so a replay would lack a step; load the run from another "
        f"copy of its trace (the recording machine's file, or the Collector's export), or {fix} (the other "
        "runs of the source still load).",
        source=owned[0].source,
        line=owned[0].line,
    )


def unread_damage(damage: Iterable[Damage]) -> str:
    """A clause naming the damaged lines and the files a read skipped, which may hold a run; "" when none."""
    skipped = list(damage)
    if not skipped:
        return ""
    return f" ({listed_damage(skipped)} could not be read and may hold it)"


def not_found(run_id: str, name: str, found: list[str] | None, skipped: str = "") -> RunNotFoundError:
    if found:
        listed = ", ".join(found[-5:])
        holds = (
            f", which holds {len(found)} run{'s' if len(found) != 1 else ''} (the latest: {listed}); pass one of those"
        )
        fix = f" (spanreplay runs {name} lists them all)"
    elif found is None:
        lister = "-, with the same input piped to it," if name == "stdin" else name
        holds, fix = "", f"; spanreplay runs {lister} lists the runs it holds"
    elif skipped:
        holds, fix = (
            ", and nothing else there holds a run",
            "; repair that part, or load the run from another copy of its trace",
        )
    else:
        holds, fix = ", which holds no spanreplay runs; pass the source the run was recorded to", ""
    return RunNotFoundError(
        f"Run {run_id} is not in {name}{skipped}{holds}{fix}.", run_id=run_id, available=tuple(found or ())
    )


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


def warn_crashed(run_id: str, shown: str) -> None:
    """Say that a crashed run lacks the steps at ``shown`` (a run that ended so would be refused)."""
    # Boundaries still running when the process died never ended, so never got written.
    warn(
        f"Run {run_id} crashed; the boundaries at seq {shown} were still running and left no span, "
        "so replay stops matching there."
    )


def missing_error(run_id: str, name: str, shown: str, last: int, damage: str) -> TraceFormatError:
    """The refusal of a run that ended with steps missing; ``damage`` words where they may have gone."""
    return TraceFormatError(
        f"Run {run_id} in {name} is missing the spans at seq {shown} of {last}, lost on the way (an "
        "exporter dropped them, a file of the run is missing, or the OpenTelemetry SDK's attribute "
        "count limit evicted their run id: raise OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, default 128); load "
        "the run's own trace file from the recording machine, or every file the Collector "
        f"exported{damage}.",
        source=name,
    )


def damage_note(damage: list[Damage]) -> str:
    """The clause a missing-steps refusal ends with when the source has damaged lines or files."""
    if not damage:
        return ""
    return f" (the source is also damaged, which may be where they went: {listed_damage(damage)})"


def shared_run_id(run_id: str, what: str, origin: str) -> TraceFormatError:
    return TraceFormatError(
        f"Run {run_id} holds {what}, so two recordings share one run id; load each from its own file, "
        "or record again with distinct run ids.",
        source=origin,
    )


def missing_seqs(info: RunInfo, present: Sequence[int]) -> tuple[str, int] | None:
    """The missing seqs as text (the first few, then a count) and the last seq, or None."""
    last = info.steps if info.steps is not None else (present[-1] if present else 0)
    missing, expected = 0, 1
    shown: list[int] = []
    # Walk the gaps rather than every seq: a bogus step count must not make this loop forever.
    for seq in chain((s for s in present if s <= last), (last + 1,)):
        if seq > expected:
            missing += seq - expected
            shown.extend(range(expected, min(seq, expected + _SHOWN - len(shown))))
        expected = seq + 1
    if not missing:
        return None
    return ", ".join(map(str, shown)) + (f" and {missing - len(shown)} more" if missing > len(shown) else ""), last


@dataclasses.dataclass
class _FoundRuns:
    """What one pass over the spans found of each run id."""

    roots: dict[str, SpanRecord] = dataclasses.field(default_factory=dict)  # its run span (the latest ended)
    steps: dict[str, _Seqs] = dataclasses.field(default_factory=dict)
    first: dict[str, SpanRecord] = dataclasses.field(default_factory=dict)  # its earliest boundary span
    shared: dict[str, str] = dataclasses.field(default_factory=dict)  # the two recordings found under it


def _found_runs(spans: Iterable[SpanRecord], tap: SpanTap | None) -> _FoundRuns:
    """The run and boundary spans of each run id in ``spans``; ``tap`` (when given) sees every span."""
    out = _FoundRuns()
    roots, steps, first, shared = out.roots, out.steps, out.first, out.shared
    for span in spans:
        if tap is not None:
            tap(span)
        run_id = span.attributes.get(sc.RUN_ID)
        if not isinstance(run_id, str):
            continue
        if _codec.is_run_span(span):
            previous = roots.get(run_id)
            if previous is not None and previous.key != span.key:
                shared.setdefault(run_id, f"two run spans ({previous.origin} and {span.origin})")
            if previous is None or span.end_ns > previous.end_ns:
                roots[run_id] = span
        elif _codec.is_boundary_span(span):
            found = steps.get(run_id)
            if found is None:
                found = steps[run_id] = _Seqs()
            clash = found.add(span)
            if clash is not None:
                shared.setdefault(run_id, f"two spans at seq {clash} (one of them {span.origin})")
            if run_id not in first or span.start_ns < first[run_id].start_ns:
                first[run_id] = span
    return out


def summaries(
    spans: Iterable[SpanRecord], tap: SpanTap | None = None, *, name: str = "", damage: list[Damage] | None = None
) -> list[RunSummary]:
    """The runs the spans hold, oldest first; ``tap`` (when given) sees every span.

    Args:
        name: the source, as load() names it in its errors.
        damage: the damaged lines the read skipped, filled in as ``spans`` is read:
            a run a damaged line names is marked ``damaged``, and the lines are named
            where a run is missing steps.
    """
    found = _found_runs(spans, tap)
    roots, steps, first, shared = found.roots, found.steps, found.first, found.shared
    owned: dict[str, list[Damage]] = {}
    for damaged in damage or ():
        for run_id in damaged.runs:
            owned.setdefault(run_id, []).append(damaged)
    out = []
    for run_id in roots.keys() | first.keys():
        seqs = steps.get(run_id)
        summary, recorded, unreadable = _summary(
            run_id, roots.get(run_id), first.get(run_id), seqs.count if seqs is not None else 0
        )
        if run_id in owned:
            why: str | None = str(damaged_run(run_id, owned[run_id]))
        elif unreadable is not None:
            why = unreadable
        elif run_id in shared:
            why = str(shared_run_id(run_id, shared[run_id], ""))
        else:
            why = _refused_steps(summary, recorded, seqs, name, damage or [])
        out.append(summary if why is None else dataclasses.replace(summary, damaged=why))
    out.sort(key=lambda r: (r.start_ns, r.run_id))
    return out


def _refused_steps(
    summary: RunSummary, recorded: int | None, seqs: _Seqs | None, name: str, damage: list[Damage]
) -> str | None:
    """What load() says of a run whose seqs it refuses (a bad seq, missing steps); None when it loads."""
    if seqs is None:
        seqs = _Seqs()
    if seqs.bad is not None:
        return (
            f"Run {summary.run_id} has a span with seq {seqs.bad[0]} ({seqs.bad[1]}); spanreplay numbers "
            "boundaries from 1, so the file was edited or not written by spanreplay."
        )
    if summary.status == sc.RUN_STATUS_CRASHED:
        return None  # steps still running at the crash left no span: a load warns and replays
    last = recorded if recorded is not None else seqs.top
    if seqs.whole(last):
        return None
    missing = missing_seqs(RunInfo(run_id=summary.run_id, steps=last), seqs.present())
    if missing is None:
        return None
    shown, last = missing
    return str(missing_error(summary.run_id, name, shown, last, damage_note(damage)))


class _Seqs:
    """The distinct seqs of one run's boundary spans, a fingerprint of the span at each.

    A listing reads every span of every run, so what it keeps per span decides
    its memory: a set of span keys held hundreds of bytes per step; this keeps 8
    bytes a step. Copies of a span (exporter retries) share its seq and its key,
    so distinct seqs count the steps, and two different spans at one seq are two
    recordings under one run id (which load() refuses). A seq far beyond the steps
    seen so far, or none (no recorder writes either), is counted by span key
    instead, so that a bogus seq cannot make the table huge.
    """

    __slots__ = ("bad", "count", "marks", "odd", "top")

    def __init__(self) -> None:
        self.marks = array("Q")  # per seq: a fingerprint of its span's key; 0 for none
        self.count = 0
        self.top = 0  # the highest seq seen
        self.odd: dict[tuple[str, str], int] = {}
        self.bad: tuple[object, str] | None = None  # a seq below 1 (or none) and where it was

    def add(self, span: SpanRecord) -> int | None:
        """Count the span; the seq when another span already holds it (two recordings), else None."""
        seq = span.attributes.get(sc.SEQ)
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            if self.bad is None:
                self.bad = (seq, span.origin)
            seq = 0
        if 0 < seq <= 2 * self.count + _SLACK:
            self.top = max(self.top, seq)
            if seq >= len(self.marks):
                # frombytes: extend() would add one element per byte.
                self.marks.frombytes(bytes(8 * (max(seq + 1, 2 * len(self.marks)) - len(self.marks))))
            # Within one listing only, so the process's string hash is as good as any.
            mark = hash(span.key) & _MASK or 1
            held = self.marks[seq]
            if held == mark:
                return None  # a copy of a step counted already
            if held:
                return seq
            self.marks[seq] = mark
            self.count += 1
            return None
        if span.key not in self.odd:
            self.odd[span.key] = seq
            self.count += 1
            self.top = max(self.top, seq)
        return None

    def whole(self, last: int) -> bool:
        """Whether every seq from 1 to ``last`` is here, and none past it (the cheap test first)."""
        return not self.odd and self.top == last == self.count

    def present(self) -> list[int]:
        return sorted([seq for seq, mark in enumerate(self.marks) if mark] + [s for s in self.odd.values() if s > 0])


# A seq up to twice the steps counted so far, plus this, is kept in the table:
# it stays within a few times 8 bytes a step, whatever seqs a file holds.
_SLACK: Final = 1 << 12
_MASK: Final = (1 << 64) - 1


def _summary(
    run_id: str, root: SpanRecord | None, first: SpanRecord | None, steps: int
) -> tuple[RunSummary, int | None, str | None]:
    """The run's line, the steps its run span records (None: not said), and why its run span
    cannot be read (None when it can: load() raises the same)."""
    error: str | None = None
    unreadable: str | None = None
    if root is not None:
        try:
            info = _codec.span_to_run(root)
            error = str(info.error) if info.error else None
        except SpanReplayError as exc:
            # A listing shows every run; the broken one says why (load() raises it).
            info = RunInfo(run_id=run_id, status=str(root.attributes.get(sc.RUN_STATUS, sc.RUN_STATUS_ERROR)))
            error = f"(unreadable run span: {exc})"
            unreadable = str(exc)
    else:
        assert first is not None  # a run id is listed because a root or a boundary carried it
        info = RunInfo(
            run_id=run_id,
            status=sc.RUN_STATUS_CRASHED,
            trace_id=first.trace_id,
            start_ns=first.start_ns,
            service_name=str(first.resource.get(sc.SERVICE_NAME, "")),
        )
    summary = RunSummary(
        run_id=run_id,
        agent=info.agent,
        status=info.status,
        error=error,
        steps=steps,
        trace_id=info.trace_id,
        start_ns=info.start_ns,
        end_ns=info.end_ns,
        service_name=info.service_name,
        parent=info.parent,
    )
    return summary, info.steps, unreadable

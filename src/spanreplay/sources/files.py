"""Trace files and stdin as sources: a file, a directory, a glob, ``-``.

Loading one run streams the files once and parses only the lines that hold its
run id (quoted, so ``run_1`` does not pull in ``run_10``): a Collector export of
thousands of runs costs a substring search per line, and a broken line of
another run is never even looked at. Listing parses only the lines that hold a
run id at all. stdin can be read once, so it is its own source.

A damaged line costs its own run, never the source: the readers skip it with a
warning and report it here. A load refuses its run when the line names it, and
names the damaged lines when its run is missing a step; a listing marks the runs
that load refuses (``RunSummary.damaged``), in the same sentence.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator

from spanreplay import semconv as sc
from spanreplay.errors import SpanReplayError, TraceFormatError
from spanreplay.model.events import EventLog, RunSummary
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import STDIN, Damage, SpanReplayWarning, iter_spans

from .foreign import foreign_log, foreign_summaries, is_foreign_span, is_trace_id
from .log_builder import build_log
from .runlog import (
    RUN_MARKER,
    SpanTap,
    damage_note,
    damaged_run,
    needle,
    not_found,
    only_run,
    summaries,
    unread_damage,
)


class FileSource:
    """Trace files: one file (with its rotated backups), a directory's files, a glob's matches."""

    def __init__(self, source: str | os.PathLike[str]) -> None:
        self.source = source
        self.name = os.fspath(source)

    def spans(self) -> Iterator[SpanRecord]:
        # A damaged line is skipped with its warning: what reads every span (cost) reads on.
        return iter_spans(self.source, damaged=_read_on)

    def runs(self, tap: SpanTap | None = None) -> list[RunSummary]:
        # One pass over every line: a line without a run id may hold another instrumentation's
        # model calls, which are runs too (spanreplay.sources.foreign). In spanreplay's own files every
        # line holds a run id, so this parses what a filtered pass would.
        damage: list[Damage] = []
        return _runs_of(iter_spans(self.source, damaged=damage.append), tap, self.name, damage)

    def load(self, run_id: str | None = None) -> EventLog:
        if run_id is None:
            run_id = only_run(self.runs(), self.name)
        damage: list[Damage] = []
        found = _Counted(self.run_spans(run_id, damage))
        failed: SpanReplayError | None = None
        try:
            log = build_log(run_id, found, self.name, self._damage, again=lambda: self.run_spans(run_id, []))
        except SpanReplayError as exc:
            if exc is found.unreadable:
                raise
            failed = exc
            for _ in found:  # the rest of the lines, for the damaged ones that hold the run
                pass
        owned = [d for d in damage if run_id in d.runs]
        if owned:
            raise damaged_run(run_id, owned)
        if not found.count and is_trace_id(run_id):
            # A trace another instrumentation recorded: its trace id is its run id. Protobuf
            # holds trace ids as bytes, so no needle finds its records: every span is read.
            foreign = foreign_log(run_id, (s for s in iter_spans(self.source) if s.trace_id == run_id))
            if foreign is not None:
                return foreign
        if not found.count:
            raise not_found(run_id, self.name, self._listed(), unread_damage(damage))
        if failed is not None:
            raise failed
        return log

    def run_spans(self, run_id: str, damage: list[Damage]) -> Iterator[SpanRecord]:
        """The spans of run ``run_id``, read from the files as they are needed; ``damage`` fills
        with the damaged lines that hold its id."""
        for span in iter_spans(self.source, contains=needle(run_id), damaged=damage.append):
            if span.attributes.get(sc.RUN_ID) == run_id:
                yield span

    def _listed(self) -> list[str] | None:
        """The runs in the source, for an error message; None when listing them fails too."""
        try:
            return [r.run_id for r in self.runs()]
        except SpanReplayError:
            return None

    def _damage(self) -> str:
        """The damaged lines and files the run filter skipped, which may have held the lost spans."""
        damage: list[Damage] = []
        try:
            with warnings.catch_warnings():
                # Shown once already where the filter met them; the others are named in the error.
                warnings.simplefilter("ignore", SpanReplayWarning)
                for _ in iter_spans(self.source, damaged=damage.append):
                    pass
        except TraceFormatError as exc:
            return f" (the source is also damaged, which may be where they went: {str(exc).rstrip('.')})"
        return damage_note(damage)


class _Counted:
    """The spans of an iterator, counted as they are read."""

    def __init__(self, spans: Iterator[SpanRecord]) -> None:
        self._spans = spans
        self.count = 0
        self.unreadable: SpanReplayError | None = None  # what reading the source raised

    def __iter__(self) -> Iterator[SpanRecord]:
        try:
            for span in self._spans:
                self.count += 1
                yield span
        except SpanReplayError as exc:
            self.unreadable = exc
            raise


def _read_on(damage: Damage) -> None:
    """A damaged line met by a read of every span: its warning says it, and the read goes on."""


def _split(spans: Iterator[SpanRecord], foreign: list[SpanRecord], tap: SpanTap | None) -> Iterator[SpanRecord]:
    """spanreplay's spans, passed on; another instrumentation's model and tool spans, kept in
    ``foreign`` (and shown to ``tap``, which ``summaries`` shows only the spans it is given)."""
    for span in spans:
        if sc.RUN_ID in span.attributes:
            yield span
            continue
        if tap is not None:
            tap(span)
        if is_foreign_span(span):
            foreign.append(span)


class StdinSource:
    """``-``: read once, so every spanreplay line is parsed on the one pass."""

    name = STDIN

    def spans(self) -> Iterator[SpanRecord]:
        return iter_spans(STDIN, damaged=_read_on)

    def runs(self, tap: SpanTap | None = None) -> list[RunSummary]:
        # Every span is parsed, and those of other instrumentations make runs of their own.
        damage: list[Damage] = []
        return _runs_of(iter_spans(STDIN, damaged=damage.append), tap, "stdin", damage)

    def load(self, run_id: str | None = None) -> EventLog:
        # Only the wanted run's spans are kept (all runs' when the run is to be picked from them).
        by_run: dict[str, list[SpanRecord]] = {}
        in_trace: list[SpanRecord] = []
        # A trace id may name a trace another instrumentation recorded: every line is read then.
        contains = RUN_MARKER if run_id is None else None if is_trace_id(run_id) else needle(run_id)
        damage: list[Damage] = []
        for span in iter_spans(STDIN, contains=contains, damaged=damage.append):
            found = span.attributes.get(sc.RUN_ID)
            if isinstance(found, str) and (run_id is None or found == run_id):
                by_run.setdefault(found, []).append(span)
            elif span.trace_id == run_id:
                in_trace.append(span)
        if run_id is None:
            run_id = only_run(summaries(s for spans in by_run.values() for s in spans), "stdin")
        owned = [d for d in damage if run_id in d.runs]
        if owned:
            raise damaged_run(run_id, owned)
        if run_id not in by_run and in_trace:
            log = foreign_log(run_id, in_trace)
            if log is not None:
                return log
        if run_id not in by_run:
            raise not_found(run_id, "stdin", None)
        # Read once: the damaged lines this read met are all that can be named.
        return build_log(run_id, by_run[run_id], STDIN, damage=lambda: damage_note(damage))


def _runs_of(spans: Iterator[SpanRecord], tap: SpanTap | None, name: str, damage: list[Damage]) -> list[RunSummary]:
    """spanreplay's runs in ``spans``, and the traces of other instrumentations' model calls;
    ``damage`` fills with the damaged lines as ``spans`` is read."""
    foreign: list[SpanRecord] = []
    found = summaries(_split(spans, foreign, tap), tap, name=name, damage=damage)
    found.extend(foreign_summaries(foreign, exclude={r.trace_id for r in found}))
    found.sort(key=lambda r: (r.start_ns, r.run_id))
    return found

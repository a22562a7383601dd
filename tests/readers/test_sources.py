"""One registry opens every kind of source; runs() joins cost onto a listing read once."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

import spanreplay
from fixtures.recordings import record_agent
from spanreplay import EventLog, RunSummary, TraceFormatError
from spanreplay.readers import iter_spans
from spanreplay.sources import RUN_MARKER, Source, SpanSource, SpanTap, open_source

USAGE = {
    "gen_ai.request.model": "claude-sonnet-4-6",
    "gen_ai.usage.input_tokens": 1200,
    "gen_ai.usage.output_tokens": 80,
}


def record_model_run(run_id: str) -> None:
    with spanreplay.record(agent="support", run_id=run_id):
        spanreplay.boundary("model", "claude-sonnet-4-6", {"q": "hi"}, lambda: {"text": "ok"}, attributes=USAGE)
        spanreplay.boundary("tool", "lookup", {"i": 1}, lambda: {"row": 1})


def test_each_kind_of_source_opens_through_the_registry_and_names_itself_without_secrets(trace_dir: Path) -> None:
    record_agent("run_a")
    files = open_source(trace_dir)
    assert isinstance(files, SpanSource)
    assert files.name == str(trace_dir)
    assert [r.run_id for r in files.runs()] == ["run_a"]
    assert len(files.load("run_a")) == len(spanreplay.load(trace_dir, "run_a"))
    stdin = open_source("-")
    assert isinstance(stdin, SpanSource)
    assert stdin.name == "-"
    backend = open_source("tempo+http://user:secret@tempo.test:3200")
    assert isinstance(backend, SpanSource)
    assert backend.name == "tempo+http://tempo.test:3200"
    database = open_source("postgresql://app:secret@db.test:5432/runs")
    # Postgres keeps rows, not spans: a source, but not one that hands out spans.
    assert isinstance(database, Source)
    assert not isinstance(database, SpanSource)
    assert database.name == "postgresql://app@db.test:5432/runs"


def test_a_malformed_backend_url_is_refused_when_opened() -> None:
    with pytest.raises(TraceFormatError, match="unknown setting 'color'"):
        open_source("jaeger+http://jaeger.test:16686?color=red")


def test_runs_adds_the_cost_columns_to_the_sources_own_listing(trace_dir: Path) -> None:
    record_model_run("run_m")
    (plain,) = open_source(trace_dir).runs()
    (costed,) = spanreplay.runs(trace_dir)
    assert (plain.model_calls, plain.tokens, plain.usd) == (0, 0, 0.0)
    assert (costed.model_calls, costed.tokens) == (1, 1280)
    assert costed.usd > 0
    # Apart from the cost columns, the listing is the source's.
    assert dataclasses.replace(costed, model_calls=0, tokens=0, usd=0.0) == plain


def test_the_listing_hands_every_span_it_reads_to_the_tap(trace_dir: Path) -> None:
    record_agent("run_a")
    record_model_run("run_m")
    seen: list[tuple[str, str]] = []
    found = open_source(trace_dir).runs(lambda span: seen.append(span.key))
    assert [r.run_id for r in found] == ["run_a", "run_m"]
    assert sorted(seen) == sorted(s.key for s in iter_spans(trace_dir, contains=RUN_MARKER))


class _Listed:
    """A source of one canned run, as a new kind of source would be written."""

    name = "canned"

    def __init__(self, log: EventLog, summary: RunSummary) -> None:
        self._log, self._summary = log, summary

    def runs(self, tap: SpanTap | None = None) -> list[RunSummary]:
        return [self._summary]

    def load(self, run_id: str | None = None) -> EventLog:
        return self._log

    def spans(self) -> Iterator[object]:
        return iter(())


def test_a_new_kind_of_source_is_a_class_that_keeps_the_protocol(trace_dir: Path) -> None:
    record_agent("run_a")
    canned = _Listed(spanreplay.load(trace_dir), spanreplay.runs(trace_dir)[0])
    assert isinstance(canned, Source)
    assert isinstance(canned, SpanSource)

    class NoLoad:
        name = "half"

        def runs(self, tap: SpanTap | None = None) -> list[RunSummary]:
            return []

    assert not isinstance(NoLoad(), Source)


def test_the_exporters_former_import_path_gives_the_same_processor_and_says_it_moved() -> None:
    import importlib
    import sys

    sys.modules.pop("spanreplay.exporters.postgres", None)
    with pytest.warns(DeprecationWarning, match="moved to spanreplay.postgres"):
        old = importlib.import_module("spanreplay.exporters.postgres")
    from spanreplay.postgres import PostgresSpanProcessor

    assert old.PostgresSpanProcessor is PostgresSpanProcessor

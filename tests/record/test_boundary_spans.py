"""Boundary spans built without the SDK's per-attribute checks are the SDK's spans all the same.

Each test records the same agent twice, once through ``BoundarySpans`` and once
through the tracer's own ``start_span`` (``for_tracer`` made to decline), and
compares what an exporter received and what the durable file holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import (
    ALWAYS_OFF,
    ALWAYS_ON,
    Decision,
    ParentBased,
    Sampler,
    SamplingResult,
    TraceIdRatioBased,
)
from opentelemetry.trace import Link, SpanKind, StatusCode
from opentelemetry.util.types import Attributes

import spanreplay
from helpers.accelerators import needs_accelerator
from spanreplay.recording.boundary_spans import BoundarySpan, BoundarySpans

# Every test here compares boundary spans with the SDK's own: nothing to compare with the accelerator off.
pytestmark = needs_accelerator("boundary_spans")

RUN_ID = "run_boundary_spans"
SCOPE = "spanreplay"


@spanreplay.tool
def lookup(query: str) -> dict[str, str]:
    return {"text": query.upper()}


def _agent() -> None:
    lookup("where is parcel 7?")
    spanreplay.boundary("clock", "now", None, lambda: 1234.5)
    lookup("and parcel 8?")


class _Recorded:
    def __init__(self, spans: Sequence[ReadableSpan], lines: list[dict[str, Any]]) -> None:
        self.spans = spans
        self.lines = lines

    def boundaries(self) -> list[ReadableSpan]:
        # By scope and parent rather than attribute: past a count limit the attributes go.
        return [
            s
            for s in self.spans
            if s.parent is not None and s.instrumentation_scope is not None and s.instrumentation_scope.name == SCOPE
        ]


def _record(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    *,
    fast: bool,
    agent: Callable[[], None] = _agent,
    sampler: Sampler | None = None,
    limits: SpanLimits | None = None,
    processors: Sequence[SpanProcessor] = (),
) -> _Recorded:
    """Record ``agent`` once, through boundary spans (``fast``) or the SDK's own."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "boundary-spans"}), sampler=sampler, span_limits=limits
    )
    for processor in processors:
        provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace_dir = tmp_path / ("fast" if fast else "sdk")
    with monkeypatch.context() as patch:
        if not fast:
            patch.setattr(BoundarySpans, "for_tracer", classmethod(lambda cls, tracer: None))
        spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=True)
        try:
            with spanreplay.record("boundary-spans", run_id=RUN_ID):
                agent()
        finally:
            spanreplay.reset()
    files = list(trace_dir.glob("*.jsonl"))
    lines = [orjson.loads(line) for f in files for line in f.read_bytes().splitlines()]
    spans = exporter.get_finished_spans()
    provider.shutdown()
    return _Recorded(spans, lines)


def _same(span: ReadableSpan) -> dict[str, Any]:
    """What must not differ between the two ways (ids and times do)."""
    return {
        "name": span.name,
        "kind": span.kind,
        "status": (span.status.status_code, span.status.description),
        "attributes": dict(span.attributes or {}),
        "events": [(e.name, dict(e.attributes or {})) for e in span.events],
        "links": [dict(link.attributes or {}) for link in span.links],
        "resource": {k: v for k, v in span.resource.attributes.items() if k != "service.instance.id"},
        "scope": span.instrumentation_scope,
        "dropped": (span.dropped_attributes, span.dropped_events, span.dropped_links),
        "has_parent": span.parent is not None,
        "trace_state": span.context.trace_state.to_header() if span.context is not None else None,
        "sampled": span.context.trace_flags.sampled if span.context is not None else None,
    }


def _line_shape(line: dict[str, Any]) -> Any:
    """A file line without its ids, times and the provider's instance id."""
    line["resourceSpans"][0]["resource"]["attributes"] = [
        kv for kv in line["resourceSpans"][0]["resource"]["attributes"] if kv["key"] != "service.instance.id"
    ]
    span = line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    for field in ("traceId", "spanId", "parentSpanId", "startTimeUnixNano", "endTimeUnixNano"):
        span.pop(field, None)
    for link in span.get("links", ()):
        link.pop("traceId", None)
        link.pop("spanId", None)
    for event in span.get("events", ()):
        event.pop("timeUnixNano", None)
        for kv in event.get("attributes", ()):
            if kv["key"] == "exception.stacktrace":
                kv["value"] = "<stack>"
    return line


def _both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kwargs: Any) -> tuple[_Recorded, _Recorded]:
    return _record(tmp_path, monkeypatch, fast=True, **kwargs), _record(tmp_path, monkeypatch, fast=False, **kwargs)


def test_an_exporter_and_the_file_get_the_same_spans_either_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, sdk = _both(tmp_path, monkeypatch)
    assert all(type(s) is BoundarySpan for s in fast.boundaries())
    assert not any(type(s) is BoundarySpan for s in sdk.boundaries())
    assert len(fast.boundaries()) == 3
    assert [_same(s) for s in fast.spans] == [_same(s) for s in sdk.spans]
    assert [_line_shape(line) for line in fast.lines] == [_line_shape(line) for line in sdk.lines]


def test_the_boundary_span_is_the_parent_of_spans_started_inside_the_tool(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def agent() -> None:
        @spanreplay.tool
        def fetch(url: str) -> str:
            with spanreplay.settings().provider.get_tracer("http").start_as_current_span("GET"):
                return url

        fetch("https://example.invalid/a")

    recorded = _record(tmp_path, monkeypatch, fast=True, agent=agent)
    by_name = {s.name: s for s in recorded.spans}
    boundary = next(s for s in recorded.boundaries())
    inner = by_name["GET"]
    assert inner.parent is not None
    assert boundary.context is not None
    assert inner.parent.span_id == boundary.context.span_id
    assert inner.context is not None
    assert inner.context.trace_id == boundary.context.trace_id
    # The run-id processor stamped the inner span: the boundary was current while it started.
    assert (inner.attributes or {}).get("spanreplay.run.id") == RUN_ID


def _annotating_agent(values: Mapping[str, Any]) -> Callable[[], None]:
    def agent() -> None:
        @spanreplay.tool
        def annotate(n: int) -> int:
            span = trace.get_current_span()
            for key, value in values.items():
                span.set_attribute(key, value)
            span.add_event("checked", {"n": n, "tags": ["a", "b"]})
            span.add_link(trace.get_current_span().get_span_context(), {"why": "self"})
            span.record_exception(ValueError("not fatal"))
            span.update_name("annotate (renamed)")
            return n

        annotate(1)

    return agent


def test_what_the_agent_sets_on_the_current_span_is_checked_as_the_sdk_checks_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    values = {"list": ["x", "y"], "mixed": ["x", 1], "dict": {"no": "maps"}, "none": None, "float": 1.5}
    with caplog.at_level(logging.WARNING):
        fast, sdk = _both(tmp_path, monkeypatch, agent=_annotating_agent(values))
    span = fast.boundaries()[0]
    assert span.name == "annotate (renamed)"
    attributes = span.attributes or {}
    assert attributes["list"] == ("x", "y")  # a list is kept as a tuple, as the SDK keeps it
    # Mixed-type sequences: the SDK 1.30 drops them, later releases keep them; a boundary
    # span does what the installed SDK's own checks do.
    assert attributes.get("mixed") == BoundedAttributes(attributes={"mixed": ["x", 1]}).get("mixed")
    assert attributes["float"] == 1.5
    assert [e.name for e in span.events] == ["checked", "exception"]
    assert [_same(s) for s in fast.spans] == [_same(s) for s in sdk.spans]
    assert [_line_shape(line) for line in fast.lines] == [_line_shape(line) for line in sdk.lines]


_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.lists(st.text(max_size=5), max_size=3),
    st.lists(st.integers(min_value=0, max_value=9), max_size=3),
    st.lists(st.one_of(st.text(max_size=3), st.integers(0, 9), st.none()), max_size=3),
    st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
    st.binary(max_size=5),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.dictionaries(st.text(min_size=1, max_size=8), _VALUES, max_size=6))
def test_any_attribute_value_ends_up_as_on_an_sdk_span(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, values: dict[str, Any]
) -> None:
    tmp = tmp_path_factory.mktemp("values")
    fast, sdk = _both(tmp, monkeypatch, agent=_annotating_agent(values))
    assert [_same(s) for s in fast.spans] == [_same(s) for s in sdk.spans]


def test_past_the_count_limit_the_oldest_attributes_go_as_the_sdk_drops_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = SpanLimits(max_span_attributes=8)
    fast, sdk = _both(tmp_path, monkeypatch, limits=limits)
    span = fast.boundaries()[0]
    assert len(span.attributes or {}) == 8
    assert span.dropped_attributes > 0
    assert [_same(s) for s in fast.spans] == [_same(s) for s in sdk.spans]


class _Stamp(SpanProcessor):
    """Sets an attribute on each span as it starts, as baggage processors do."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.started.append(span.name)
        span.set_attribute("tenant", "acme")


def test_processors_see_each_boundary_start_and_may_set_attributes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast_stamp, sdk_stamp = _Stamp(), _Stamp()
    fast = _record(tmp_path, monkeypatch, fast=True, processors=[fast_stamp])
    sdk = _record(tmp_path, monkeypatch, fast=False, processors=[sdk_stamp])
    assert fast_stamp.started == sdk_stamp.started
    assert len(fast_stamp.started) == 4  # the run and three boundaries
    assert all((s.attributes or {}).get("tenant") == "acme" for s in fast.boundaries())
    assert [_same(s) for s in fast.spans] == [_same(s) for s in sdk.spans]


class _DropClocks(Sampler):
    """Drops clock boundaries, tags the rest."""

    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: Any = None,
    ) -> SamplingResult:
        if (attributes or {}).get("spanreplay.kind") == "clock":
            return SamplingResult(Decision.DROP)
        return SamplingResult(Decision.RECORD_AND_SAMPLE, {**(attributes or {}), "sampled.by": ["test"]})

    def get_description(self) -> str:
        return "DropClocks"


@pytest.mark.parametrize(
    ("sampler", "boundaries"),
    [
        (ALWAYS_ON, 3),
        (ParentBased(ALWAYS_ON), 3),
        (_DropClocks(), 2),
        (ParentBased(ALWAYS_ON, local_parent_sampled=_DropClocks()), 2),
        (ParentBased(ALWAYS_ON, local_parent_sampled=ALWAYS_OFF), 0),
        (TraceIdRatioBased(1.0), 3),
    ],
    ids=["always-on", "parent-based", "custom", "custom-under-parent", "local-off", "ratio"],
)
def test_the_sampler_decides_each_boundary_as_it_would_an_sdk_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sampler: Sampler, boundaries: int
) -> None:
    fast, sdk = _both(tmp_path, monkeypatch, sampler=sampler)
    assert len(fast.boundaries()) == boundaries
    assert [_same(s) for s in fast.spans] == [_same(s) for s in sdk.spans]
    assert [_line_shape(line) for line in fast.lines] == [_line_shape(line) for line in sdk.lines]
    if isinstance(sampler, _DropClocks):
        assert all((s.attributes or {}).get("sampled.by") == ("test",) for s in fast.boundaries())


def test_an_ended_span_takes_no_more_and_reaches_the_processors_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kept: list[trace.Span] = []

    def agent() -> None:
        @spanreplay.tool
        def step() -> int:
            kept.append(trace.get_current_span())
            return 1

        step()
        span = kept[0]
        assert not span.is_recording()
        with caplog.at_level(logging.WARNING, logger="spanreplay"):
            span.set_attribute("late", True)
            span.add_event("late")
            span.set_status(StatusCode.ERROR, "late")
            span.update_name("late")
            span.end()
        assert "ended span" in caplog.text

    recorded = _record(tmp_path, monkeypatch, fast=True, agent=agent)
    (span,) = recorded.boundaries()
    assert "late" not in (span.attributes or {})
    assert not span.events
    assert span.status.status_code is StatusCode.UNSET
    assert span.name == "execute_tool step"
    assert sum(1 for line in recorded.lines if b"execute_tool step" in orjson.dumps(line)) == 1


def test_an_error_sets_the_status_as_on_an_sdk_span(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def agent() -> None:
        @spanreplay.tool
        def fail() -> None:
            raise KeyError("parcel")

        with pytest.raises(KeyError):
            fail()

    fast, sdk = _both(tmp_path, monkeypatch, agent=agent)
    (span,) = fast.boundaries()
    assert span.status.status_code is StatusCode.ERROR
    assert [_same(s) for s in fast.spans] == [_same(s) for s in sdk.spans]


@pytest.fixture
def sdk_tracer() -> Iterator[TracerProvider]:
    provider = TracerProvider()
    yield provider
    provider.shutdown()


def test_only_the_sdks_own_tracer_without_a_length_limit_takes_this_path(
    sdk_tracer: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert BoundarySpans.for_tracer(sdk_tracer.get_tracer("t")) is not None
    assert BoundarySpans.for_tracer(trace.NoOpTracer()) is None
    assert BoundarySpans.for_tracer(trace.ProxyTracer("t")) is None
    cut = TracerProvider(span_limits=SpanLimits(max_span_attribute_length=100))
    assert BoundarySpans.for_tracer(cut.get_tracer("t")) is None
    monkeypatch.setenv("OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED", "true")
    assert BoundarySpans.for_tracer(sdk_tracer.get_tracer("t")) is None


def test_a_length_limit_is_applied_by_the_sdk_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = _record(
        tmp_path, monkeypatch, fast=True, limits=SpanLimits(max_span_attribute_length=4096, max_span_attributes=128)
    )
    assert recorded.boundaries()
    assert not any(type(s) is BoundarySpan for s in recorded.boundaries())

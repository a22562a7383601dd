"""A SpanRecord is built one way: from_sdk_span gives what the readers give for the same span.

The same SDK spans, made by a real ``TracerProvider``, go three ways at once:
``from_sdk_span`` in process (what the Postgres exporter decodes), the durable
file read back by ``readers.iter_spans``, and our OTLP exporter's protobuf
requests, received over HTTP and read by ``readers._otlp_proto``. The three
records of each span must be equal, but for ``origin`` (where each was read from).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import (
    Link,
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)

from helpers.otlp_receivers import HttpReceiver
from spanreplay import semconv as sc
from spanreplay.exporters import DurableFileSpanProcessor
from spanreplay.model.spans import SpanRecord, from_sdk_span
from spanreplay.readers import _otlp_proto, iter_spans
from spanreplay.recording.exporters._otlp import OtlpSpanProcessor
from spanreplay.recording.exporters._otlp_endpoint import build_exporter

RUN_ID = "run_20260101_000000_0123abcd"
REMOTE = SpanContext(
    trace_id=0x0AF7651916CD43DD8448EB211C80319C,
    span_id=0xB7AD6B7169203331,
    is_remote=True,
    trace_flags=TraceFlags(TraceFlags.SAMPLED),
    trace_state=TraceState([("vendor", "x1"), ("other", "y2")]),
)


def make_spans(provider: TracerProvider) -> None:
    """A root, a child with events, an error, links, a remote parent with a trace state, drops past the limits."""
    tracer = provider.get_tracer("diff.scope", "1.2.3", attributes={"scope.kind": "test", "scope.tags": ("x", "y")})
    bare = provider.get_tracer("bare")
    run = {sc.RUN_ID: RUN_ID}
    with tracer.start_as_current_span(
        "root",
        kind=SpanKind.SERVER,
        attributes={"tags": ("a", "b"), "counts": (1, 2, 3), "ratio": 0.5, "flag": True, "big": 2**62, **run},
    ) as root:
        with tracer.start_as_current_span("child", kind=SpanKind.CLIENT, attributes=run) as child:
            child.add_event("retry", {"attempt": 1, "codes": (500, 503)})
            child.add_event("three attributes, one past the limit", {"a": 1, "b": "two", "c": 3.0})
            child.add_event("plain")
        with tracer.start_as_current_span("failing", attributes=run, record_exception=False) as failing:
            failing.record_exception(ValueError("boom"))
            failing.set_status(Status(StatusCode.ERROR, "boom"))
        with tracer.start_as_current_span("ok", kind=SpanKind.PRODUCER, attributes=run) as ok:
            ok.set_status(Status(StatusCode.OK))
        with bare.start_as_current_span(
            "linked",
            # Past the limit of one link the SDK keeps the newest.
            links=[
                Link(root.get_span_context(), {"why": "first link, past the limit"}),
                Link(REMOTE, {"why": "batch", "dropped": "past the limit of one attribute"}),
            ],
            attributes=run,
        ):
            pass
        with tracer.start_as_current_span("chatty", attributes=run) as chatty:
            for n in range(5):
                chatty.add_event(f"step {n}", {"n": n})
        # Too many attributes: the oldest are dropped, the run id (set last) stays.
        with tracer.start_as_current_span("crowded", attributes={**{f"k{n}": n for n in range(12)}, **run}):
            pass
    context = trace.set_span_in_context(NonRecordingSpan(REMOTE))
    with tracer.start_as_current_span("remote child", context=context, kind=SpanKind.CONSUMER, attributes=run):
        pass


@pytest.fixture
def three_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[list[ReadableSpan], Path, list[bytes]]]:
    """The finished SDK spans, the durable file they were written to, and the OTLP request bodies sent."""
    for name in (
        "OTEL_EXPORTER_OTLP_COMPRESSION",
        "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ):
        monkeypatch.delenv(name, raising=False)
    with HttpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.url}/v1/traces")
        memory = InMemorySpanExporter()
        limits = SpanLimits(
            max_span_attributes=10, max_events=4, max_event_attributes=2, max_links=1, max_link_attributes=1
        )
        provider = TracerProvider(
            resource=Resource.create({"service.name": "differential", "host.tags": ("a", "b")}), span_limits=limits
        )
        otlp = OtlpSpanProcessor(build_exporter("http/protobuf"), schedule_delay=60)
        provider.add_span_processor(SimpleSpanProcessor(memory))
        provider.add_span_processor(DurableFileSpanProcessor(tmp_path / "traces", raise_internal_errors=True))
        provider.add_span_processor(otlp)
        make_spans(provider)
        assert otlp.force_flush(10_000)
        assert otlp.stats.dropped == 0
        bodies = [request.body for request in receiver.requests]
        provider.shutdown()
    return list(memory.get_finished_spans()), tmp_path / "traces" / f"{RUN_ID}.jsonl", bodies


def by_key(records: Iterator[SpanRecord] | list[SpanRecord]) -> dict[tuple[str, str], SpanRecord]:
    return {record.key: msgspec.structs.replace(record, origin="") for record in records}


def in_process(spans: list[ReadableSpan]) -> dict[tuple[str, str], SpanRecord]:
    return by_key([from_sdk_span(span) for span in spans])


def test_the_spans_cover_what_a_record_holds(three_ways: tuple[list[ReadableSpan], Path, list[bytes]]) -> None:
    # The differential tests below only mean something if the spans carry each field.
    records = list(in_process(three_ways[0]).values())
    assert len(records) == 8
    assert {r.kind for r in records} == {1, 2, 3, 4, 5}
    assert {r.status_code for r in records} == {0, 1, 2}
    assert {r.status_message for r in records} == {"", "boom"}
    assert {r.parent_span_id is None for r in records} == {True, False}
    assert {r.trace_state for r in records} == {"", "vendor=x1,other=y2"}
    assert {(r.scope_name, r.scope_version) for r in records} == {("diff.scope", "1.2.3"), ("bare", "")}
    assert {"scope.kind": "test", "scope.tags": ["x", "y"]} in [r.scope_attributes for r in records]
    assert all(r.resource["host.tags"] == ["a", "b"] for r in records)
    root = next(r for r in records if r.name == "root")
    assert (root.attributes["tags"], root.attributes["counts"]) == (["a", "b"], [1, 2, 3])
    child = next(r for r in records if r.name == "child")
    assert child.parent_span_id == root.span_id
    assert [e.name for e in child.events] == ["retry", "three attributes, one past the limit", "plain"]
    assert child.events[0].attributes == {"attempt": 1, "codes": [500, 503]}
    assert child.events[1].dropped_attributes_count == 1
    linked = next(r for r in records if r.name == "linked")
    assert [(link.span_id, link.trace_state) for link in linked.links] == [("b7ad6b7169203331", "vendor=x1,other=y2")]
    assert (linked.links[0].dropped_attributes_count, linked.dropped_links_count) == (1, 1)
    chatty = next(r for r in records if r.name == "chatty")
    assert (len(chatty.events), chatty.dropped_events_count) == (4, 1)
    crowded = next(r for r in records if r.name == "crowded")
    assert crowded.dropped_attributes_count == 3
    assert crowded.attributes[sc.RUN_ID] == RUN_ID
    failing = next(r for r in records if r.name == "failing")
    assert failing.events[0].name == "exception"
    assert failing.events[0].dropped_attributes_count > 0


def test_from_sdk_span_is_the_record_read_back_from_the_durable_file(
    three_ways: tuple[list[ReadableSpan], Path, list[bytes]],
) -> None:
    spans, path, _ = three_ways
    expected = in_process(spans)
    from_file = by_key(iter_spans(path))
    assert from_file.keys() == expected.keys()
    for key, record in expected.items():
        assert from_file[key] == record, record.name


def test_from_sdk_span_is_the_record_read_back_from_our_otlp_export(
    three_ways: tuple[list[ReadableSpan], Path, list[bytes]],
) -> None:
    spans, _, bodies = three_ways
    assert bodies
    expected = in_process(spans)
    sent = by_key(
        record
        for n, body in enumerate(bodies)
        for record in _otlp_proto.spans_from_message(_otlp_proto.parse(body), f"request {n}")
    )
    assert sent.keys() == expected.keys()
    for key, record in expected.items():
        # The SDK's protobuf encoder leaves a link's trace state out (Span.Link has the
        # field; the encoder does not fill it): the one thing the OTLP path loses.
        links = tuple(dataclasses.replace(link, trace_state="") for link in record.links)
        # Older encoders (opentelemetry-exporter-otlp 1.30 among them) leave scope attributes out too.
        scope_attributes = record.scope_attributes if _encoder_sends_scope_attributes() else {}
        expected_record = msgspec.structs.replace(record, links=links, scope_attributes=scope_attributes)
        assert sent[key] == expected_record, record.name


def _encoder_sends_scope_attributes() -> bool:
    """Whether the installed OTLP protobuf encoder writes an instrumentation scope's attributes."""
    from opentelemetry.exporter.otlp.proto.common._internal import _encode_instrumentation_scope
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    encoded = _encode_instrumentation_scope(InstrumentationScope("probe", attributes={"probe": "yes"}))
    return len(encoded.attributes) == 1

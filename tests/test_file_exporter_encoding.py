"""The durable file's fast span encoding writes the same OTLP/JSON document as the reference one."""

from __future__ import annotations

import base64
from typing import Any

import orjson
from google.protobuf.json_format import ParseDict
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
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
    set_span_in_context,
)

from spanreplay.exporters._otlp_json import LineEncoder, span_dict, span_json

_text = st.text(max_size=40)
_scalar = st.one_of(
    _text,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
)
_value = st.one_of(
    _scalar,
    st.lists(_text, max_size=4).map(tuple),
    st.lists(st.integers(min_value=0, max_value=10**6), max_size=4),
    st.text(min_size=2000, max_size=2100),  # a payload-sized string
)
_attributes = st.dictionaries(st.text(min_size=1, max_size=20), _value, max_size=8)


@st.composite
def span_specs(draw: st.DrawFn) -> dict[str, Any]:
    """What one span carries: drawn as plain data, since the SDK draws its ids from ``random``."""
    parent = None
    if draw(st.booleans()):
        parent = {
            "trace_id": draw(st.integers(min_value=1, max_value=2**128 - 1)),
            "span_id": draw(st.integers(min_value=1, max_value=2**64 - 1)),
            "is_remote": draw(st.booleans()),
            "trace_state": draw(st.booleans()),
        }
    code = draw(st.sampled_from([None, StatusCode.OK, StatusCode.ERROR]))
    return {
        "max_attributes": draw(st.sampled_from([3, 128])),
        "parent": parent,
        "name": draw(_text),
        "kind": draw(st.sampled_from(list(SpanKind))),
        "start": draw(_attributes),
        "end": draw(_attributes),
        "links": draw(st.lists(_attributes, max_size=3)),
        "events": draw(st.lists(st.tuples(_text, _attributes), max_size=3)),
        "status": code,
        "description": draw(st.one_of(st.none(), _text)) if code is StatusCode.ERROR else None,
    }


def build(spec: dict[str, Any]) -> ReadableSpan:
    """One ended SDK span as ``spec`` says, with drop counts past small limits."""
    exporter = InMemorySpanExporter()
    limits = SpanLimits(max_span_attributes=spec["max_attributes"], max_events=2, max_links=2)
    provider = TracerProvider(resource=Resource.create({"service.name": "enc"}), span_limits=limits)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("enc", "1.0")
    parent = None
    if spec["parent"] is not None:
        p = spec["parent"]
        remote = SpanContext(
            trace_id=p["trace_id"],
            span_id=p["span_id"],
            is_remote=p["is_remote"],
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
            trace_state=TraceState([("vendor", "x1")]) if p["trace_state"] else TraceState(),
        )
        parent = set_span_in_context(NonRecordingSpan(remote))
    target = SpanContext(trace_id=5, span_id=6, is_remote=False)
    span = tracer.start_span(
        spec["name"],
        context=parent,
        kind=spec["kind"],
        attributes=spec["start"],
        links=[Link(target, attributes) for attributes in spec["links"]],
    )
    span.set_attributes(spec["end"])
    for name, attributes in spec["events"]:
        span.add_event(name, attributes)
    if spec["status"] is not None:
        span.set_status(Status(spec["status"], spec["description"]))
    span.end()
    provider.shutdown()
    (finished,) = exporter.get_finished_spans()
    return finished


@settings(max_examples=150, deadline=None)
@given(span_specs())
def test_the_fast_encoding_is_the_reference_document(spec: dict[str, Any]) -> None:
    span = build(spec)
    assert orjson.loads(span_json(span)) == span_dict(span)


def _hex_ids_to_base64(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: base64.b64encode(bytes.fromhex(v)).decode()
            if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
            else _hex_ids_to_base64(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids_to_base64(v) for v in node]
    return node


@settings(max_examples=60, deadline=None)
@given(span_specs())
def test_each_fast_encoded_line_is_one_traces_data_the_protobuf_classes_accept(spec: dict[str, Any]) -> None:
    span = build(spec)
    line = LineEncoder().encode(span)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    message = ParseDict(_hex_ids_to_base64(orjson.loads(line)), TracesData())
    (proto_span,) = message.resource_spans[0].scope_spans[0].spans
    assert proto_span.name == span.name
    assert proto_span.span_id == span.context.span_id.to_bytes(8, "big")
    assert len(proto_span.attributes) == len(span.attributes or {})
    assert proto_span.dropped_attributes_count == span.dropped_attributes
    assert len(proto_span.events) == len(span.events)

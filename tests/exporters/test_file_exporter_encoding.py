"""The durable file's fast span encoding writes the same OTLP/JSON bytes as the reference one.

``span_dict`` builds the document as dicts; the file writes it through
``LineEncoder``, from a template per span shape or piece by piece. Both must give
the bytes ``orjson.dumps`` gives for the reference, and every reader of ours must
read the lines back to the spans the SDK held.
"""

from __future__ import annotations

import base64
import importlib.metadata
from typing import Any

import msgspec
import orjson
import pytest
from google.protobuf.json_format import ParseDict
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
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

from helpers.accelerators import needs_accelerator
from spanreplay.model.spans import from_sdk_span
from spanreplay.readers._otlp_json import spans_from_document
from spanreplay.readers._otlp_json_typed import line_spans
from spanreplay.recording.exporters._otlp_dicts import attributes_of, span_dict
from spanreplay.recording.exporters._otlp_json import LineEncoder, span_json

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
    st.sampled_from(["%s", "%d %%", "100%", '{"k":"v"}']),  # text that looks like a %-template
)
# Keys that look like %-conversions too: the templates must treat them as text.
_keys = st.text(min_size=1, max_size=20) | st.sampled_from(["%s", "a%db", "%%", "spanreplay.seq"])
_attributes = st.dictionaries(_keys, _value, max_size=8)


@st.composite
def span_specs(draw: st.DrawFn) -> dict[str, Any]:
    """What one span carries: drawn as plain data, since the SDK draws its ids from ``random``."""
    parent = None
    if draw(st.integers(0, 3)):  # most spans have a parent, as every boundary does
        parent = {
            "trace_id": draw(st.integers(min_value=1, max_value=2**128 - 1)),
            "span_id": draw(st.integers(min_value=1, max_value=2**64 - 1)),
            "is_remote": draw(st.booleans()),
            "trace_state": draw(st.booleans()),
        }
    code = draw(st.sampled_from([None, StatusCode.OK, StatusCode.ERROR]))
    # Half the spans are plain (no events, links or description), as boundary spans
    # are: those the encoder writes from a template.
    plain = draw(st.booleans())
    return {
        "max_attributes": draw(st.sampled_from([3, 128, 128])),
        "parent": parent,
        "name": draw(_text | st.sampled_from(["execute_tool %s", "chat claude"])),
        "kind": draw(st.sampled_from(list(SpanKind))),
        "start": draw(_attributes),
        "end": draw(_attributes),
        "links": [] if plain else draw(st.lists(_attributes, max_size=3)),
        "events": [] if plain else draw(st.lists(st.tuples(_text, _attributes), max_size=3)),
        "status": code,
        "description": draw(st.one_of(st.none(), _text)) if code is StatusCode.ERROR and not plain else None,
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
    assert span_json(span) == orjson.dumps(span_dict(span))


def reference_line(span: ReadableSpan) -> bytes:
    """The line the file must hold for ``span``: the reference document in its envelope."""
    scope = span.instrumentation_scope
    assert scope is not None
    head, tail = LineEncoder._envelope(span.resource, scope.name, scope.version or "", scope.attributes)
    return head + orjson.dumps(span_dict(span)) + tail


# One encoder for every example: its templates are made by some spans and reused by others.
SHARED = LineEncoder()


@settings(max_examples=300, deadline=None)
@given(span_specs())
def test_every_line_is_the_reference_line_byte_for_byte(spec: dict[str, Any]) -> None:
    span = build(spec)
    for encoder in (SHARED, LineEncoder()):
        assert encoder.encode(span) == reference_line(span)
        assert encoder.encode(span) == reference_line(span)  # again, from the template it made


class _Pool:
    """Two providers (two resources), each with four tracers (four scopes), kept for every
    example, so that spans can share all of their shape but one thing."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracers = []
        for service in ("a", "b"):
            provider = TracerProvider(resource=Resource.create({"service.name": service}))
            provider.add_span_processor(SimpleSpanProcessor(self.exporter))
            self.tracers += [provider.get_tracer("s1", "1"), provider.get_tracer("s2")]
            # The same name and version, told apart by their attributes only.
            self.tracers += [
                provider.get_tracer("s1", "1", attributes={"k": "v"}),
                provider.get_tracer("s1", "1", attributes={"k": ("v", "w")}),
            ]
        small = st.one_of(st.sampled_from(["x", "%d", "y\n"]), st.integers(-2, 2), st.booleans(), st.just(1.5))
        # What makes a span's shape, each drawn from a few choices.
        self.choices: dict[str, st.SearchStrategy[Any]] = {
            "tracer": st.sampled_from(self.tracers),
            "remote": st.booleans(),
            "flags": st.sampled_from([TraceFlags.SAMPLED, TraceFlags.SAMPLED | 2]),
            "name": st.sampled_from(["n", "m"]),
            "kind": st.sampled_from([SpanKind.INTERNAL, SpanKind.CLIENT]),
            "status": st.sampled_from([None, StatusCode.OK, StatusCode.ERROR]),
            # Same keys, values of other types from span to span: another template.
            "attributes": st.lists(st.sampled_from(["k", "%s", "seq"]), unique=True, max_size=3).flatmap(
                lambda keys: st.fixed_dictionaries(dict.fromkeys(keys, small))
            ),
        }

    def span(self, shape: dict[str, Any], ids: tuple[int, int]) -> ReadableSpan:
        remote = SpanContext(
            trace_id=ids[0], span_id=ids[1], is_remote=shape["remote"], trace_flags=TraceFlags(shape["flags"])
        )
        span = shape["tracer"].start_span(
            shape["name"],
            context=set_span_in_context(NonRecordingSpan(remote)),
            kind=shape["kind"],
            attributes=shape["attributes"],
        )
        if shape["status"] is not None:
            span.set_status(Status(shape["status"]))
        self.exporter.clear()
        span.end()
        (finished,) = self.exporter.get_finished_spans()
        return finished


POOL = _Pool()


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_spans_that_share_all_of_a_shape_but_one_thing_are_each_written_as_themselves(data: st.DataObject) -> None:
    # Spans alike in all but one thing (a value's type, the parent being remote, the
    # kind, the status, the flags, the name, the resource or the scope) through one
    # encoder: none may be written from another one's template.
    encoder = LineEncoder()
    base = {name: data.draw(choice) for name, choice in POOL.choices.items()}
    for _ in range(6):
        shape = dict(base)
        changed = data.draw(st.sampled_from([None, *POOL.choices]))
        if changed is not None:
            shape[changed] = data.draw(POOL.choices[changed])
        ids = (data.draw(st.integers(1, 2**128 - 1)), data.draw(st.integers(1, 2**64 - 1)))
        span = POOL.span(shape, ids)
        assert encoder.encode(span) == reference_line(span)


@pytest.mark.parametrize("value", [2**64, 2**70, -(2**63) - 1])
def test_an_integer_beyond_64_bits_is_written_as_the_reference_writes_it(value: int) -> None:
    # Not OTLP (readers refuse it), but written as the reference writes it: its digits.
    spec = {"max_attributes": 128, "parent": {"trace_id": 7, "span_id": 8, "is_remote": False, "trace_state": False},
            "name": "n", "kind": SpanKind.INTERNAL, "start": {"n": value, "s": "x"}, "end": {}, "links": [],
            "events": [], "status": None, "description": None}  # fmt: skip
    span = build(spec)
    assert LineEncoder().encode(span) == reference_line(span)
    assert b'"intValue":"%d"' % value in reference_line(span)


def test_text_that_is_not_utf8_is_written_readable_not_lost() -> None:
    spec = {"max_attributes": 128, "parent": {"trace_id": 7, "span_id": 8, "is_remote": False, "trace_state": False},
            "name": "n", "kind": SpanKind.INTERNAL, "start": {"a": "ok"}, "end": {}, "links": [], "events": [],
            "status": None, "description": None}  # fmt: skip
    encoder = LineEncoder()
    good = build(spec)
    assert encoder.encode(good) == reference_line(good)
    bad = build({**spec, "start": {"a": "\ud800"}})  # a lone surrogate, same shape
    with pytest.raises(orjson.JSONEncodeError):
        orjson.dumps(span_dict(bad))
    # The template's shape, then the piece-by-piece path: both fall back to the readable line.
    for span in (bad, build({**spec, "name": "n\udc80", "start": {"k\udc81": 1}})):
        line = encoder.encode(span)
        assert line.endswith(b"\n")
        (read,) = spans_from_document(orjson.loads(line), "line")
        assert read.attributes in ({"a": "\\ud800"}, {"k\\udc81": 1})
    assert read.name == "n\\udc80"


def _expected_attribute(value: Any) -> Any:
    """An SDK attribute value as a reader of OTLP/JSON gives it back."""
    if isinstance(value, tuple):
        return [_expected_attribute(v) for v in value]
    if isinstance(value, float) and value != value:
        return "NaN"  # compared as text: NaN is never equal to itself
    return value


def _comparable(attributes: dict[str, Any]) -> dict[str, Any]:
    return {k: _expected_attribute(v) for k, v in attributes.items()}


@settings(max_examples=200, deadline=None)
@given(span_specs())
def test_every_reader_reads_each_line_back_to_the_span(spec: dict[str, Any]) -> None:
    span = build(spec)
    line = SHARED.encode(span)
    typed = line_spans(line.rstrip(b"\n"), "t")
    checked = list(spans_from_document(orjson.loads(line), "t"))
    assert typed is not None, "the typed reader refused a line the file wrote"
    assert typed == checked
    (record,) = typed
    ctx = span.get_span_context()
    assert ctx is not None
    assert (record.trace_id, record.span_id) == (f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")
    assert record.parent_span_id == (f"{span.parent.span_id:016x}" if span.parent else None)
    assert (record.name, record.start_ns, record.end_ns) == (span.name, span.start_time, span.end_time)
    assert _comparable(dict(record.attributes)) == _comparable(dict(span.attributes or {}))
    assert record.resource == dict(span.resource.attributes)
    assert record.kind == span.kind.value + 1  # OTLP numbers kinds from 1
    assert (record.status_code, record.status_message) == (
        {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}[span.status.status_code],
        span.status.description or "",
    )
    assert record.dropped_attributes_count == span.dropped_attributes
    if not _holds_nan(span):  # NaN is never equal to itself, so neither are records that hold one
        # Built in process, the record is the one read back (but for where it was read from).
        assert record == msgspec.structs.replace(from_sdk_span(span), origin="t")


def _holds_nan(span: ReadableSpan) -> bool:
    values = [*(span.attributes or {}).values()]
    values += [v for e in span.events for v in (e.attributes or {}).values()]
    values += [v for link in span.links for v in (link.attributes or {}).values()]
    return any(isinstance(v, float) and v != v for v in values)


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


def test_values_are_written_as_orjson_writes_them_for_every_code_point() -> None:
    # The template path writes str, int and bool values with msgspec, the reference
    # with orjson: the two must agree on every character's escaping, alone and in runs.
    from spanreplay.recording.exporters._otlp_json import _encode_value

    characters = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    for c in characters[:0x800]:  # every ASCII character, and then some, alone
        assert _encode_value(c) == orjson.dumps(c)
    for start in range(0, len(characters), 4096):
        run = "".join(characters[start : start + 4096])
        assert _encode_value(run) == orjson.dumps(run)
    for value in (True, False, 0, -1, 2**63 - 1, -(2**63), 2**64 - 1):
        assert _encode_value(value) == orjson.dumps(value)


@needs_accelerator("attribute_dict")
def test_the_sdk_still_keeps_span_attributes_where_the_fast_read_finds_them() -> None:
    # attributes_of() reads the SDK's attribute dict in place (ReadableSpan.attributes
    # is a proxy whose every lookup is a Python call). When an SDK release stores them
    # elsewhere, recording still works through the public property, only slower: this
    # test is what notices.
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    live = provider.get_tracer("t").start_span("s", attributes={"a": 1, "b": "two"})
    live.set_attribute("c", True)
    live_read = attributes_of(live)
    live.end()
    (ended,) = exporter.get_finished_spans()
    sdk = importlib.metadata.version("opentelemetry-sdk")
    for span, read in ((live, live_read), (ended, attributes_of(ended))):
        assert type(read) is dict, (
            f"opentelemetry-sdk {sdk} no longer keeps a span's attributes in ReadableSpan._attributes._dict: "
            "spanreplay falls back to the slower public ReadableSpan.attributes; update attributes_of() in "
            "spanreplay/recording/exporters/_otlp_json.py to the SDK's new storage "
            "(and measure benchmarks/bench_record.py)"
        )
        assert read == {"a": 1, "b": "two", "c": True} == dict(span.attributes or {})


@pytest.mark.parametrize("attributes", [{"k": "v", "n": 3}, None], ids=["plain-dict", "none"])
def test_a_span_that_stores_its_attributes_otherwise_is_written_through_the_public_properties(
    attributes: dict[str, Any] | None,
) -> None:
    # A ReadableSpan built directly keeps the attributes it was given as they are
    # (no BoundedAttributes): the fallback an SDK with other storage takes.
    span = ReadableSpan(
        "built",
        context=SpanContext(trace_id=1, span_id=2, is_remote=False),
        parent=SpanContext(trace_id=1, span_id=3, is_remote=False),
        attributes=attributes,
        start_time=10,
        end_time=20,
        resource=Resource.create({"service.name": "x"}),
        instrumentation_scope=InstrumentationScope("scope"),
    )
    assert dict(attributes_of(span)) == (attributes or {})
    encoder = LineEncoder()
    assert encoder.encode(span) == reference_line(span)
    assert encoder.encode(span) == reference_line(span)
    assert orjson.loads(encoder.encode(span))["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] == [
        {"key": k, "value": {"stringValue": v} if isinstance(v, str) else {"intValue": str(v)}}
        for k, v in (attributes or {}).items()
    ]

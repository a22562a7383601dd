"""SpanRecord -> OTLP again: JSON lines and the Collector's length-prefixed protobuf.

The inverse of the readers, for ``spanreplay convert``: whatever format spans
were read from, they are written the way the Collector's file exporter writes
them, so every OTLP tool (and spanreplay itself) reads the result. Values go
out as the readers decoded them, so reading a converted file gives the same
spans again.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final

import orjson
import zstandard
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, TracesData

from spanreplay.model.spans import SpanRecord

from ._base import MalformedTrace

# Spans per written batch (one JSON line, one proto record): the Collector's batch processor default.
BATCH_SPANS: Final = 512
_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1
_UINT32_MAX = 2**32 - 1
_NON_FINITE = {math.inf: "Infinity", -math.inf: "-Infinity"}


def batches(spans: Iterable[SpanRecord], size: int = BATCH_SPANS) -> Iterator[list[SpanRecord]]:
    batch: list[SpanRecord] = []
    for span in spans:
        batch.append(span)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def _groups(spans: list[SpanRecord]) -> dict[bytes, dict[bytes, list[SpanRecord]]]:
    """Spans by resource, then by scope, in first-seen order (what one TracesData holds)."""
    out: dict[bytes, dict[bytes, list[SpanRecord]]] = {}
    for span in spans:
        resource = _key(span.resource)
        scope = _key([span.scope_name, span.scope_version, span.scope_attributes])
        out.setdefault(resource, {}).setdefault(scope, []).append(span)
    return out


def _key(value: Any) -> bytes:
    return orjson.dumps(value, default=repr, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


# --- OTLP/JSON ----------------------------------------------------------------------------


def json_document(spans: list[SpanRecord]) -> dict[str, Any]:
    """One OTLP/JSON ``TracesData`` holding ``spans``, in the opentelemetry-proto JSON mapping."""
    resource_spans = []
    for scopes in _groups(spans).values():
        first = next(iter(scopes.values()))[0]
        scope_spans = []
        for group in scopes.values():
            head = group[0]
            scope: dict[str, Any] = {"name": head.scope_name}
            if head.scope_version:
                scope["version"] = head.scope_version
            if head.scope_attributes:
                scope["attributes"] = json_key_values(head.scope_attributes)
            scope_spans.append({"scope": scope, "spans": [json_span(s) for s in group]})
        resource_spans.append({"resource": {"attributes": json_key_values(first.resource)}, "scopeSpans": scope_spans})
    return {"resourceSpans": resource_spans}


def json_lines(spans: Iterable[SpanRecord]) -> Iterator[bytes]:
    """The Collector file exporter's ``format: json``: one TracesData per line."""
    for batch in batches(spans):
        yield orjson.dumps(json_document(batch)) + b"\n"


def json_span(span: SpanRecord) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": span.trace_id,
        "spanId": span.span_id,
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": json_key_values(span.attributes),
        "status": _json_status(span),
    }
    if span.parent_span_id:
        out["parentSpanId"] = span.parent_span_id
    if span.trace_state:
        out["traceState"] = span.trace_state
    if span.events:
        out["events"] = [
            {
                "timeUnixNano": str(e.time_ns),
                "name": e.name,
                "attributes": json_key_values(e.attributes),
                **({"droppedAttributesCount": e.dropped_attributes_count} if e.dropped_attributes_count else {}),
            }
            for e in span.events
        ]
    if span.links:
        out["links"] = [
            {
                "traceId": link.trace_id,
                "spanId": link.span_id,
                "attributes": json_key_values(link.attributes),
                **({"traceState": link.trace_state} if link.trace_state else {}),
                **({"droppedAttributesCount": link.dropped_attributes_count} if link.dropped_attributes_count else {}),
            }
            for link in span.links
        ]
    for name, value in (
        ("droppedAttributesCount", span.dropped_attributes_count),
        ("droppedEventsCount", span.dropped_events_count),
        ("droppedLinksCount", span.dropped_links_count),
    ):
        if value:
            out[name] = value
    return out


def _json_status(span: SpanRecord) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if span.status_code:
        status["code"] = span.status_code
    if span.status_message:
        status["message"] = span.status_message
    return status


def json_key_values(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": json_any_value(value)} for key, value in values.items()]


def json_any_value(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        # proto3 JSON spells the non-finite doubles as strings (JSON has no NaN).
        if math.isnan(value):
            return {"doubleValue": "NaN"}
        return {"doubleValue": _NON_FINITE.get(value, value)}
    if isinstance(value, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(value).decode()}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [json_any_value(v) for v in value]}}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": json_key_values(value)}}
    raise MalformedTrace(f"an attribute value of type {type(value).__name__} has no OTLP form")


# --- OTLP protobuf ---------------------------------------------------------------------------


def proto_message(spans: list[SpanRecord]) -> TracesData:
    """One ``TracesData`` message holding ``spans``."""
    message = TracesData()
    for scopes in _groups(spans).values():
        resource_spans: ResourceSpans = message.resource_spans.add()
        first = next(iter(scopes.values()))[0]
        _proto_key_values(resource_spans.resource.attributes, first.resource)
        for group in scopes.values():
            scope_spans: ScopeSpans = resource_spans.scope_spans.add()
            head = group[0]
            scope_spans.scope.name = head.scope_name
            scope_spans.scope.version = head.scope_version
            _proto_key_values(scope_spans.scope.attributes, head.scope_attributes)
            for span in group:
                try:
                    _proto_span(scope_spans, span)
                except (ValueError, TypeError) as exc:  # a value outside what the proto field holds
                    raise MalformedTrace(f"span {span.span_id} {span.name!r:.60} has no protobuf form: {exc}") from None
    return message


def proto_records(spans: Iterable[SpanRecord], *, zstd: bool = False) -> Iterator[bytes]:
    """The Collector file exporter's ``format: proto``: 4-byte big-endian length, then the message."""
    compressor = zstandard.ZstdCompressor() if zstd else None
    for batch in batches(spans):
        body = proto_message(batch).SerializeToString()
        if compressor is not None:
            body = compressor.compress(body)
        yield len(body).to_bytes(4, "big") + body


def json_records_zstd(spans: Iterable[SpanRecord]) -> Iterator[bytes]:
    """``format: json`` with ``compression: zstd``: the Collector then length-prefixes each compressed batch."""
    compressor = zstandard.ZstdCompressor()
    for batch in batches(spans):
        body = compressor.compress(orjson.dumps(json_document(batch)))
        yield len(body).to_bytes(4, "big") + body


def _proto_span(scope_spans: ScopeSpans, span: SpanRecord) -> None:
    out = scope_spans.spans.add()
    out.trace_id = bytes.fromhex(span.trace_id)
    out.span_id = bytes.fromhex(span.span_id)
    if span.parent_span_id:
        out.parent_span_id = bytes.fromhex(span.parent_span_id)
    out.name = span.name
    out.kind = span.kind  # an open enum: any int32 is kept
    out.start_time_unix_nano = _ranged(span.start_ns, 0, _UINT64_MAX, "the start time")
    out.end_time_unix_nano = _ranged(span.end_ns, 0, _UINT64_MAX, "the end time")
    _proto_key_values(out.attributes, span.attributes)
    out.status.code = span.status_code
    out.status.message = span.status_message
    out.trace_state = span.trace_state
    out.dropped_attributes_count = _ranged(span.dropped_attributes_count, 0, _UINT32_MAX, "a dropped count")
    out.dropped_events_count = _ranged(span.dropped_events_count, 0, _UINT32_MAX, "a dropped count")
    out.dropped_links_count = _ranged(span.dropped_links_count, 0, _UINT32_MAX, "a dropped count")
    for event in span.events:
        proto_event = out.events.add()
        proto_event.time_unix_nano = _ranged(event.time_ns, 0, _UINT64_MAX, "an event time")
        proto_event.name = event.name
        _proto_key_values(proto_event.attributes, event.attributes)
        proto_event.dropped_attributes_count = _ranged(event.dropped_attributes_count, 0, _UINT32_MAX, "a count")
    for link in span.links:
        proto_link = out.links.add()
        proto_link.trace_id = bytes.fromhex(link.trace_id)
        proto_link.span_id = bytes.fromhex(link.span_id)
        proto_link.trace_state = link.trace_state
        _proto_key_values(proto_link.attributes, link.attributes)
        proto_link.dropped_attributes_count = _ranged(link.dropped_attributes_count, 0, _UINT32_MAX, "a count")


def _ranged(value: int, low: int, high: int, what: str) -> int:
    if not low <= value <= high:
        raise ValueError(f"{what} {value} is outside {low}..{high}")
    return value


def _proto_key_values(target: Any, values: Mapping[str, Any]) -> None:
    for key, value in values.items():
        item = target.add()
        item.key = key
        _proto_any_value(item.value, value)


def _proto_any_value(target: AnyValue, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = _ranged(value, *_INT64, "an integer attribute")
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, (bytes, bytearray)):
        target.bytes_value = bytes(value)
    elif isinstance(value, (list, tuple)):
        target.array_value.SetInParent()  # an empty array is still an array, not an empty value
        for item in value:
            _proto_any_value(target.array_value.values.add(), item)
    elif isinstance(value, Mapping):
        target.kvlist_value.SetInParent()
        _proto_key_values(target.kvlist_value.values, value)
    else:
        raise TypeError(f"an attribute value of type {type(value).__name__} has no OTLP form")

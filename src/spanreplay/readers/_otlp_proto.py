"""OTLP protobuf (``TracesData`` / ``ExportTraceServiceRequest``) -> SpanRecord.

The Collector's file exporter with ``format: proto`` writes each batch as one
serialized ``TracesData`` behind a 4-byte length (``_records`` splits them).
Decoding goes through the official opentelemetry-proto classes, so the wire
format is never parsed by hand; this module only turns the messages into
``SpanRecord``s with the same values the JSON reader gives for the same spans.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, TracesData

from spanreplay.model.spans import SpanEventRecord, SpanLinkRecord, SpanRecord

from ._base import MalformedTrace
from ._otlp_json import MAX_DEPTH

# protobuf ships no type stubs (types-protobuf is a separate package): looked up, not imported.
_DecodeError: type[Exception] = importlib.import_module("google.protobuf.message").DecodeError


def parse(data: bytes) -> TracesData:
    """One serialized ``TracesData``; MalformedTrace when the bytes are not one."""
    message = TracesData()
    try:
        message.ParseFromString(data)
    except (_DecodeError, RuntimeError, ValueError) as exc:
        # RuntimeError: the parser's own recursion limit on deeply nested values.
        raise MalformedTrace(f"not an OTLP TracesData protobuf message ({exc})") from None
    return message


def spans_from_message(message: TracesData, origin: str) -> Iterator[SpanRecord]:
    """Every span in one decoded ``TracesData``."""
    for resource_spans in message.resource_spans:
        resource = key_values(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            scope_attributes = key_values(scope.attributes)
            for index, span in enumerate(scope_spans.spans):
                try:
                    yield _span(span, resource, scope.name, scope.version, scope_attributes, origin)
                except MalformedTrace as exc:
                    raise MalformedTrace(f"span {index} {span.name!r:.60}: {exc}") from None


def _span(
    span: Span,
    resource: dict[str, Any],
    scope_name: str,
    scope_version: str,
    scope_attributes: dict[str, Any],
    origin: str,
) -> SpanRecord:
    return SpanRecord(
        trace_id=_id(span.trace_id, 16),
        span_id=_id(span.span_id, 8),
        parent_span_id=_id(span.parent_span_id, 8) or None,
        name=span.name,
        kind=span.kind,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        attributes=key_values(span.attributes),
        status_code=span.status.code,
        status_message=span.status.message,
        resource=resource,
        scope_name=scope_name,
        scope_version=scope_version,
        scope_attributes=scope_attributes,
        trace_state=span.trace_state,
        events=tuple(
            SpanEventRecord(
                name=event.name,
                time_ns=event.time_unix_nano,
                attributes=key_values(event.attributes),
                dropped_attributes_count=event.dropped_attributes_count,
            )
            for event in span.events
        ),
        links=tuple(
            SpanLinkRecord(
                trace_id=_id(link.trace_id, 16),
                span_id=_id(link.span_id, 8),
                attributes=key_values(link.attributes),
                trace_state=link.trace_state,
                dropped_attributes_count=link.dropped_attributes_count,
            )
            for link in span.links
        ),
        dropped_attributes_count=span.dropped_attributes_count,
        dropped_events_count=span.dropped_events_count,
        dropped_links_count=span.dropped_links_count,
        origin=origin,
    )


def key_values(items: Any, depth: int = 0) -> dict[str, Any]:
    """Repeated ``KeyValue`` -> dict, values decoded as the JSON reader decodes them."""
    return {item.key: any_value(item.value, depth) for item in items}


def any_value(value: AnyValue, depth: int = 0) -> Any:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "double_value":
        return value.double_value
    if kind == "bytes_value":
        return bytes(value.bytes_value)
    if depth >= MAX_DEPTH:
        raise MalformedTrace(f"attribute values nest deeper than {MAX_DEPTH} levels")
    if kind == "array_value":
        return [any_value(v, depth + 1) for v in value.array_value.values]
    if kind == "kvlist_value":
        return key_values(value.kvlist_value.values, depth + 1)
    raise MalformedTrace(f"unknown AnyValue field {kind}")  # a newer proto than this release knows


def _id(raw: bytes, size: int) -> str:
    if not raw:
        return ""
    if len(raw) != size:
        raise MalformedTrace(f"id {raw.hex()!r:.60} is {len(raw)} bytes, not {size}")
    return raw.hex()

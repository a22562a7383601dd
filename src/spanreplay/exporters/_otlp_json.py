"""OpenTelemetry SDK spans -> OTLP/JSON, as the opentelemetry-proto spec writes it.

Hex trace and span ids, 64-bit integers as strings, enums as integers,
lowerCamelCase field names: what the Collector's ``otlpjsonfile`` receiver and
Jaeger's upload read. One line holds one ``TracesData`` with one span, so a
line is complete the moment it is written.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

# The SDK numbers SpanKind from 0 (INTERNAL); OTLP numbers it from 1 (0 is UNSPECIFIED).
_KIND = {kind: kind.value + 1 for kind in SpanKind}
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


def any_value(value: Any) -> dict[str, Any]:
    """One attribute value as an OTLP/JSON AnyValue."""
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"doubleValue": value}
        # proto3 JSON spells the non-finite doubles as strings.
        return {"doubleValue": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, (bytes, bytearray)):
        return {"bytesValue": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, Mapping):
        return {"kvlistValue": {"values": key_values(value)}}
    if isinstance(value, Sequence):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    if value is None:
        return {}
    return {"stringValue": str(value)}


def key_values(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    if not attributes:
        return []
    return [{"key": k, "value": any_value(v)} for k, v in attributes.items()]


def span_dict(span: ReadableSpan) -> dict[str, Any]:
    """The OTLP/JSON ``Span`` object for one SDK span (ended or still running)."""
    ctx = span.get_span_context()
    assert ctx is not None  # SDK spans always carry a context
    out: dict[str, Any] = {
        "traceId": format(ctx.trace_id, "032x"),
        "spanId": format(ctx.span_id, "016x"),
    }
    if ctx.trace_state:
        out["traceState"] = ctx.trace_state.to_header()
    if span.parent is not None:
        out["parentSpanId"] = format(span.parent.span_id, "016x")
    out["flags"] = int(ctx.trace_flags) | (0x300 if span.parent is not None and span.parent.is_remote else 0x100)
    out["name"] = span.name
    out["kind"] = _KIND[span.kind]
    if span.start_time is not None:
        out["startTimeUnixNano"] = str(span.start_time)
    if span.end_time is not None:
        out["endTimeUnixNano"] = str(span.end_time)
    out["attributes"] = key_values(span.attributes)
    if span.dropped_attributes:
        out["droppedAttributesCount"] = span.dropped_attributes
    if span.events:
        out["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": key_values(e.attributes)}
            for e in span.events
        ]
    if span.dropped_events:
        out["droppedEventsCount"] = span.dropped_events
    if span.links:
        out["links"] = [
            {
                "traceId": format(link.context.trace_id, "032x"),
                "spanId": format(link.context.span_id, "016x"),
                "attributes": key_values(link.attributes),
            }
            for link in span.links
        ]
    if span.dropped_links:
        out["droppedLinksCount"] = span.dropped_links
    status: dict[str, Any] = {}
    if span.status.status_code is not StatusCode.UNSET:
        status["code"] = _STATUS[span.status.status_code]
    if span.status.description:
        status["message"] = span.status.description
    out["status"] = status
    return out


class LineEncoder:
    """Encodes spans to OTLP/JSON lines, caching the resource and scope envelope."""

    def __init__(self) -> None:
        # The resource is kept in the value so its id() cannot be reused by another object.
        self._envelopes: dict[tuple[int, str, str], tuple[Resource, bytes, bytes]] = {}

    def encode(self, span: ReadableSpan) -> bytes:
        scope = span.instrumentation_scope
        scope_name = scope.name if scope else ""
        scope_version = (scope.version or "") if scope else ""
        cache_key = (id(span.resource), scope_name, scope_version)
        envelope = self._envelopes.get(cache_key)
        if envelope is None:
            envelope = (span.resource, *self._envelope(span.resource, scope_name, scope_version))
            self._envelopes[cache_key] = envelope
        _, head, tail = envelope
        return head + orjson.dumps(span_dict(span)) + tail

    @staticmethod
    def _envelope(resource: Resource, scope_name: str, scope_version: str) -> tuple[bytes, bytes]:
        scope: dict[str, Any] = {"name": scope_name}
        if scope_version:
            scope["version"] = scope_version
        resource_json = orjson.dumps({"attributes": key_values(resource.attributes)})
        head = b'{"resourceSpans":[{"resource":' + resource_json
        if resource.schema_url:
            head += b',"schemaUrl":' + orjson.dumps(resource.schema_url)
        head += b',"scopeSpans":[{"scope":' + orjson.dumps(scope) + b',"spans":['
        return head, b"]}]}]}\n"

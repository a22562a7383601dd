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
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Link, SpanKind, StatusCode

# The SDK numbers SpanKind from 0 (INTERNAL); OTLP numbers it from 1 (0 is UNSPECIFIED).
_KIND = {kind: kind.value + 1 for kind in SpanKind}
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}
_KIND_JSON = {kind: b',"kind":%d' % number for kind, number in _KIND.items()}
# The end of a span with no dropped counts, events or links, by status (no description).
_PLAIN_TAIL = {
    StatusCode.UNSET: b',"status":{}}',
    StatusCode.OK: b',"status":{"code":1}}',
    StatusCode.ERROR: b',"status":{"code":2}}',
}


def any_value(value: Any) -> dict[str, Any]:
    """One attribute value as an OTLP/JSON AnyValue."""
    kind = type(value)
    # Exact type checks first: attribute values are nearly always plain str and int,
    # and this runs for every attribute of every span written.
    if kind is str:
        return {"stringValue": value}
    if kind is int:
        return {"intValue": str(value)}
    if isinstance(value, str):
        return {"stringValue": str(value)}
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(int(value))}
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
    out: list[dict[str, Any]] = []
    append = out.append
    for k, v in attributes.items():
        # any_value() inlined for the two types nearly every attribute has: a Python
        # call per attribute is a large share of encoding a span.
        kind = type(v)
        if kind is str:
            append({"key": k, "value": {"stringValue": v}})
        elif kind is int:
            append({"key": k, "value": {"intValue": str(v)}})
        else:
            append({"key": k, "value": any_value(v)})
    return out


def attributes_of(span: ReadableSpan) -> Mapping[str, Any]:
    """The span's attributes, read without building a proxy over them (see ``_raw``)."""
    attributes = getattr(getattr(span, "_attributes", None), "_dict", None)
    if type(attributes) is dict:
        return attributes
    return span.attributes or {}


def _raw(span: ReadableSpan) -> tuple[Mapping[str, Any], Sequence[Event], Sequence[Link]]:
    """A span's attributes, events and links without the copies its properties make.

    ``ReadableSpan.attributes`` wraps a ``BoundedAttributes`` whose item iteration
    goes through Python methods, and ``events``/``links`` copy their lists under a
    lock: together they cost more than the rest of the encoding. An ended span no
    longer changes, so the SDK's attribute dict is read directly and the events and
    links are only copied when there are any. SDKs that store them differently get
    the public properties.
    """
    attributes = attributes_of(span)
    stored = getattr(span, "_events", None)
    events = span.events if stored is None or len(stored) else ()
    stored = getattr(span, "_links", None)
    links = span.links if stored is None or len(stored) else ()
    return attributes, events, links


def span_dict(span: ReadableSpan) -> dict[str, Any]:
    """The OTLP/JSON ``Span`` object for one SDK span (ended or still running)."""
    ctx = span.get_span_context()
    assert ctx is not None  # SDK spans always carry a context
    attributes, events, links = _raw(span)
    out: dict[str, Any] = {
        "traceId": format(ctx.trace_id, "032x"),
        "spanId": format(ctx.span_id, "016x"),
    }
    if ctx.trace_state:
        out["traceState"] = ctx.trace_state.to_header()
    parent = span.parent
    if parent is not None:
        out["parentSpanId"] = format(parent.span_id, "016x")
    # Bits 8 and 9: "whether the parent is remote" is known (0x100), and its value (0x200).
    out["flags"] = int(ctx.trace_flags) | (0x300 if parent is not None and parent.is_remote else 0x100)
    out["name"] = span.name
    out["kind"] = _KIND[span.kind]
    if span.start_time is not None:
        out["startTimeUnixNano"] = str(span.start_time)
    if span.end_time is not None:
        out["endTimeUnixNano"] = str(span.end_time)
    out["attributes"] = key_values(attributes)
    out.update(_tail(span, events, links))
    return out


def _tail(span: ReadableSpan, events: Sequence[Event], links: Sequence[Link]) -> dict[str, Any]:
    """The fields after the attributes: drop counts, events, links and the status."""
    out: dict[str, Any] = {}
    if span.dropped_attributes:
        out["droppedAttributesCount"] = span.dropped_attributes
    if events:
        out["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": key_values(e.attributes)} for e in events
        ]
    if span.dropped_events:
        out["droppedEventsCount"] = span.dropped_events
    if links:
        out["links"] = [
            {
                "traceId": format(link.context.trace_id, "032x"),
                "spanId": format(link.context.span_id, "016x"),
                "attributes": key_values(link.attributes),
            }
            for link in links
        ]
    if span.dropped_links:
        out["droppedLinksCount"] = span.dropped_links
    status = span.status
    if status.status_code is StatusCode.UNSET:
        out["status"] = {}
    else:
        out["status"] = (
            {"code": _STATUS[status.status_code], "message": status.description}
            if status.description
            else {"code": _STATUS[status.status_code]}
        )
    return out


def span_parts(span: ReadableSpan) -> list[bytes]:
    """``span_dict(span)`` as JSON, in pieces for ``b"".join``: what the file writes.

    The same document as ``orjson.dumps(span_dict(span))`` (a test holds them
    equal), built with fewer Python objects, because a span is encoded on the
    agent's thread as it ends: the fixed fields are formatted straight into bytes,
    and only the attributes (and the rare events, links and drop counts) become
    dicts for orjson.
    """
    ctx = span.get_span_context()
    assert ctx is not None  # SDK spans always carry a context
    attributes, events, links = _raw(span)
    head = b'{"traceId":"%032x","spanId":"%016x"' % (ctx.trace_id, ctx.span_id)
    if ctx.trace_state:
        head += b',"traceState":' + orjson.dumps(ctx.trace_state.to_header())
    parent = span.parent
    if parent is not None:
        head += b',"parentSpanId":"%016x"' % parent.span_id
    flags = int(ctx.trace_flags) | (0x300 if parent is not None and parent.is_remote else 0x100)
    parts = [head, b',"flags":%d,"name":' % flags, orjson.dumps(span.name), _KIND_JSON[span.kind]]
    if span.start_time is not None:
        parts.append(b',"startTimeUnixNano":"%d"' % span.start_time)
    if span.end_time is not None:
        parts.append(b',"endTimeUnixNano":"%d"' % span.end_time)
    parts.append(b',"attributes":')
    parts.append(orjson.dumps(key_values(attributes)))
    status = span.status
    if events or links or status.description or span.dropped_attributes or span.dropped_events or span.dropped_links:
        # '{"status":..}' continues the span as ',"status":..}'.
        parts.append(b"," + orjson.dumps(_tail(span, events, links))[1:])
    else:
        parts.append(_PLAIN_TAIL[status.status_code])
    return parts


def span_json(span: ReadableSpan) -> bytes:
    """The OTLP/JSON ``Span`` object for one SDK span, as JSON bytes."""
    return b"".join(span_parts(span))


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
        parts = span_parts(span)
        parts.insert(0, envelope[1])
        parts.append(envelope[2])
        return b"".join(parts)

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

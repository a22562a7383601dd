"""OTLP/JSON documents (``TracesData`` / ``ExportTraceServiceRequest``) -> SpanRecord.

Reads what the opentelemetry-proto spec writes (hex ids, int64 as strings,
integer enums, lowerCamelCase) and the variants other producers emit: Tempo's
base64 ids and enum names, numbers where strings belong, the older
``instrumentationLibrarySpans`` and ``batches``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any

from spanreplay.model.spans import SpanEventRecord, SpanLinkRecord, SpanRecord

from ._base import MalformedTrace, array, base64_bytes, count, integer, number, obj, text, timestamp

KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
# Attribute values nest (arrays of maps of arrays); nothing real comes near this,
# and a bound keeps a hostile file from exhausting the interpreter's stack.
MAX_DEPTH = 64


def any_value(value: Any, _depth: int = 0) -> Any:
    """Decode an OTLP/JSON ``AnyValue`` into a plain Python value.

    ``intValue`` may be a JSON string (proto3's int64) or a number; ``bytesValue``
    is base64; an empty AnyValue is None.
    """
    value = obj(value, "an AnyValue object")
    if not value:
        return None
    if _depth >= MAX_DEPTH:
        raise MalformedTrace(f"attribute values nest deeper than {MAX_DEPTH} levels")
    if "stringValue" in value:
        return text(value["stringValue"], "a stringValue string")
    if "intValue" in value:
        return integer(value["intValue"], "an intValue integer")
    if "boolValue" in value:
        raw = value["boolValue"]
        if not isinstance(raw, bool):
            raise MalformedTrace(f"boolValue must be true or false, not {raw!r:.60}")
        return raw
    if "doubleValue" in value:
        return number(value["doubleValue"], "a doubleValue number")
    if "arrayValue" in value:
        values = array(obj(value["arrayValue"], "an arrayValue object").get("values"), "an array of values")
        return [any_value(v, _depth + 1) for v in values]
    if "kvlistValue" in value:
        return key_values(obj(value["kvlistValue"], "a kvlistValue object").get("values"), _depth + 1)
    if "bytesValue" in value:
        return base64_bytes(value["bytesValue"], "a bytesValue")
    raise MalformedTrace(f"unknown AnyValue field(s) {', '.join(sorted(map(str, value)))[:80]}")


def key_values(items: Any, _depth: int = 0) -> dict[str, Any]:
    """Decode a list of OTLP/JSON ``KeyValue`` objects into a dict (absent -> empty)."""
    out: dict[str, Any] = {}
    if type(items) is not list:
        items = array(items, "a list of attributes")
    for item in items:
        # The fast path: exact types as orjson makes them, and the three common value
        # shapes, decoded as any_value would. Anything else takes the checked path.
        if type(item) is dict:
            key = item.get("key")
            value = item.get("value")
            if type(key) is str and type(value) is dict:
                if "stringValue" in value:
                    found = value["stringValue"]
                    if type(found) is str:
                        out[key] = found
                        continue
                elif "intValue" in value:
                    found = value["intValue"]
                    if type(found) is str and found.isdecimal() and len(found) < 19:
                        out[key] = int(found)
                        continue
                elif "boolValue" in value and type(value["boolValue"]) is bool:
                    out[key] = value["boolValue"]
                    continue
        item = obj(item, "a KeyValue object")
        out[text(item.get("key", ""), "an attribute key")] = any_value(item.get("value", {}), _depth)
    return out


def spans_from_document(doc: Mapping[str, Any], origin: str) -> Iterator[SpanRecord]:
    """Every span in one OTLP/JSON traces document."""
    resource_spans_list = doc["resourceSpans"] if "resourceSpans" in doc else doc.get("batches")
    for resource_spans in array(resource_spans_list, "resourceSpans to be an array"):
        resource_spans = obj(resource_spans, "a ResourceSpans object")
        resource = key_values(obj(resource_spans.get("resource") or {}, "a resource object").get("attributes"))
        scopes = resource_spans.get("scopeSpans", resource_spans.get("instrumentationLibrarySpans"))
        for scope_spans in array(scopes, "scopeSpans to be an array"):
            scope_spans = obj(scope_spans, "a ScopeSpans object")
            scope = obj(scope_spans.get("scope", scope_spans.get("instrumentationLibrary")) or {}, "a scope object")
            scope_name = text(scope.get("name", ""), "a scope name")
            scope_version = text(scope.get("version", ""), "a scope version")
            scope_attributes = key_values(scope.get("attributes"))
            for index, span in enumerate(array(scope_spans.get("spans"), "spans to be an array")):
                try:
                    yield _span(
                        obj(span, "a Span object"), resource, scope_name, scope_version, scope_attributes, origin
                    )
                except MalformedTrace as exc:
                    name = span.get("name") if isinstance(span, Mapping) else None
                    called = f" {name!r:.60}" if isinstance(name, str) else ""
                    raise MalformedTrace(f"span {index}{called}: {exc}") from None


def _span(
    span: Mapping[str, Any],
    resource: dict[str, Any],
    scope_name: str,
    scope_version: str,
    scope_attributes: dict[str, Any],
    origin: str,
) -> SpanRecord:
    fast = _plain_span(span, resource, scope_name, scope_version, scope_attributes, origin)
    if fast is not None:
        return fast
    status = obj(span.get("status") or {}, "a status object")
    # proto3 JSON may write the empty parent id as "": the span is a root either way.
    parent_id = span.get("parentSpanId")
    parent = hex_id("" if parent_id is None else parent_id, 8) or None
    return SpanRecord(
        trace_id=hex_id(span.get("traceId", ""), 16),
        span_id=hex_id(span.get("spanId", ""), 8),
        parent_span_id=parent,
        name=text(span.get("name", ""), "a span name"),
        kind=enum_value(span.get("kind", 0), KIND_NAMES, "a span kind"),
        start_ns=timestamp(span.get("startTimeUnixNano", 0), "startTimeUnixNano in nanoseconds"),
        end_ns=timestamp(span.get("endTimeUnixNano", 0), "endTimeUnixNano in nanoseconds"),
        attributes=key_values(span.get("attributes")),
        status_code=enum_value(status.get("code", 0), STATUS_NAMES, "a status code"),
        status_message=text(status.get("message", ""), "a status message"),
        resource=resource,
        scope_name=scope_name,
        scope_version=scope_version,
        scope_attributes=scope_attributes,
        trace_state=text(span.get("traceState", ""), "a traceState string"),
        events=tuple(_event(obj(e, "an Event object")) for e in array(span.get("events"), "events to be an array")),
        links=tuple(_link(obj(link, "a Link object")) for link in array(span.get("links"), "links to be an array")),
        dropped_attributes_count=count(span.get("droppedAttributesCount"), "droppedAttributesCount"),
        dropped_events_count=count(span.get("droppedEventsCount"), "droppedEventsCount"),
        dropped_links_count=count(span.get("droppedLinksCount"), "droppedLinksCount"),
        origin=origin,
    )


# Fields the checked path decodes beyond the common ones; a span with any of them takes it.
_OTHER_FIELDS = frozenset(
    ("events", "links", "traceState", "droppedAttributesCount", "droppedEventsCount", "droppedLinksCount")
)


def _plain_span(
    span: Mapping[str, Any],
    resource: dict[str, Any],
    scope_name: str,
    scope_version: str,
    scope_attributes: dict[str, Any],
    origin: str,
) -> SpanRecord | None:
    """The common span (what an SDK or the Collector writes), decoded without the checked accessors.

    None when the span has anything unusual (events, links, enum names, base64 ids,
    numbers where strings belong, other fields): the checked path decodes those.
    This path alone is most of a full parse, so it trades generality for speed.
    """
    if type(span) is not dict or not _OTHER_FIELDS.isdisjoint(span):
        return None
    trace_id, span_id, parent = span.get("traceId"), span.get("spanId"), span.get("parentSpanId") or ""
    start, end, name = span.get("startTimeUnixNano", "0"), span.get("endTimeUnixNano", "0"), span.get("name", "")
    kind, status = span.get("kind", 0), span.get("status")
    if not (
        type(trace_id) is str
        and len(trace_id) == 32
        and type(span_id) is str
        and len(span_id) == 16
        and type(parent) is str
        and len(parent) in (0, 16)
        and type(name) is str
        and type(start) is str
        and start.isdecimal()
        and type(end) is str
        and end.isdecimal()
        and type(kind) is int
        and all_hex(trace_id + span_id + parent)
    ):
        return None
    code, message = 0, ""
    if status:
        if type(status) is not dict:
            return None
        code, message = status.get("code", 0), status.get("message", "")
        if type(code) is not int or type(message) is not str or len(status) > 2:
            return None
    return SpanRecord(
        trace_id=trace_id.lower(),
        span_id=span_id.lower(),
        parent_span_id=parent.lower() or None,
        name=name,
        kind=kind,
        start_ns=int(start),
        end_ns=int(end),
        attributes=key_values(span.get("attributes")),
        status_code=code,
        status_message=message,
        resource=resource,
        scope_name=scope_name,
        scope_version=scope_version,
        scope_attributes=scope_attributes,
        origin=origin,
    )


def _event(event: Mapping[str, Any]) -> SpanEventRecord:
    return SpanEventRecord(
        name=text(event.get("name", ""), "an event name"),
        time_ns=timestamp(event.get("timeUnixNano", 0), "an event's timeUnixNano"),
        attributes=key_values(event.get("attributes")),
        dropped_attributes_count=count(event.get("droppedAttributesCount"), "droppedAttributesCount"),
    )


def _link(link: Mapping[str, Any]) -> SpanLinkRecord:
    return SpanLinkRecord(
        trace_id=hex_id(link.get("traceId", ""), 16),
        span_id=hex_id(link.get("spanId", ""), 8),
        attributes=key_values(link.get("attributes")),
        trace_state=text(link.get("traceState", ""), "a traceState string"),
        dropped_attributes_count=count(link.get("droppedAttributesCount"), "droppedAttributesCount"),
    )


_HEX = frozenset("0123456789abcdefABCDEF")


def all_hex(digits: str) -> bool:
    """Whether ``digits``, of an even length, are all hex digits: ``_HEX.issuperset`` made in C."""
    try:
        # fromhex skips whitespace between bytes: a full count of bytes means there was none.
        return len(bytes.fromhex(digits)) * 2 == len(digits)
    except ValueError:
        return False


def hex_id(value: Any, size: int) -> str:
    """An id of ``size`` bytes as lowercase hex; the empty id stays empty.

    OTLP/JSON writes hex; Tempo and protobuf's own JSON mapping write base64.
    A 16-hex-digit trace id is a 64-bit Jaeger/Zipkin id: its high half is zero.
    """
    raw_text = text(value, "an id string")
    if not raw_text:
        return ""
    if _HEX.issuperset(raw_text):
        if len(raw_text) == size * 2:
            return raw_text.lower()
        if size == 16 and len(raw_text) == 16:
            return raw_text.lower().rjust(32, "0")
    try:
        decoded = base64.b64decode(raw_text, validate=True)
    except (binascii.Error, ValueError):
        decoded = b""
    if len(decoded) == size:
        return decoded.hex()
    raise MalformedTrace(f"id {raw_text!r:.60} is neither {size * 2} hex digits nor {size} bytes in base64")


def enum_value(value: Any, names: Mapping[str, int], what: str) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    return integer(value, what)

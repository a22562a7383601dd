"""OTLP/JSON lines decoded straight into typed structs: the full parse's fast path.

``orjson.loads`` builds a dict for every span, attribute and value, and the
checked reader (``_otlp_json``) then looks every field up again. Here msgspec
decodes a line directly into structs that describe OTLP/JSON, dispatching the
fields in C, and the structs become the same ``SpanRecord``s.

This path agrees with the checked one or stands aside. Every struct forbids
fields it does not declare and every field has one JSON type, so msgspec leaves
no value unchecked: what it accepts, orjson accepts too (valid UTF-8, numbers in
range) and reads as the same Python values. Integers are bounded to int64:
orjson reads those past 64 bits as floats, and msgspec's bounds stop at int64
(the rest of uint64 is rare enough to leave). The values then go through the
checked reader's helpers, or through inline tests that give what those helpers
give for the common shapes. A line it refuses (another format, a field out of
the ordinary, anything malformed) goes to ``orjson`` and the checked reader,
which read it as before and word any error.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from spanreplay.model.spans import SpanEventRecord, SpanLinkRecord, SpanRecord

from ._base import MalformedTrace, base64_bytes, number, timestamp
from ._otlp_json import KIND_NAMES, MAX_DEPTH, STATUS_NAMES, all_hex, enum_value, hex_id

Int = Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
# Numbers only: a count the checked reader's count() would take as it is.
Count = Annotated[int, Meta(ge=0, le=2**63 - 1)]


# gc=False: decoded structs cannot form reference cycles, and the collector's
# bookkeeping for a line's thousands of them is a tenth of the decoding time.
class _Typed(Struct, forbid_unknown_fields=True, gc=False):
    """A part of an OTLP/JSON document; an undeclared field refuses the line."""


class AnyValue(_Typed):
    stringValue: str | UnsetType = UNSET
    intValue: Int | str | UnsetType = UNSET
    boolValue: bool | UnsetType = UNSET
    doubleValue: Int | float | str | UnsetType = UNSET
    arrayValue: ArrayValue | UnsetType = UNSET
    kvlistValue: KeyValueList | UnsetType = UNSET
    bytesValue: str | UnsetType = UNSET


_EMPTY = AnyValue()


class KeyValue(_Typed):
    key: str = ""
    value: AnyValue = msgspec.field(default_factory=AnyValue)


class ArrayValue(_Typed):
    values: list[AnyValue] | None = None


class KeyValueList(_Typed):
    values: list[KeyValue] | None = None


class Status(_Typed):
    code: Int | str = 0
    message: str = ""


class Event(_Typed):
    timeUnixNano: Int | str = 0
    name: str = ""
    attributes: list[KeyValue] | None = None
    droppedAttributesCount: Count = 0


class Link(_Typed):
    traceId: str = ""
    spanId: str = ""
    traceState: str = ""
    attributes: list[KeyValue] | None = None
    droppedAttributesCount: Count = 0
    flags: Int = 0


class Span(_Typed):
    traceId: str = ""
    spanId: str = ""
    traceState: str = ""
    parentSpanId: str | None = None
    flags: Int = 0
    name: str = ""
    kind: Int | str = 0
    startTimeUnixNano: Int | str = 0
    endTimeUnixNano: Int | str = 0
    attributes: list[KeyValue] | None = None
    droppedAttributesCount: Count = 0
    events: list[Event] | None = None
    droppedEventsCount: Count = 0
    links: list[Link] | None = None
    droppedLinksCount: Count = 0
    status: Status | None = None


class Scope(_Typed):
    name: str = ""
    version: str = ""
    attributes: list[KeyValue] | None = None
    droppedAttributesCount: Int = 0


# UNSET (absent) and None (null) differ where the checked reader falls back to the
# older field name only when the newer one is absent.
class ScopeSpans(_Typed):
    scope: Scope | UnsetType | None = UNSET
    instrumentationLibrary: Scope | UnsetType | None = UNSET
    spans: list[Span] | None = None
    schemaUrl: str = ""


class Resource(_Typed):
    attributes: list[KeyValue] | None = None
    droppedAttributesCount: Int = 0


class ResourceSpans(_Typed):
    resource: Resource | None = None
    scopeSpans: list[ScopeSpans] | UnsetType | None = UNSET
    instrumentationLibrarySpans: list[ScopeSpans] | UnsetType | None = UNSET
    schemaUrl: str = ""


class TracesData(_Typed):
    resourceSpans: list[ResourceSpans] | UnsetType | None = UNSET
    batches: list[ResourceSpans] | UnsetType | None = UNSET


_decode = msgspec.json.Decoder(TracesData).decode


def line_spans(line: bytes, origin: str) -> list[SpanRecord] | None:
    """The spans of one OTLP/JSON line, or None when the checked reader must read it.

    For every line this accepts, the spans equal those of ``orjson.loads`` and
    ``_otlp_json.spans_from_document``.
    """
    try:
        return _spans(_decode(line), origin)
    # DecodeError: not this shape, or not JSON; RecursionError: nested past msgspec's
    # stack; MalformedTrace, and ValueError from int() of a string: a value the
    # checked reader rejects. Each time, the checked reader gives the answer.
    except (msgspec.DecodeError, RecursionError, MalformedTrace, ValueError):
        return None


def _spans(doc: TracesData, origin: str) -> list[SpanRecord]:
    # Which list is read, and what absent and null mean, as in spans_from_document.
    resource_spans_list = doc.resourceSpans if doc.resourceSpans is not UNSET else doc.batches
    if resource_spans_list is UNSET:
        raise MalformedTrace("not an OTLP document")  # another format: the checked reader tells which
    out: list[SpanRecord] = []
    for resource_spans in resource_spans_list or ():
        resource = _attributes(resource_spans.resource.attributes) if resource_spans.resource is not None else {}
        scopes = resource_spans.scopeSpans
        if scopes is UNSET:
            scopes = resource_spans.instrumentationLibrarySpans
        for scope_spans in scopes or ():
            scope = scope_spans.scope
            if scope is UNSET:
                scope = scope_spans.instrumentationLibrary
            if scope is None or scope is UNSET:
                scope = _NO_SCOPE
            scope_attributes = _attributes(scope.attributes)
            for span in scope_spans.spans or ():
                out.append(_span(span, resource, scope.name, scope.version, scope_attributes, origin))
    return out


_NO_SCOPE = Scope()


def _span(
    span: Span,
    resource: dict[str, Any],
    scope_name: str,
    scope_version: str,
    scope_attributes: dict[str, Any],
    origin: str,
) -> SpanRecord:
    trace_id, span_id, parent = span.traceId, span.spanId, span.parentSpanId or ""
    if len(trace_id) == 32 and len(span_id) == 16 and len(parent) in (0, 16) and all_hex(trace_id + span_id + parent):
        trace_id, span_id, parent = trace_id.lower(), span_id.lower(), parent.lower()
    else:  # base64, a 64-bit trace id, no id at all: as the checked reader reads them
        trace_id, span_id, parent = hex_id(trace_id, 16), hex_id(span_id, 8), hex_id(parent, 8)
    kind, status = span.kind, span.status
    if status is None:
        status_code, status_message = 0, ""
    else:
        code, status_message = status.code, status.message
        status_code = code if type(code) is int else enum_value(code, STATUS_NAMES, "a status code")
    # int() of an int is the int, and of a string what the checked reader's integer() makes.
    start_ns, end_ns = int(span.startTimeUnixNano), int(span.endTimeUnixNano)
    if start_ns < 0 or end_ns < 0:
        raise MalformedTrace("a negative time")  # the checked reader words it
    return SpanRecord(
        trace_id,
        span_id,
        span.name,
        parent or None,
        kind if type(kind) is int else enum_value(kind, KIND_NAMES, "a span kind"),
        start_ns,
        end_ns,
        _attributes(span.attributes),
        status_code,
        status_message,
        resource,
        scope_name,
        scope_version,
        scope_attributes,
        span.traceState,
        tuple(map(_event, span.events)) if span.events else (),
        tuple(map(_link, span.links)) if span.links else (),
        span.droppedAttributesCount,
        span.droppedEventsCount,
        span.droppedLinksCount,
        origin,
    )


def _event(event: Event) -> SpanEventRecord:
    return SpanEventRecord(
        name=event.name,
        time_ns=timestamp(event.timeUnixNano, "an event's timeUnixNano"),
        attributes=_attributes(event.attributes),
        dropped_attributes_count=event.droppedAttributesCount,
    )


def _link(link: Link) -> SpanLinkRecord:
    return SpanLinkRecord(
        trace_id=hex_id(link.traceId, 16),
        span_id=hex_id(link.spanId, 8),
        attributes=_attributes(link.attributes),
        trace_state=link.traceState,
        dropped_attributes_count=link.droppedAttributesCount,
    )


def _attributes(items: list[KeyValue] | None) -> dict[str, Any]:
    """What ``_otlp_json.key_values`` gives, with the two commonest values read inline."""
    out: dict[str, Any] = {}
    if items is None:
        return out
    for item in items:
        value = item.value
        if (text := value.stringValue) is not UNSET:
            out[item.key] = text
        elif (number_text := value.intValue) is not UNSET:
            out[item.key] = int(number_text)
        else:
            out[item.key] = _value(value, 0)
    return out


def _value(value: AnyValue, depth: int) -> Any:
    """What ``_otlp_json.any_value`` gives, down to its choice when several fields are set."""
    if depth >= MAX_DEPTH:
        if value == _EMPTY:
            return None
        raise MalformedTrace(f"attribute values nest deeper than {MAX_DEPTH} levels")
    if value.stringValue is not UNSET:
        return value.stringValue
    if value.intValue is not UNSET:
        return int(value.intValue)
    if value.boolValue is not UNSET:
        return value.boolValue
    if value.doubleValue is not UNSET:
        return number(value.doubleValue, "a doubleValue number")
    if value.arrayValue is not UNSET:
        return [_value(item, depth + 1) for item in value.arrayValue.values or ()]
    if value.kvlistValue is not UNSET:
        return {item.key: _value(item.value, depth + 1) for item in value.kvlistValue.values or ()}
    if value.bytesValue is not UNSET:
        return base64_bytes(value.bytesValue, "a bytesValue")
    return None

"""OpenTelemetry SDK spans as OTLP/JSON dicts: the reference encoder.

``span_dict`` builds the OTLP/JSON ``Span`` object as the opentelemetry-proto spec
writes it (hex ids, 64-bit integers as strings, enums as integers, lowerCamelCase
names). ``_otlp_json.LineEncoder`` writes the same bytes with less Python per span,
and ``_readable_lines`` writes a span holding text UTF-8 cannot hold through these
dicts; tests hold the encoders to the same bytes. ``attributes_of`` reads a span's
attributes in place (the ``attribute_dict`` accelerator).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import Link, SpanKind, StatusCode

from spanreplay._accelerators import register

__all__ = ["ATTRIBUTE_DICT", "KIND", "any_value", "attributes_of", "key_values", "raw_parts", "span_dict", "span_tail"]

# The SDK numbers SpanKind from 0 (INTERNAL); OTLP numbers it from 1 (0 is UNSPECIFIED).
KIND = {kind: kind.value + 1 for kind in SpanKind}
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


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
    """The span's attributes, read in place.

    ``ReadableSpan.attributes`` is a read-only proxy over a ``BoundedAttributes``
    whose lookups and iteration are Python methods; copying it or asking it for
    absent keys costs more than the rest of writing a boundary span. spanreplay's
    boundary spans hold a plain dict (``_boundary_spans``); the SDK's span keeps
    the attributes in one too (``_attributes._dict``), read here and only read.
    An SDK that stores them otherwise gets the public property;
    ``tests/exporters/test_file_exporter_encoding.py`` fails when the SDK's own spans stop
    taking the fast read, so a change shows in CI rather than as a slowdown.
    This is the ``attribute_dict`` accelerator: with it off, the public property.
    """
    if ATTRIBUTE_DICT.on:
        stored = getattr(span, "_attributes", None)
        if type(stored) is dict:  # a span built with a plain dict (spanreplay's boundary spans)
            return stored
        stored = getattr(stored, "_dict", None)
        if type(stored) is dict:
            return stored
    return span.attributes or _NO_ATTRIBUTES


def _check() -> str | None:
    """Why the SDK's spans no longer keep their attributes in ``_attributes._dict``, or None."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.version import __version__ as sdk_version

    provider = TracerProvider(shutdown_on_exit=False)
    try:
        span = provider.get_tracer("preflight").start_span("preflight", attributes={"a": "b"})
        span.set_attribute("c", 1)
        stored = getattr(getattr(span, "_attributes", None), "_dict", None)
        span.end()
    finally:
        provider.shutdown()
    if type(stored) is not dict or stored != {"a": "b", "c": 1}:
        return f"opentelemetry-sdk {sdk_version}'s spans no longer keep their attributes in _attributes._dict"
    return None


ATTRIBUTE_DICT: Final = register(
    "attribute_dict",
    reads="the OpenTelemetry SDK span's _attributes._dict (its BoundedAttributes' dict), read in place",
    replaced_by="the public ReadableSpan.attributes",
    check=_check,
)


_NO_ATTRIBUTES: Final[Mapping[str, Any]] = MappingProxyType({})


def raw_parts(span: ReadableSpan) -> tuple[Mapping[str, Any], Sequence[Event], Sequence[Link]]:
    """A span's attributes (see ``attributes_of``), events and links."""
    return attributes_of(span), span.events, span.links


def span_dict(span: ReadableSpan) -> dict[str, Any]:
    """The OTLP/JSON ``Span`` object for one SDK span (ended or still running)."""
    ctx = span.get_span_context()
    assert ctx is not None  # SDK spans always carry a context
    attributes, events, links = raw_parts(span)
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
    out["kind"] = KIND[span.kind]
    if span.start_time is not None:
        out["startTimeUnixNano"] = str(span.start_time)
    if span.end_time is not None:
        out["endTimeUnixNano"] = str(span.end_time)
    out["attributes"] = key_values(attributes)
    out.update(span_tail(span, events, links))
    return out


def span_tail(span: ReadableSpan, events: Sequence[Event], links: Sequence[Link]) -> dict[str, Any]:
    """The fields after the attributes: drop counts, events, links and the status."""
    out: dict[str, Any] = {}
    if span.dropped_attributes:
        out["droppedAttributesCount"] = span.dropped_attributes
    if events:
        out["events"] = [_event(e) for e in events]
    if span.dropped_events:
        out["droppedEventsCount"] = span.dropped_events
    if links:
        out["links"] = [_link(link) for link in links]
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


def _event(event: Event) -> dict[str, Any]:
    out: dict[str, Any] = {
        "timeUnixNano": str(event.timestamp),
        "name": event.name,
        "attributes": key_values(event.attributes),
    }
    if event.dropped_attributes:
        out["droppedAttributesCount"] = event.dropped_attributes
    return out


def _link(link: Link) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": format(link.context.trace_id, "032x"),
        "spanId": format(link.context.span_id, "016x"),
    }
    if link.context.trace_state:
        out["traceState"] = link.context.trace_state.to_header()
    out["attributes"] = key_values(link.attributes)
    if link.dropped_attributes:
        out["droppedAttributesCount"] = link.dropped_attributes
    return out


# The value of an attribute whose type is one of these, exactly, is the value's JSON
# text in a fixed wrapper (a 64-bit integer is written as a string).

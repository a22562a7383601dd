"""OTLP/JSON documents (``TracesData`` / ``ExportTraceServiceRequest``) -> SpanRecord.

Reads what the opentelemetry-proto spec writes (hex ids, int64 as strings,
integer enums) and the variants other producers emit: Tempo's base64 ids and
enum names, numbers where strings belong, ``instrumentationLibrarySpans``.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any

from .._spans import SpanEventRecord, SpanLinkRecord, SpanRecord

_KIND_NAMES = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS_NAMES = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


class MalformedTrace(Exception):
    """Raised inside readers; the source layer adds the file and line."""


def any_value(value: Any) -> Any:
    """Decode an OTLP/JSON AnyValue into a plain Python value."""
    if not isinstance(value, Mapping):
        raise MalformedTrace(f"an attribute value must be an AnyValue object, not {type(value).__name__}")
    if not value:
        return None
    if "stringValue" in value:
        return _str(value["stringValue"])
    if "intValue" in value:
        return _int(value["intValue"])
    if "boolValue" in value:
        raw = value["boolValue"]
        if not isinstance(raw, bool):
            raise MalformedTrace(f"boolValue must be true or false, not {raw!r}")
        return raw
    if "doubleValue" in value:
        return _float(value["doubleValue"])
    if "arrayValue" in value:
        return [any_value(v) for v in _list(_obj(value["arrayValue"]).get("values", []))]
    if "kvlistValue" in value:
        return key_values(_obj(value["kvlistValue"]).get("values", []))
    if "bytesValue" in value:
        return _bytes(value["bytesValue"])
    raise MalformedTrace(f"unknown AnyValue field(s) {sorted(value)}")


def key_values(items: Any) -> dict[str, Any]:
    """Decode a list of OTLP/JSON ``KeyValue`` objects into a dict."""
    out: dict[str, Any] = {}
    for item in _list(items):
        item = _obj(item)
        out[_str(item.get("key", ""))] = any_value(item.get("value", {}))
    return out


def spans_from_document(doc: Mapping[str, Any], origin: str) -> Iterator[SpanRecord]:
    """Every span in one OTLP/JSON traces document."""
    for resource_spans in _list(doc.get("resourceSpans", doc.get("batches", []))):
        resource_spans = _obj(resource_spans)
        resource = key_values(_obj(resource_spans.get("resource", {})).get("attributes", []))
        scopes = resource_spans.get("scopeSpans", resource_spans.get("instrumentationLibrarySpans", []))
        for scope_spans in _list(scopes):
            scope_spans = _obj(scope_spans)
            scope = _obj(scope_spans.get("scope", scope_spans.get("instrumentationLibrary", {})))
            scope_name = _str(scope.get("name", ""))
            scope_version = _str(scope.get("version", ""))
            for span in _list(scope_spans.get("spans", [])):
                yield _span(_obj(span), resource, scope_name, scope_version, origin)


def _span(span: Mapping[str, Any], resource: dict[str, Any], scope_name: str, scope_version: str, origin: str) -> SpanRecord:
    status = _obj(span.get("status", {}))
    parent = span.get("parentSpanId")
    return SpanRecord(
        trace_id=hex_id(span.get("traceId", ""), 16),
        span_id=hex_id(span.get("spanId", ""), 8),
        parent_span_id=hex_id(parent, 8) if parent else None,
        name=_str(span.get("name", "")),
        kind=_enum(span.get("kind", 0), _KIND_NAMES),
        start_ns=_int(span.get("startTimeUnixNano", 0)),
        end_ns=_int(span.get("endTimeUnixNano", 0)),
        attributes=key_values(span.get("attributes", [])),
        status_code=_enum(status.get("code", 0), _STATUS_NAMES),
        status_message=_str(status.get("message", "")),
        resource=resource,
        scope_name=scope_name,
        scope_version=scope_version,
        events=tuple(
            SpanEventRecord(
                name=_str(e.get("name", "")),
                time_ns=_int(e.get("timeUnixNano", 0)),
                attributes=key_values(e.get("attributes", [])),
            )
            for e in map(_obj, _list(span.get("events", [])))
        ),
        links=tuple(
            SpanLinkRecord(
                trace_id=hex_id(link.get("traceId", ""), 16),
                span_id=hex_id(link.get("spanId", ""), 8),
                attributes=key_values(link.get("attributes", [])),
            )
            for link in map(_obj, _list(span.get("links", [])))
        ),
        origin=origin,
    )


_HEX = frozenset("0123456789abcdefABCDEF")


def hex_id(value: Any, size: int) -> str:
    """An id as lowercase hex: OTLP/JSON writes hex, Tempo writes base64."""
    text = _str(value)
    if not text:
        return ""
    if len(text) == size * 2 and _HEX.issuperset(text):
        return text.lower()
    if len(text) == size and _HEX.issuperset(text) and size == 16:
        # Jaeger's 64-bit trace ids: the high half is zero.
        return text.lower().rjust(32, "0")
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == size:
        return raw.hex()
    raise MalformedTrace(f"id {text!r} is neither {size * 2} hex digits nor {size} base64-encoded bytes")


def _enum(value: Any, names: Mapping[str, int]) -> int:
    if isinstance(value, str) and value in names:
        return names[value]
    return _int(value)


def _obj(value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise MalformedTrace(f"expected a JSON object, found {type(value).__name__}")
    return value


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedTrace(f"expected a JSON array, found {type(value).__name__}")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise MalformedTrace(f"expected a string, found {value!r:.60}")
    return value


def _int(value: Any) -> int:
    if isinstance(value, bool):
        raise MalformedTrace(f"expected an integer, found {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise MalformedTrace(f"expected an integer, found {value!r:.60}")


def _float(value: Any) -> float:
    if isinstance(value, bool):
        raise MalformedTrace(f"expected a number, found {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise MalformedTrace(f"expected a number, found {value!r:.60}")


def _bytes(value: Any) -> bytes:
    try:
        return base64.b64decode(_str(value), validate=True)
    except (binascii.Error, ValueError):
        raise MalformedTrace(f"bytesValue {value!r:.60} is not base64") from None

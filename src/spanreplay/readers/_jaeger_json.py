"""Jaeger query-API / UI JSON (``{"data": [trace, ...]}`` or one trace) -> SpanRecord.

Jaeger turns OTLP into its own model: times in microseconds, typed tags, the
span kind and status as tags, the scope as ``otel.scope.*`` tags, arrays and
maps as JSON text. This reader undoes those steps so a trace read from Jaeger
gives the spans and attributes the same trace gives in OTLP/JSON.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any

from .._spans import SpanEventRecord, SpanLinkRecord, SpanRecord
from ._otlp_json import MalformedTrace, _int, _list, _obj, _str, hex_id

_KINDS = {"unspecified": 0, "internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_STATUS = {"OK": 1, "ERROR": 2}
# Tags Jaeger adds when it converts OTLP; they become span fields again here.
_SPAN_FIELD_TAGS = frozenset(
    {"span.kind", "otel.scope.name", "otel.scope.version", "otel.status_code", "otel.status_description", "w3c.tracestate"}
)


def is_jaeger_trace(doc: Mapping[str, Any]) -> bool:
    return isinstance(doc.get("spans"), list) and ("traceID" in doc or "processes" in doc)


def traces_of(doc: Mapping[str, Any]) -> list[Any]:
    """The trace objects in a document: the ``data`` envelope or one bare trace."""
    if "data" in doc:
        return _list(doc["data"])
    return [doc]


def spans_from_trace(trace: Mapping[str, Any], origin: str) -> Iterator[SpanRecord]:
    processes = {
        key: _process(_obj(value)) for key, value in _obj(trace.get("processes") or {}).items()
    }
    for span in map(_obj, _list(trace.get("spans", []))):
        yield _span(span, processes, origin)


def _process(process: Mapping[str, Any]) -> dict[str, Any]:
    resource = _tags(process.get("tags", []))
    if "serviceName" in process:
        resource["service.name"] = _str(process["serviceName"])
    return resource


def _span(span: Mapping[str, Any], processes: Mapping[str, dict[str, Any]], origin: str) -> SpanRecord:
    tags = _tags(span.get("tags", []))
    trace_id = hex_id(span.get("traceID", ""), 16)
    parent: str | None = None
    links: list[SpanLinkRecord] = []
    for ref in map(_obj, _list(span.get("references") or [])):
        ref_trace = hex_id(ref.get("traceID", ""), 16)
        ref_span = hex_id(ref.get("spanID", ""), 8)
        if ref.get("refType") == "CHILD_OF" and parent is None and ref_trace == trace_id:
            parent = ref_span
        else:
            links.append(SpanLinkRecord(trace_id=ref_trace, span_id=ref_span))
    if parent is None and span.get("parentSpanID"):
        parent = hex_id(span["parentSpanID"], 8)
    start_us = _int(span.get("startTime", 0))
    duration_us = _int(span.get("duration", 0))
    kind = _KINDS.get(str(tags.get("span.kind", "")).lower(), 0)
    status_code = _STATUS.get(str(tags.get("otel.status_code", "")), 0)
    if status_code == 0 and tags.get("error") is True:
        status_code = 2
    if status_code == 2 and tags.get("error") is True:
        del tags["error"]  # Jaeger adds error=true for an OTLP error status
    status_message = str(tags.get("otel.status_description", ""))
    scope_name = str(tags.get("otel.scope.name", ""))
    scope_version = str(tags.get("otel.scope.version", ""))
    for name in _SPAN_FIELD_TAGS:
        tags.pop(name, None)
    process_id = span.get("processID")
    resource = dict(processes.get(process_id, {})) if isinstance(process_id, str) else {}
    if not resource and isinstance(span.get("process"), Mapping):
        resource = _process(span["process"])
    return SpanRecord(
        trace_id=trace_id,
        span_id=hex_id(span.get("spanID", ""), 8),
        parent_span_id=parent,
        name=_str(span.get("operationName", "")),
        kind=kind,
        start_ns=start_us * 1000,
        end_ns=(start_us + duration_us) * 1000,
        attributes=tags,
        status_code=status_code,
        status_message=status_message,
        resource=resource,
        scope_name=scope_name,
        scope_version=scope_version,
        events=tuple(_log(log) for log in map(_obj, _list(span.get("logs") or []))),
        links=tuple(links),
        origin=origin,
    )


def _log(log: Mapping[str, Any]) -> SpanEventRecord:
    fields = _tags(log.get("fields", []))
    name = fields.pop("event", "")
    return SpanEventRecord(name=str(name), time_ns=_int(log.get("timestamp", 0)) * 1000, attributes=fields)


def _tags(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tag in map(_obj, _list(items)):
        out[_str(tag.get("key", ""))] = _tag_value(tag)
    return out


def _tag_value(tag: Mapping[str, Any]) -> Any:
    kind = str(tag.get("type", "string")).lower()
    value = tag.get("value")
    if kind == "string":
        return _str(value) if value is not None else ""
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise MalformedTrace(f"bool tag {tag.get('key')!r} holds {value!r:.60}")
    if kind == "int64":
        return _int(value)  # beyond 2^53 Jaeger writes a JSON string
    if kind == "float64":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return float(_str(value))
        except ValueError:
            raise MalformedTrace(f"float64 tag {tag.get('key')!r} holds {value!r:.60}") from None
    if kind == "binary":
        try:
            return base64.b64decode(_str(value), validate=True)
        except (binascii.Error, ValueError):
            raise MalformedTrace(f"binary tag {tag.get('key')!r} is not base64") from None
    raise MalformedTrace(f"tag {tag.get('key')!r} has unknown type {tag.get('type')!r}")

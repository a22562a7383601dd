"""Jaeger query-API / UI JSON (``{"data": [trace, ...]}`` or one trace) -> SpanRecord.

Jaeger turns OTLP into its own model: times in microseconds, typed tags, the
span kind and status as tags, the scope as ``otel.scope.*`` tags, arrays and
maps as JSON text, links as references. This reader undoes those steps the way
Jaeger's own Jaeger-to-OTLP translator does, so a trace read from Jaeger gives
the spans and attributes the same trace gives in OTLP/JSON.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from spanreplay import semconv as sc
from spanreplay.model.spans import SpanEventRecord, SpanLinkRecord, SpanRecord

from ._base import MalformedTrace, array, base64_bytes, integer, number, obj, text, timestamp

_KINDS = {"unspecified": 0, "internal": 1, "server": 2, "client": 3, "producer": 4, "consumer": 5}
_STATUS = {"OK": 1, "ERROR": 2}
# The OTLP link attribute Jaeger's translator writes for every reference it keeps as a link.
REF_TYPE = sc.OPENTRACING_REF_TYPE
_REF_TYPES = {"CHILD_OF": "child_of", "FOLLOWS_FROM": "follows_from"}
# Tags Jaeger adds when it converts OTLP; they become span fields again here.
_SPAN_FIELD_TAGS = (
    sc.JAEGER_SPAN_KIND,
    sc.OTEL_SCOPE_NAME,
    sc.OTEL_SCOPE_VERSION,
    sc.OTEL_LIBRARY_NAME,
    sc.OTEL_LIBRARY_VERSION,
    sc.OTEL_STATUS_CODE,
    sc.OTEL_STATUS_DESCRIPTION,
    sc.W3C_TRACESTATE,
)


def is_jaeger_trace(doc: Mapping[str, Any]) -> bool:
    return isinstance(doc.get("spans"), list) and ("traceID" in doc or "processes" in doc)


def traces_of(doc: Mapping[str, Any]) -> list[Any]:
    """The trace objects in a document: the ``data`` envelope or one bare trace."""
    if "data" in doc:
        return array(doc["data"], "data to be an array of traces")
    return [doc]


def spans_from_trace(trace: Any, origin: str) -> Iterator[SpanRecord]:
    trace = obj(trace, "a Jaeger trace object")
    processes = {
        str(key): _process(obj(value, "a Jaeger process object"))
        for key, value in obj(trace.get("processes") or {}, "processes to be an object").items()
    }
    for index, span in enumerate(array(trace.get("spans"), "spans to be an array")):
        try:
            yield _span(obj(span, "a Jaeger span object"), processes, origin)
        except MalformedTrace as exc:
            name = span.get("operationName") if isinstance(span, Mapping) else None
            called = f" {name!r:.60}" if isinstance(name, str) else ""
            raise MalformedTrace(f"span {index}{called}: {exc}") from None


def _process(process: Mapping[str, Any]) -> dict[str, Any]:
    resource = _tags(process.get("tags"))
    if "serviceName" in process:
        resource[sc.SERVICE_NAME] = text(process["serviceName"], "a serviceName string")
    return resource


def _span(span: Mapping[str, Any], processes: Mapping[str, dict[str, Any]], origin: str) -> SpanRecord:
    tags = _tags(span.get("tags"))
    trace_id = jaeger_id(span.get("traceID", ""), 16)
    parent: str | None = None
    links: list[SpanLinkRecord] = []
    for ref in array(span.get("references"), "references to be an array"):
        ref = obj(ref, "a reference object")
        ref_trace = jaeger_id(ref.get("traceID", ""), 16)
        ref_span = jaeger_id(ref.get("spanID", ""), 8)
        ref_type = text(ref.get("refType", "CHILD_OF"), "a refType string")
        # Jaeger's ParentSpanID(): the first CHILD_OF reference inside the same trace.
        if parent is None and ref_type == "CHILD_OF" and ref_trace == trace_id:
            parent = ref_span
            continue
        attributes = {REF_TYPE: _REF_TYPES[ref_type]} if ref_type in _REF_TYPES else {}
        links.append(SpanLinkRecord(trace_id=ref_trace, span_id=ref_span, attributes=attributes))
    if parent is None and span.get("parentSpanID"):
        parent = jaeger_id(span["parentSpanID"], 8)
    start_us = timestamp(span.get("startTime", 0), "startTime in microseconds")
    duration_us = integer(span.get("duration", 0), "duration in microseconds")
    # A span that never ended (a crashed run's root, pushed as it was) comes back from
    # Jaeger with the duration -startTime, so ending at 0; ending before that is not a time.
    if start_us + duration_us < 0:
        raise MalformedTrace(f"expected a duration in microseconds of -startTime or more, found {duration_us}")
    kind = _KINDS.get(str(tags.get(sc.JAEGER_SPAN_KIND, "")).lower(), 0)
    status_code, status_message = _status(tags)
    scope_name = str(tags.get(sc.OTEL_SCOPE_NAME, tags.get(sc.OTEL_LIBRARY_NAME, "")))
    scope_version = str(tags.get(sc.OTEL_SCOPE_VERSION, tags.get(sc.OTEL_LIBRARY_VERSION, "")))
    trace_state = str(tags.get(sc.W3C_TRACESTATE, ""))
    for name in _SPAN_FIELD_TAGS:
        tags.pop(name, None)
    process_id = span.get("processID")
    resource = dict(processes.get(process_id, {})) if isinstance(process_id, str) else {}
    if not resource and span.get("process") is not None:
        resource = _process(obj(span["process"], "a Jaeger process object"))
    return SpanRecord(
        trace_id=trace_id,
        span_id=jaeger_id(span.get("spanID", ""), 8),
        parent_span_id=parent,
        name=text(span.get("operationName", ""), "an operationName string"),
        kind=kind,
        start_ns=start_us * 1000,
        end_ns=(start_us + duration_us) * 1000,
        attributes=tags,
        status_code=status_code,
        status_message=status_message,
        resource=resource,
        scope_name=scope_name,
        scope_version=scope_version,
        trace_state=trace_state,
        events=tuple(_log(obj(log, "a log object")) for log in array(span.get("logs"), "logs to be an array")),
        links=tuple(links),
        origin=origin,
    )


def _status(tags: dict[str, Any]) -> tuple[int, str]:
    """The OTLP status from Jaeger's tags, removing the tags that carried it.

    As in Jaeger's translator: ``error=true`` is the last word on an error and is
    removed; otherwise ``otel.status_code`` decides.
    """
    code = _STATUS.get(str(tags.get(sc.OTEL_STATUS_CODE, "")).upper(), 0)
    if tags.get(sc.JAEGER_ERROR) is True:
        del tags[sc.JAEGER_ERROR]
        code = 2
    return code, str(tags.get(sc.OTEL_STATUS_DESCRIPTION, "")) if code else ""


def _log(log: Mapping[str, Any]) -> SpanEventRecord:
    fields = _tags(log.get("fields"))
    name = fields.pop("event", "") if isinstance(fields.get("event"), str) else ""
    return SpanEventRecord(
        name=name,
        time_ns=timestamp(log.get("timestamp", 0), "a log timestamp in microseconds") * 1000,
        attributes=fields,
    )


def _tags(items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tag in array(items, "tags to be an array"):
        tag = obj(tag, "a tag object")
        key = text(tag.get("key", ""), "a tag key")
        try:
            out[key] = _tag_value(tag)
        except MalformedTrace as exc:
            raise MalformedTrace(f"tag {key!r:.60}: {exc}") from None
    return out


def _tag_value(tag: Mapping[str, Any]) -> Any:
    kind = text(tag.get("type", "string"), "a tag type").lower()
    value = tag.get("value")
    if kind == "string":
        return "" if value is None else text(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise MalformedTrace(f"expected true or false, found {value!r:.60}")
    if kind == "int64":
        return integer(value)  # beyond 2^53 Jaeger writes a JSON string
    if kind == "float64":
        return number(value)
    if kind == "binary":
        return base64_bytes(value, "binary data")
    raise MalformedTrace(f"unknown tag type {kind!r:.40}; Jaeger's types are string, bool, int64, float64, binary")


_HEX = frozenset("0123456789abcdefABCDEF")


def jaeger_id(value: Any, size: int) -> str:
    """A Jaeger id as lowercase hex of ``size`` bytes, zero-padded as Jaeger pads it.

    Jaeger writes 64-bit trace ids as 16 hex digits and some producers drop
    leading zeros; Jaeger itself accepts any hex string up to the full width.
    """
    raw = text(value, "an id string")
    if not raw:
        return ""
    if len(raw) <= size * 2 and _HEX.issuperset(raw):
        return raw.lower().rjust(size * 2, "0")
    raise MalformedTrace(f"id {raw!r:.60} is not hex of at most {size * 2} digits")

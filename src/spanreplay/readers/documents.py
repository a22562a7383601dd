"""One parsed JSON document of any supported format, to ``SpanRecord``s.

A document's top-level keys tell its format: OTLP/JSON (``resourceSpans``, or
Tempo's older ``batches``), Jaeger's api/v3 (OTLP under ``result``), Tempo's
api/v2 (OTLP under ``trace``, refused when marked PARTIAL) and Jaeger JSON
(``data``, or one trace). A file, a record of a Collector export and a
backend's answer all come here once parsed, so each format is read one way.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from spanreplay.errors import TraceFormatError
from spanreplay.model.spans import SpanRecord

from . import _jaeger_json, _otlp_json
from ._base import Incomplete, MalformedTrace, NotATrace

_OTHER_SIGNALS = ("resourceLogs", "resourceMetrics", "resourceProfiles")
FORMATS = (
    "spanreplay reads OTLP/JSON (JSON lines or one document; plain, gzip or zstd), the Collector file "
    "exporter's proto and compressed files, Jaeger JSON and Tempo JSON"
)


def format_error(exc: MalformedTrace, name: str, lineno: int | None) -> TraceFormatError:
    where = f"{name}:{lineno}" if lineno is not None else name
    if isinstance(exc, Incomplete):
        return TraceFormatError(f"{where}: {exc}.", source=name, line=lineno)
    if isinstance(exc, NotATrace):
        return TraceFormatError(f"{where} is not a trace: {exc}; {FORMATS}.", source=name, line=lineno)
    return TraceFormatError(
        f"{where} is not a trace spanreplay can read ({exc}); export the trace again as OTLP/JSON or Jaeger JSON.",
        source=name,
        line=lineno,
    )


def document_spans(doc: Any, origin: str) -> Iterator[SpanRecord]:
    """The spans of one parsed JSON document of any supported format; MalformedTrace when it is none."""
    for item in classify(doc):
        yield from _dispatch(item, origin)


def classify(doc: Any) -> list[Mapping[str, Any]]:
    """The trace documents in a parsed JSON value; NotATrace when it is something else."""
    if isinstance(doc, list):
        # Some tools save a list of traces (Jaeger) or of OTLP documents.
        if not all(isinstance(item, Mapping) for item in doc):
            raise NotATrace("its top level is an array of something other than trace objects")
        items: list[Mapping[str, Any]] = doc
    elif isinstance(doc, Mapping):
        items = [doc]
    else:
        raise NotATrace(f"its top level is a JSON {type(doc).__name__}, not an object")
    for item in items:
        if _format_of(item) is None:
            keys = ", ".join(sorted(map(str, item))[:6]) or "none"
            raise NotATrace(
                f"its top-level keys are {keys:.200}, neither OTLP's resourceSpans nor Jaeger's data and spans"
            )
    return items


def _format_of(doc: Mapping[str, Any]) -> str | None:
    result, trace = doc.get("result"), doc.get("trace")
    if "resourceSpans" in doc or "batches" in doc:
        return "otlp"
    if isinstance(result, Mapping) and "resourceSpans" in result:
        return "otlp-result"  # Jaeger api/v3
    if isinstance(trace, Mapping) and ("resourceSpans" in trace or "batches" in trace):
        return "otlp-trace"  # Tempo api/v2
    if isinstance(doc.get("data"), list) or _jaeger_json.is_jaeger_trace(doc):
        return "jaeger"
    if any(key in doc for key in _OTHER_SIGNALS):
        return "other-signal"  # OTLP logs, metrics or profiles: valid, but no spans
    return None


def _dispatch(doc: Mapping[str, Any], origin: str) -> Iterator[SpanRecord]:
    kind = _format_of(doc)
    if kind == "otlp":
        yield from _otlp_json.spans_from_document(doc, origin)
    elif kind == "otlp-result":
        yield from _otlp_json.spans_from_document(doc["result"], origin)
    elif kind == "otlp-trace":
        _check_complete(doc)
        yield from _otlp_json.spans_from_document(doc["trace"], origin)
    elif kind == "jaeger":
        for jaeger_trace in _jaeger_json.traces_of(doc):
            yield from _jaeger_json.spans_from_trace(jaeger_trace, origin)


def _check_complete(doc: Mapping[str, Any]) -> None:
    """Tempo's api/v2 marks a trace it cut to its size limit as PARTIAL: never replay half a run."""
    status = doc.get("status")
    if status in ("PARTIAL", 1):
        said = doc.get("message")
        reason = f" ({said!s:.200})" if isinstance(said, str) and said else ""
        raise Incomplete(
            f"Tempo returned this trace with status PARTIAL{reason}: the trace is larger than Tempo's "
            "max_bytes_per_trace limit (default 5 MB), so spans were left out and the run cannot be replayed "
            "from it; raise max_bytes_per_trace in Tempo's overrides for the tenant and fetch the trace again, "
            "or read the run from the Collector's file export"
        )

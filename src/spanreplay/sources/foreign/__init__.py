"""Traces other instrumentations recorded, read as spanreplay runs.

A trace that holds no spanreplay run but model-call spans of OpenInference,
OpenLLMetry, the GenAI semantic conventions or the Anthropic SDK's own
telemetry is a run whose id is its trace id. Each of its model calls becomes a
``model`` event shaped as spanreplay's Anthropic instrumentation records one
(the request as input, the ``Message`` as the one HTTP attempt's body), so the
instrumentation replays it; each tool span becomes a ``tool`` event. One module
per instrumentation reads its spans (``_openinference``, ``_genai``).

What a span lacks for an exact replay is said up front, on each event
(``GAPS``), and ``spanreplay show`` prints it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay.errors import ReplayDivergenceError
from spanreplay.model.events import Event, EventLog, RunInfo, RunSummary
from spanreplay.model.payloads import encode_input, encode_output
from spanreplay.model.spans import STATUS_ERROR, SpanRecord

from . import _genai, _openinference, _stream
from ._calls import ForeignCall, content_gaps
from ._compare import comparable

__all__ = [
    "COMPARED",
    "GAPS",
    "INSTRUMENTATION",
    "as_recorded",
    "attempts",
    "foreign_log",
    "foreign_summaries",
    "is_foreign_span",
    "is_trace_id",
    "model_input",
    "read_span",
    "step_note",
]

# On each foreign event (in memory, never written): who recorded it, what of the
# request replay compares, and what it lacks for an exact replay.
INSTRUMENTATION: Final = sc.FOREIGN_INSTRUMENTATION
COMPARED: Final = sc.FOREIGN_COMPARED
GAPS: Final = sc.FOREIGN_GAPS
_TRACE_ID = re.compile(r"[0-9a-f]{32}")
# The span attributes a foreign step keeps: its models and token counts (what the HTML
# report prices), never its content, which the step's input and output hold.
_KEPT: Final = (
    sc.GEN_AI_USAGE_PREFIX,
    sc.GEN_AI_REQUEST_MODEL,
    sc.GEN_AI_RESPONSE_MODEL,
    sc.GEN_AI_OPERATION_NAME,
    sc.LLM_TOKEN_COUNT_PREFIX,
    sc.LLM_MODEL_NAME,
)


def is_trace_id(run_id: str) -> bool:
    return bool(_TRACE_ID.fullmatch(run_id))


def is_foreign_span(span: SpanRecord) -> bool:
    """A model-call or tool span of another instrumentation (spanreplay's own never are)."""
    attributes = span.attributes
    if sc.RUN_ID in attributes:
        return False
    kind = attributes.get(sc.OPENINFERENCE_SPAN_KIND)
    if kind is not None:
        return kind in ("LLM", "TOOL")
    return _genai.is_model_call(attributes) or _genai.is_tool_call(attributes)


def read_span(span: SpanRecord) -> ForeignCall | None:
    if not is_foreign_span(span):
        return None
    call = _openinference.read(span) if sc.OPENINFERENCE_SPAN_KIND in span.attributes else _genai.read(span)
    if call is not None:
        call.gaps.extend(content_gaps(call))
    return call


def model_input(body: Mapping[str, Any], compared: Iterable[str], endpoint: str = "messages") -> dict[str, Any]:
    """The input of a foreign model event: the compared part of the request."""
    return {"endpoint": endpoint, "body": comparable(body, compared)}


def as_recorded(log: EventLog | None, value: dict[str, Any]) -> dict[str, Any]:
    """A model call's input as the run being replayed recorded it: for a trace another
    instrumentation recorded, the part of the request it kept, in one form."""
    if log is None or not log.run.instrumentation:
        return value
    return model_input(value["body"], log.run.compared, value["endpoint"])


def attempts(event: Event, *, stream: bool) -> list[dict[str, Any]] | None:
    """The HTTP attempts to serve for a foreign model event; None for spanreplay's own events.

    A streaming call gets the recorded message as server-sent events.
    """
    if INSTRUMENTATION not in event.attributes or event.output_json is None:
        return None
    output = orjson.loads(event.output_json)
    found: list[dict[str, Any]] = output.get("attempts", []) if isinstance(output, dict) else []
    if not found:
        # Fail closed: the span kept no response (content capture off, or the call failed).
        raise ReplayDivergenceError(
            f"Replay of trace {event.run_id} reached model call {event.call_id} (seq {event.seq}), whose span "
            f"({event.attributes.get(INSTRUMENTATION)}) recorded no response, so it cannot be served; record "
            "with content capture on, or replay only up to this call.",
            run_id=event.run_id,
            seq=event.seq,
            call_id=event.call_id,
            recorded=f"{event.describe()} without a response",
            attempted=event.call_id,
        )
    if not stream:
        return found
    return [
        {
            "status": a["status"],
            "headers": {**a.get("headers", {}), "content-type": "text/event-stream"},
            "streamed": True,
            "events": _stream.events(a["body"]),
        }
        if "body" in a
        else a
        for a in found
    ]


def _trace_calls(spans: Iterable[SpanRecord]) -> dict[str, list[tuple[SpanRecord, ForeignCall]]]:
    by_trace: dict[str, list[tuple[SpanRecord, ForeignCall]]] = {}
    seen: set[tuple[str, str]] = set()
    for span in spans:
        if span.key in seen:
            continue  # an exporter retry
        call = read_span(span)
        if call is not None:
            seen.add(span.key)
            by_trace.setdefault(span.trace_id, []).append((span, call))
    for calls in by_trace.values():
        calls.sort(key=lambda pair: (pair[0].start_ns, pair[0].end_ns))
    return by_trace


def foreign_summaries(spans: Iterable[SpanRecord], exclude: Iterable[str] = ()) -> list[RunSummary]:
    """A run per trace that holds foreign model calls, minus the traces in ``exclude``."""
    skip = set(exclude)
    out = []
    for trace_id, calls in _trace_calls(spans).items():
        if trace_id in skip:
            continue
        first = calls[0][0]
        failed = any(span.status_code == STATUS_ERROR for span, _ in calls)
        out.append(
            RunSummary(
                run_id=trace_id,
                agent=_instrumentations(calls),
                status=sc.RUN_STATUS_ERROR if failed else sc.RUN_STATUS_OK,
                error=None,
                steps=sum(1 for _, call in calls if call.kind == sc.KIND_MODEL or call.has_output),
                trace_id=trace_id,
                start_ns=first.start_ns,
                end_ns=max(span.end_ns for span, _ in calls),
                service_name=str(first.resource.get(sc.SERVICE_NAME, "")),
            )
        )
    return out


def _instrumentations(calls: list[tuple[SpanRecord, ForeignCall]]) -> str:
    return "+".join(dict.fromkeys(call.instrumentation for _, call in calls))


def foreign_log(trace_id: str, spans: Iterable[SpanRecord]) -> EventLog | None:
    """The run of one foreign trace; None when the trace holds no foreign model or tool span."""
    spans = list(spans)
    calls = _trace_calls(s for s in spans if s.trace_id == trace_id).get(trace_id)
    if not calls:
        return None
    models = [call for _, call in calls if call.kind == sc.KIND_MODEL]
    # One set of compared fields for the run: the fields every model call recorded.
    compared = sorted(set.intersection(*(set(c.recorded) for c in models))) if models else []
    counters: dict[tuple[str, str], int] = {}
    events = []
    gaps: list[str] = []
    output_json: bytes | None
    for _, call in calls:
        gaps.extend(gap if gap.startswith("tool ") else f"{call.kind} {call.name}: {gap}" for gap in call.gaps)
    # A tool span without its result is no step: the tool runs for real on replay.
    first_span, last_end = calls[0][0], max(span.end_ns for span, _ in calls)
    steps = [(span, call) for span, call in calls if call.kind == sc.KIND_MODEL or call.has_output]
    for seq, (span, call) in enumerate(steps, start=1):
        n = counters.get((call.kind, call.name), 0)
        counters[(call.kind, call.name)] = n + 1
        attributes: dict[str, Any] = {
            **{k: v for k, v in span.attributes.items() if k.startswith(_KEPT)},
            INSTRUMENTATION: call.instrumentation,
            GAPS: tuple(call.gaps),
        }
        if call.kind == sc.KIND_MODEL:
            attributes[COMPARED] = tuple(compared)
            input_json = encode_input(model_input(call.request, compared))
            served = [] if call.message is None else [_attempt(call.message, call.request_id)]
            output_json = encode_output({"attempts": served})
        else:
            input_json = encode_input(call.tool_input)
            output_json = encode_output(call.tool_output) if call.has_output else None
            if call.tool_call_id:
                attributes[sc.GEN_AI_TOOL_CALL_ID] = call.tool_call_id
        events.append(
            Event(
                run_id=trace_id,
                seq=seq,
                call_id=f"{call.kind}:{call.name}#{n}",
                kind=call.kind,
                key=call.name,
                input_json=input_json,
                output_json=output_json,
                schema_version=sc.SCHEMA_VERSION,
                trace_id=trace_id,
                span_id=span.span_id,
                start_ns=span.start_ns,
                end_ns=span.end_ns,
                attributes=attributes,
            )
        )
    roots = [s for s in spans if s.trace_id == trace_id and not s.parent_span_id]
    root = roots[0] if roots else first_span
    failed = root.status_code == STATUS_ERROR
    info = RunInfo(
        run_id=trace_id,
        agent=_instrumentations(calls),
        status=sc.RUN_STATUS_ERROR if failed else sc.RUN_STATUS_OK,
        trace_id=trace_id,
        span_id=root.span_id,
        start_ns=min(root.start_ns, first_span.start_ns),
        end_ns=max(root.end_ns, last_end),
        service_name=str(root.resource.get(sc.SERVICE_NAME, "")),
        steps=len(events),
        instrumentation=_instrumentations(calls),
        compared=tuple(compared),
        gaps=tuple(dict.fromkeys(gaps)),
    )
    return EventLog(info, tuple(events))


def step_note(event: Event) -> str:
    """What replay does with one step of a foreign trace, for ``spanreplay show``."""
    gaps = event.attributes.get(GAPS) or ()
    said = f" ({'; '.join(gaps)})" if gaps else ""
    if event.kind == sc.KIND_MODEL:
        output = event.output
        if not (isinstance(output, dict) and output.get("attempts")):
            return f"model call: no recorded response, cannot replay{said}"
        return f"model call: replayable{said}"
    return f"tool {event.key}: replayable from its recorded result{said}"


def _attempt(message: dict[str, Any], request_id: str) -> dict[str, Any]:
    headers = {"content-type": "application/json"}
    if request_id:
        headers["request-id"] = request_id
    return {"status": 200, "headers": headers, "body": message}

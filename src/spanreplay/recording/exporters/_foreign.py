"""Spans of other instrumentations: their message content masked before spanreplay writes them.

spanreplay masks its own payloads before the span codec sees them. Spans that
other instrumentations start inside a run (the Anthropic SDK's own telemetry,
an OpenLLMetry or OpenInference instrumentor) reach spanreplay's processors
too, and with content capture switched on they carry the prompts, answers and
tool arguments unmasked. Each of spanreplay's processors (the trace file, OTLP,
Postgres) passes every span through ``guarded()`` first: a span whose
instrumentation scope is not spanreplay's has its content attributes masked by
the masker in force, and an attribute that cannot be masked is dropped. What
the application's own processors receive is theirs to mask.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import orjson
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.util.types import Attributes

from spanreplay import semconv as sc
from spanreplay.masking import Masker

from ..settings import masker
from ._otlp_dicts import attributes_of

__all__ = ["CONTENT_ATTRIBUTES", "CONTENT_PREFIXES", "guarded"]

logger = logging.getLogger("spanreplay")

# The attributes that hold what was sent to or came from a model or a tool, each with
# the payload part it is masked as: the GenAI conventions' opt-in content and the
# Anthropic SDK's own content attributes (ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content).
CONTENT_ATTRIBUTES: Final[Mapping[str, str]] = {
    sc.GEN_AI_INPUT_MESSAGES: "input",
    sc.GEN_AI_SYSTEM_INSTRUCTIONS: "input",
    sc.GEN_AI_OUTPUT_MESSAGES: "output",
    sc.GEN_AI_REQUEST_STOP_SEQUENCES: "input",
    sc.GEN_AI_TOOL_CALL_ARGUMENTS: "input",
    sc.GEN_AI_TOOL_CALL_RESULT: "output",
    sc.GEN_AI_TOOL_DEFINITIONS: "input",
    sc.ANTHROPIC_TOOL_RESULT_CONTENT: "output",
    # On exception events: the message and traceback may quote the request.
    sc.EXCEPTION_MESSAGE: "error",
    sc.EXCEPTION_STACKTRACE: "error",
}
# Older conventions (and OpenLLMetry) flatten content into numbered attributes:
# gen_ai.prompt.0.content, gen_ai.completion.0.content.
CONTENT_PREFIXES: Final = ((sc.GEN_AI_PROMPT_PREFIX, "input"), (sc.GEN_AI_COMPLETION_PREFIX, "output"))


def _part(name: str) -> str | None:
    part = CONTENT_ATTRIBUTES.get(name)
    if part is None and name.startswith(sc.GEN_AI_NAMESPACE):
        for prefix, prefix_part in CONTENT_PREFIXES:
            if name.startswith(prefix):
                return prefix_part
    return part


def _has_content(attributes: Mapping[str, Any] | None) -> bool:
    return bool(attributes) and any(_part(name) is not None for name in attributes or ())


def current_masker() -> Masker | None:
    """The masker in force."""
    return masker()


def guarded(span: ReadableSpan, masker: Callable[[], Masker | None] = current_masker) -> ReadableSpan:
    """``span`` itself, or, for a span of another instrumentation that carries content,
    a copy with that content masked (dropped where it cannot be masked).

    ``masker`` gives the masker in force; it is asked only for such a span. Masking
    switched off (``configure(masking=False)``) leaves the span as it is.
    """
    scope: InstrumentationScope | None = span.instrumentation_scope
    if scope is not None and scope.name == sc.INSTRUMENTATION_NAME:
        return span
    attributes = attributes_of(span)
    events = span.events
    if not _has_content(attributes) and not any(_has_content(event.attributes) for event in events):
        return span
    try:
        current = masker()
        if current is not None and not current.enabled:
            return span
        return _copy(span, attributes, events, current)
    except Exception:  # never written unmasked: without its content, then
        return _copy(span, attributes, events, None)


def _copy(
    span: ReadableSpan, attributes: Mapping[str, Any], events: Sequence[Event], current: Masker | None
) -> ReadableSpan:
    tool = attributes.get(sc.GEN_AI_TOOL_NAME)
    kind, key = (
        (sc.KIND_TOOL, str(tool))
        if tool is not None
        else (sc.KIND_MODEL, str(attributes.get(sc.GEN_AI_REQUEST_MODEL) or span.name))
    )
    new_attributes = _masked(current, kind, key, attributes)
    # Each event's attributes masked, or None for an event with no content.
    wanted = [
        _masked(current, kind, key, event.attributes or {}) if _has_content(event.attributes) else None
        for event in events
    ]
    new_events = [event if w is None else _event(event, w) for event, w in zip(events, wanted, strict=True)]
    if new_attributes == attributes and all(new is old for new, old in zip(new_events, events, strict=True)):
        return span  # nothing in it to mask: written as it was made
    # A copy of the SDK's own kind keeps everything else as it was (dropped counts,
    # links, limits): only the attributes and the events are replaced.
    masked = _replaced(span, new_attributes, new_events)
    if _reads_back(masked, new_attributes, wanted):
        return masked
    # The SDK no longer reads what was written in place (a release that renamed its
    # fields): the copy could still show the original content. Built through the
    # public constructors instead, losing only the dropped counts.
    logger.debug("spanreplay masks another instrumentation's span %r through ReadableSpan()", span.name)
    return _rebuilt(span, new_attributes, wanted)


def _replaced(span: ReadableSpan, new_attributes: dict[str, Any], new_events: list[Event]) -> ReadableSpan:
    masked = copy.copy(span)
    masked._attributes = _bounded(getattr(span, "_attributes", None), new_attributes)
    stored = getattr(span, "_events", None)
    if stored is not None and hasattr(stored, "dropped"):
        replaced = type(stored)(getattr(getattr(stored, "_dq", None), "maxlen", None))
        replaced.extend(new_events)
        replaced.dropped = stored.dropped
        masked._events = replaced
    else:
        masked._events = tuple(new_events)
    return masked


def _reads_back(span: ReadableSpan, attributes: dict[str, Any], wanted: list[dict[str, Any] | None]) -> bool:
    """Whether ``span``'s public properties give the masked attributes and event attributes."""
    if dict(span.attributes or {}) != attributes or len(span.events) != len(wanted):
        return False
    return all(w is None or dict(event.attributes or {}) == w for event, w in zip(span.events, wanted, strict=True))


def _rebuilt(span: ReadableSpan, attributes: dict[str, Any], wanted: list[dict[str, Any] | None]) -> ReadableSpan:
    """``span`` with masked content, built through the SDK's public constructors."""
    events = [
        event if w is None else Event(event.name, attributes=w, timestamp=event.timestamp)
        for event, w in zip(span.events, wanted, strict=True)
    ]
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=span.resource,
        attributes=attributes,
        events=events,
        links=span.links,
        kind=span.kind,
        status=span.status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _bounded(original: Any, attributes: dict[str, Any]) -> Any:
    """``attributes`` in the SDK's bounded mapping, keeping the count ``original`` dropped."""
    if original is None or not hasattr(original, "dropped"):
        return attributes
    replacement = type(original)(maxlen=None, attributes=attributes, immutable=True)
    replacement.dropped = original.dropped
    return replacement


def _event(event: Event, attributes: dict[str, Any]) -> Event:
    """``event`` itself when masking changed none of its attributes, else a copy with them."""
    if attributes == dict(event.attributes or {}):
        return event
    copied = copy.copy(event)
    copied._attributes = _bounded(getattr(event, "_attributes", None), attributes)
    return copied


def _masked(masker: Masker | None, kind: str, key: str, attributes: Attributes | Mapping[str, Any]) -> dict[str, Any]:
    """The attributes with their content masked; without a masker, without their content."""
    out: dict[str, Any] = {}
    for name, value in (attributes or {}).items():
        part = _part(name)
        if part is None:
            out[name] = value
            continue
        if masker is None:
            continue
        try:
            new = _masked_value(masker, kind, key, part, value)
        except Exception:  # what cannot be masked is not written at all
            continue
        if new is not None:
            out[name] = new
    return out


def _masked_value(masker: Masker, kind: str, key: str, part: str, value: Any) -> Any:
    if isinstance(value, str):
        try:
            content = orjson.loads(value)
        except orjson.JSONDecodeError:
            content = None
        if isinstance(content, (dict, list)):
            result = masker.mask(kind, key, content, part=part).value
            return value if result is content else orjson.dumps(result).decode()
        # Not JSON, or a bare JSON scalar: masked as the text it is.
        result = masker.mask(kind, key, value, part=part).value
        return result if isinstance(result, str) else orjson.dumps(result).decode()
    if isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray)):
        items = list(value)
        result = masker.mask(kind, key, items, part=part).value
        if result is items:
            return value
        if not isinstance(result, list):
            return None
        # An attribute array holds one type: an array of strings stays one.
        if all(isinstance(item, str) for item in items):
            return tuple(str(item) for item in result)
        return tuple(result) if len({type(item) for item in result}) <= 1 else tuple(str(item) for item in result)
    return value  # numbers and bools: the detectors read strings only

"""One foreign span read as a step: what was asked, what came back, what is missing."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

# Which project wrote a step (``spanreplay show`` and docs/foreign.md use these names).
OPENINFERENCE: Final = "openinference"
OPENLLMETRY: Final = "openllmetry"
ANTHROPIC_SDK: Final = "anthropic-sdk"
GENAI: Final = "genai"


@dataclass(slots=True)
class ForeignCall:
    """A model call or tool execution recorded by another instrumentation.

    ``request`` is the Messages API request body as far as the span recorded it,
    and ``recorded`` names its fields that replay compares (the others were not
    recorded, so they are not compared). ``message`` is the response as the API's
    ``Message`` JSON, or None when the span holds no output. ``gaps`` says, in
    words, what the span lacks for an exact replay.
    """

    instrumentation: str
    kind: str  # "model" or "tool"
    name: str  # the model, or the tool's name
    request: dict[str, Any] = field(default_factory=dict)
    recorded: tuple[str, ...] = ()
    message: dict[str, Any] | None = None
    tool_input: Any = None
    tool_output: Any = None
    has_output: bool = False
    tool_call_id: str = ""
    # The API's request id, where the span kept it: served as the response's request-id header.
    request_id: str = ""
    gaps: list[str] = field(default_factory=list)


def json_attribute(attributes: Mapping[str, Any], name: str) -> Any:
    """The JSON value of a text attribute; None when it is absent or not JSON."""
    value = attributes.get(name)
    if not isinstance(value, str):
        return value
    try:
        # orjson: an integer past 64 bits, which no payload encoder takes, comes back a float.
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return None


def tool_result_content(value: Any) -> Any:
    """A tool result's content as the agent sent it: text stays text, anything else becomes JSON text."""
    return value if isinstance(value, str) else json.dumps(value)


STOP_REASONS: Final = {
    "stop": "end_turn",
    "end_turn": "end_turn",
    "tool_call": "tool_use",
    "tool_calls": "tool_use",
    "tool_use": "tool_use",
    "length": "max_tokens",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "content_filter": "refusal",
    "refusal": "refusal",
}


@dataclass(frozen=True, slots=True)
class TokenCounts:
    """The token counts a foreign span recorded; None where it kept none."""

    input: int | None = None
    output: int | None = None
    cache_read: int | None = None
    cache_write: int | None = None


def message_json(
    *,
    content: list[dict[str, Any]],
    model: str,
    message_id: str,
    stop_reason: str | None,
    tokens: TokenCounts,
) -> dict[str, Any]:
    """A ``Message`` body as the API sends it, from the parts a foreign span holds."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
    return {
        "id": message_id or "msg_replayed",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": STOP_REASONS.get(stop_reason, stop_reason),
        "stop_sequence": None,
        "usage": {
            "input_tokens": tokens.input or 0,
            "output_tokens": tokens.output or 0,
            "cache_creation_input_tokens": tokens.cache_write or 0,
            "cache_read_input_tokens": tokens.cache_read or 0,
        },
    }


# What OpenInference writes in place of a value its TraceConfig hides (OPENINFERENCE_HIDE_*).
REDACTED: Final = "__REDACTED__"
_IMAGE_TYPES: Final = frozenset({"image", "document", "blob", "uri", "file"})


def content_gaps(call: ForeignCall) -> list[str]:
    """What the recorded content holds that replay cannot reproduce: redacted values, images."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if REDACTED in value:
                found.add(f"values redacted by the instrumentation ({REDACTED}): compared and served as recorded")
        elif isinstance(value, Mapping):
            kind = value.get("type")
            if isinstance(kind, str) and kind in _IMAGE_TYPES:
                found.add(f"{kind} blocks: the span did not keep their data, so they are not compared")
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(call.request)
    walk(call.message)
    walk(call.tool_output)
    return sorted(found)

"""GenAI semantic-convention attributes of a Messages call, from its JSON.

Everything here reads plain JSON (the request body, the response body or its
stream events), never SDK objects, so the same code serves every SDK path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from spanreplay import semconv as sc
from spanreplay.cost._prices import Usage, cost_usd

__all__ = ["capture_content", "finish_reason", "request_attributes", "response_attributes", "summarize_events"]

# Anthropic stop reasons -> the conventions' finish reasons (stop, length,
# content_filter, tool_call, error). Unknown reasons pass through unchanged.
FINISH_REASONS: Mapping[str, str] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_call",
    "refusal": "content_filter",
}

_ON = frozenset({"true", "1", "yes", "on", "span_only", "span_and_event"})


def capture_content() -> bool:
    """The conventions' opt-in switch for message content on spans."""
    return os.environ.get(sc.GEN_AI_CAPTURE_CONTENT_ENV, "").strip().lower() in _ON


def finish_reason(stop_reason: str) -> str:
    return FINISH_REASONS.get(stop_reason, stop_reason)


def request_attributes(
    body: Mapping[str, Any], host: str | None, port: int | None, *, count_tokens: bool
) -> dict[str, Any]:
    """The attributes known when the call starts."""
    attributes: dict[str, Any] = {
        sc.GEN_AI_OPERATION_NAME: sc.OPERATION_COUNT_TOKENS if count_tokens else sc.OPERATION_CHAT,
        sc.GEN_AI_PROVIDER_NAME: sc.PROVIDER_ANTHROPIC,
    }
    model = body.get("model")
    if isinstance(model, str):
        attributes[sc.GEN_AI_REQUEST_MODEL] = model
    for name, attribute in (
        ("max_tokens", sc.GEN_AI_REQUEST_MAX_TOKENS),
        ("top_k", sc.GEN_AI_REQUEST_TOP_K),
    ):
        value = body.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            attributes[attribute] = value
    for name, attribute in (("temperature", sc.GEN_AI_REQUEST_TEMPERATURE), ("top_p", sc.GEN_AI_REQUEST_TOP_P)):
        value = body.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            attributes[attribute] = float(value)
    stops = body.get("stop_sequences")
    if isinstance(stops, list) and all(isinstance(s, str) for s in stops):
        attributes[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = tuple(stops)
    if host:
        attributes[sc.SERVER_ADDRESS] = host
    if port:
        attributes[sc.SERVER_PORT] = port
    if capture_content():
        attributes[sc.GEN_AI_INPUT_MESSAGES] = _json(input_messages(body.get("messages")))
        system = body.get("system")
        if system:
            attributes[sc.GEN_AI_SYSTEM_INSTRUCTIONS] = _json(_parts(system))
    return attributes


def response_attributes(message: Mapping[str, Any], *, request_model: str | None) -> dict[str, Any]:
    """The attributes of a finished call, from its message JSON (or a stream's summary)."""
    attributes: dict[str, Any] = {}
    if isinstance(message.get("id"), str):
        attributes[sc.GEN_AI_RESPONSE_ID] = message["id"]
    model = message.get("model") if isinstance(message.get("model"), str) else request_model
    if isinstance(message.get("model"), str):
        attributes[sc.GEN_AI_RESPONSE_MODEL] = message["model"]
    stop = message.get("stop_reason")
    if isinstance(stop, str):
        attributes[sc.GEN_AI_RESPONSE_FINISH_REASONS] = (finish_reason(stop),)
    usage = message.get("usage")
    if isinstance(usage, Mapping):
        attributes.update(usage_attributes(usage, model))
    elif isinstance(message.get("input_tokens"), int):  # count_tokens answers {"input_tokens": n}
        attributes[sc.GEN_AI_USAGE_INPUT_TOKENS] = message["input_tokens"]
    if capture_content() and isinstance(message.get("content"), list):
        output = {"role": "assistant", "parts": _parts(message["content"])}
        if isinstance(stop, str):
            output["finish_reason"] = finish_reason(stop)
        attributes[sc.GEN_AI_OUTPUT_MESSAGES] = _json([output])
    return attributes


def usage_attributes(usage: Mapping[str, Any], model: str | None) -> dict[str, Any]:
    def count(name: str) -> int:
        value = usage.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    read = count("cache_read_input_tokens")
    written = count("cache_creation_input_tokens")
    attributes: dict[str, Any] = {
        # The conventions count every input token, cached or not; Anthropic's
        # input_tokens leaves out the cached ones.
        sc.GEN_AI_USAGE_INPUT_TOKENS: count("input_tokens") + read + written,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: count("output_tokens"),
        sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: read,
        sc.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: written,
        sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: written,
    }
    tokens = Usage.from_api(usage)
    # What the conventions have no name for but the price depends on: 1-hour cache
    # writes cost more than 5-minute ones, and batch usage costs half.
    if tokens.cache_write_1h:
        attributes[sc.ANTHROPIC_USAGE_CACHE_WRITE_1H_INPUT_TOKENS] = tokens.cache_write_1h
    tier = usage.get("service_tier")
    if isinstance(tier, str):
        attributes[sc.ANTHROPIC_USAGE_SERVICE_TIER] = tier
    if model:
        cost = cost_usd(model, tokens)
        if cost is not None:
            attributes[sc.GEN_AI_USAGE_COST] = round(cost, 10)
    return attributes


def summarize_events(events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The message a stream's events add up to, as JSON (ids, usage, stop reason, content)."""
    message: dict[str, Any] = {}
    blocks: list[dict[str, Any]] = []
    partial_json: dict[int, str] = {}
    for event in events:
        data = event.get("data")
        if not isinstance(data, Mapping):
            continue
        kind = data.get("type")
        if kind == "message_start" and isinstance(data.get("message"), Mapping):
            message = dict(data["message"])
            message["usage"] = dict(message.get("usage") or {})
        elif kind == "content_block_start" and isinstance(data.get("content_block"), Mapping):
            blocks.append(dict(data["content_block"]))
        elif kind == "content_block_delta" and blocks and isinstance(data.get("delta"), Mapping):
            _add_block_delta(blocks, partial_json, data)
        elif kind == "message_delta":
            delta = data.get("delta")
            if isinstance(delta, Mapping):
                message.update({k: v for k, v in delta.items() if k in ("stop_reason", "stop_sequence")})
            usage = data.get("usage")
            if isinstance(usage, Mapping):
                message.setdefault("usage", {}).update({k: v for k, v in usage.items() if v is not None})
    for key, raw in partial_json.items():
        try:
            blocks[key]["input"] = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            blocks[key]["input"] = raw
    message["content"] = blocks
    return message


def _add_block_delta(blocks: list[dict[str, Any]], partial_json: dict[int, str], data: Mapping[str, Any]) -> None:
    """Add a ``content_block_delta`` event's text, thinking or partial tool input to its block."""
    delta = data["delta"]
    index = data.get("index")
    block = blocks[index] if isinstance(index, int) and 0 <= index < len(blocks) else blocks[-1]
    if delta.get("type") == "text_delta":
        block["text"] = str(block.get("text", "")) + str(delta.get("text", ""))
    elif delta.get("type") == "thinking_delta":
        block["thinking"] = str(block.get("thinking", "")) + str(delta.get("thinking", ""))
    elif delta.get("type") == "input_json_delta":
        key = blocks.index(block)
        partial_json[key] = partial_json.get(key, "") + str(delta.get("partial_json", ""))


# --- message content in the conventions' schema ------------------------------------------


def input_messages(messages: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for msg in messages if isinstance(messages, list) else []:
        if isinstance(msg, Mapping):
            out.append({"role": str(msg.get("role", "user")), "parts": _parts(msg.get("content"))})
    return out


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        elif kind in ("tool_use", "server_tool_use"):
            parts.append(
                {"type": "tool_call", "id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
            )
        elif kind == "tool_result":
            parts.append(
                {"type": "tool_call_response", "id": block.get("tool_use_id"), "response": block.get("content")}
            )
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": block.get("thinking", "")})
        else:
            parts.append({"type": str(kind)})
    return parts


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()

"""GenAI semantic-convention spans: OpenLLMetry, the Anthropic SDK's own, any other.

The current conventions put the conversation in JSON attributes:
``gen_ai.system_instructions``, ``gen_ai.input.messages`` and
``gen_ai.output.messages`` (messages of typed parts) and
``gen_ai.tool.definitions``. Older instrumentations flatten it instead:
``gen_ai.prompt.N.role``/``content`` and ``gen_ai.completion.N.*``. Both are
read back into a Messages API request and ``Message``; the conventions keep no
thinking signatures, cache_control marks or message ids of tool results'
formatting, so those are listed as gaps, never compared.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay.model.spans import SpanRecord

from ._calls import (
    ANTHROPIC_SDK,
    GENAI,
    OPENLLMETRY,
    ForeignCall,
    TokenCounts,
    json_attribute,
    message_json,
    tool_result_content,
)

_MODEL_OPERATIONS: Final = frozenset({sc.OPERATION_CHAT, sc.OPERATION_TEXT_COMPLETION, sc.OPERATION_GENERATE_CONTENT})
_FLATTENED: Final = {"prompt": sc.GEN_AI_PROMPT_PREFIX, "completion": sc.GEN_AI_COMPLETION_PREFIX}
_FIRST_PROMPT_ROLE: Final = f"{sc.GEN_AI_PROMPT_PREFIX}0.role"
_FIRST_COMPLETION_ROLE: Final = f"{sc.GEN_AI_COMPLETION_PREFIX}0.role"
_FIRST_COMPLETION_CONTENT: Final = f"{sc.GEN_AI_COMPLETION_PREFIX}0.content"
_FIRST_FINISH_REASON: Final = f"{sc.GEN_AI_COMPLETION_PREFIX}0.finish_reason"
_INDEXED = re.compile(r"^(\d+)\.(.+)$")
_SCOPES: Final = {"opentelemetry.instrumentation.anthropic": OPENLLMETRY}
# The SDK's tracer scope; a platform client's has the platform after it.
_ANTHROPIC_SCOPE: Final = "com.anthropic.sdk"


def instrumentation(span: SpanRecord) -> str:
    if span.scope_name.startswith(_ANTHROPIC_SCOPE):
        return ANTHROPIC_SDK
    return _SCOPES.get(span.scope_name, GENAI)


def is_model_call(attributes: Mapping[str, Any]) -> bool:
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    if isinstance(operation, str):
        return operation in _MODEL_OPERATIONS
    return sc.GEN_AI_INPUT_MESSAGES in attributes or _FIRST_PROMPT_ROLE in attributes


def is_tool_call(attributes: Mapping[str, Any]) -> bool:
    return attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OPERATION_EXECUTE_TOOL


def read(span: SpanRecord) -> ForeignCall | None:
    attributes = span.attributes
    if is_tool_call(attributes):
        return _tool_call(span)
    if not is_model_call(attributes):
        return None
    model = str(attributes.get(sc.GEN_AI_REQUEST_MODEL) or attributes.get(sc.GEN_AI_RESPONSE_MODEL) or "unknown")
    call = ForeignCall(instrumentation(span), "model", model)
    body: dict[str, Any] = {"model": model}
    if isinstance(attributes.get(sc.GEN_AI_REQUEST_MAX_TOKENS), int):
        body["max_tokens"] = attributes[sc.GEN_AI_REQUEST_MAX_TOKENS]
    system = json_attribute(attributes, sc.GEN_AI_SYSTEM_INSTRUCTIONS)
    if isinstance(system, list):
        body["system"] = [_block(part) for part in system if isinstance(part, dict)]
    inputs = json_attribute(attributes, sc.GEN_AI_INPUT_MESSAGES)
    if isinstance(inputs, list):
        body["messages"] = _messages(inputs)
    elif _FIRST_PROMPT_ROLE in attributes:
        body["messages"], old_system = _flattened(attributes, "prompt")
        if old_system is not None:
            body["system"] = old_system
    else:
        call.gaps.append("no recorded request messages (content capture was off): the request is not compared")
    tools = json_attribute(attributes, sc.GEN_AI_TOOL_DEFINITIONS)
    if isinstance(tools, list):
        body["tools"] = tools
    elif call.instrumentation == ANTHROPIC_SDK:
        call.gaps.append("no tool definitions (the SDK's spans leave them out): tools are not compared")
    call.request = body
    call.recorded = tuple(sorted(body))
    call.message = _message(attributes, model, call.gaps)
    request_id = attributes.get(sc.ANTHROPIC_REQUEST_ID)
    call.request_id = request_id if isinstance(request_id, str) else ""
    if attributes.get(sc.ANTHROPIC_CONTENT_TRUNCATED) is True:
        call.gaps.append(f"content truncated by the instrumentation ({sc.ANTHROPIC_CONTENT_TRUNCATED})")
    return call


def _tool_call(span: SpanRecord) -> ForeignCall:
    attributes = span.attributes
    name = attributes.get(sc.GEN_AI_TOOL_NAME) or span.name.removeprefix(f"{sc.OPERATION_EXECUTE_TOOL} ")
    call = ForeignCall(instrumentation(span), "tool", str(name))
    call.tool_call_id = str(attributes.get(sc.GEN_AI_TOOL_CALL_ID) or "")
    call.tool_input = json_attribute(attributes, sc.GEN_AI_TOOL_CALL_ARGUMENTS)
    call.has_output = sc.GEN_AI_TOOL_CALL_RESULT in attributes
    if call.has_output:
        result = json_attribute(attributes, sc.GEN_AI_TOOL_CALL_RESULT)
        call.tool_output = attributes[sc.GEN_AI_TOOL_CALL_RESULT] if result is None else result
    else:
        call.gaps.append(f"tool {call.name}: no recorded result, will run live")
    return call


def _block(part: Mapping[str, Any]) -> dict[str, Any]:
    """One GenAI message part as an Anthropic content block."""
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": str(part.get("content", ""))}
    if kind == "tool_call":
        arguments = part.get("arguments")
        if isinstance(arguments, str):
            with contextlib.suppress(orjson.JSONDecodeError):
                arguments = orjson.loads(arguments)
        return {
            "type": "tool_use",
            "id": str(part.get("id", "")),
            "name": str(part.get("name", "")),
            "input": arguments,
        }
    if kind == "tool_call_response":
        response = part.get("response", part.get("result", ""))
        # The SDK's spans keep a result's content blocks as they were sent; others keep its text.
        blocks = isinstance(response, list) and all(isinstance(b, dict) and "type" in b for b in response)
        return {
            "type": "tool_result",
            "tool_use_id": str(part.get("id", "")),
            "content": response if blocks else tool_result_content(response),
        }
    if kind == "reasoning":
        return {"type": "thinking", "thinking": str(part.get("content", "")), "signature": ""}
    return {"type": str(kind or "unknown"), **{k: v for k, v in part.items() if k != "type"}}


def _messages(messages: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", "user"))
        blocks = [_block(part) for part in _list(message.get("parts")) if isinstance(part, dict)]
        if role == "system":
            continue
        out.append({"role": "user" if role == "tool" else role, "content": blocks})
    return out


def _flattened(attributes: Mapping[str, Any], which: str) -> tuple[list[dict[str, Any]], Any]:
    found: dict[int, dict[str, Any]] = {}
    prefix = _FLATTENED[which]
    for name, value in attributes.items():
        match = _INDEXED.match(name[len(prefix) :]) if name.startswith(prefix) else None
        if match:
            found.setdefault(int(match.group(1)), {})[match.group(2)] = value
    messages: list[dict[str, Any]] = []
    system: Any = None
    for index in sorted(found):
        flat = found[index]
        role = str(flat.get("role", "user"))
        content = json_attribute(flat, "content")
        if isinstance(content, list):
            # Content blocks (some write text parts with "content" for "text"); anything else is no block.
            content = [
                _block(b) if "content" in b and b.get("type") == "text" else b for b in content if isinstance(b, dict)
            ]
        else:
            raw = flat.get("content")
            content = raw if isinstance(raw, str) else "" if raw is None else json.dumps(raw)
        if role == "system":
            system = content
            continue
        calls = _flat_tool_calls(flat)
        if calls:
            text = [{"type": "text", "text": content}] if isinstance(content, str) and content else []
            content = [*(text if isinstance(content, str) else content), *calls]
        messages.append({"role": role, "content": content})
    return messages, system


def _flat_tool_calls(flat: Mapping[str, Any]) -> list[dict[str, Any]]:
    """``tool_calls.N.id``/``name``/``arguments`` of one flattened message, as tool_use blocks."""
    found: dict[int, dict[str, Any]] = {}
    for name, value in flat.items():
        match = re.match(r"^tool_calls\.(\d+)\.(id|name|arguments)$", name)
        if match:
            found.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [_block({"type": "tool_call", **found[i]}) for i in sorted(found)]


def _message(attributes: Mapping[str, Any], model: str, gaps: list[str]) -> dict[str, Any] | None:
    content: list[dict[str, Any]] | None = None
    finish: Any = None
    outputs = json_attribute(attributes, sc.GEN_AI_OUTPUT_MESSAGES)
    if isinstance(outputs, list) and outputs and isinstance(outputs[0], dict):
        content = [_block(part) for part in _list(outputs[0].get("parts")) if isinstance(part, dict)]
        finish = outputs[0].get("finish_reason")
    elif _FIRST_COMPLETION_ROLE in attributes or _FIRST_COMPLETION_CONTENT in attributes:
        messages, _ = _flattened(attributes, "completion")
        first = messages[0]["content"] if messages else ""
        content = [{"type": "text", "text": first}] if isinstance(first, str) else list(first)
        finish = attributes.get(_FIRST_FINISH_REASON)
    if content is None:
        gaps.append("no recorded response (content capture was off, or the call failed)")
        return None
    if any(block.get("type") == "thinking" for block in content):
        gaps.append("thinking blocks have no signature (the conventions drop it)")
    reasons = attributes.get(sc.GEN_AI_RESPONSE_FINISH_REASONS)
    if isinstance(attributes.get(sc.ANTHROPIC_MESSAGE_STOP_REASON), str):
        finish = attributes[sc.ANTHROPIC_MESSAGE_STOP_REASON]  # the API's own word, where the SDK wrote it
    elif finish is None and isinstance(reasons, (list, tuple)) and reasons:
        finish = reasons[0]
    response_id = attributes.get(sc.GEN_AI_RESPONSE_ID)
    return message_json(
        content=content,
        model=str(attributes.get(sc.GEN_AI_RESPONSE_MODEL) or model),
        message_id=str(response_id) if isinstance(response_id, str) else "",
        stop_reason=str(finish) if isinstance(finish, str) else None,
        tokens=TokenCounts(
            input=_int(attributes.get(sc.GEN_AI_USAGE_INPUT_TOKENS)),
            output=_int(attributes.get(sc.GEN_AI_USAGE_OUTPUT_TOKENS)),
            cache_read=_int(attributes.get(sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS)),
            cache_write=_int(
                attributes.get(
                    sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
                    attributes.get(sc.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS),
                )
            ),
        ),
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

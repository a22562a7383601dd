"""OpenInference spans (Arize Phoenix): ``openinference.span.kind`` LLM and TOOL.

The Anthropic instrumentor writes the whole request body as JSON in
``input.value`` and the whole ``Message`` in ``output.value``: with both, the
step replays exactly. Without them (another OpenInference instrumentor, or a
backend that dropped the long values) the flattened ``llm.input_messages.*``,
``llm.output_messages.*``, ``llm.tools.*`` and ``llm.invocation_parameters``
are read instead, and what they cannot say is listed as a gap.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from spanreplay import semconv as sc
from spanreplay.model.spans import SpanRecord

from ._calls import (
    OPENINFERENCE,
    ForeignCall,
    TokenCounts,
    json_attribute,
    message_json,
    tool_result_content,
)

SPAN_KIND: Final = sc.OPENINFERENCE_SPAN_KIND
_MESSAGES: Final = {"input_messages": sc.LLM_INPUT_MESSAGES, "output_messages": sc.LLM_OUTPUT_MESSAGES}
_INDEXED = re.compile(r"^\.(\d+)\.(.+)$")
_TOOL = re.compile(rf"^{re.escape(sc.LLM_TOOLS)}\.(\d+)\.{re.escape(sc.LLM_TOOL_JSON_SCHEMA)}$")


def read(span: SpanRecord) -> ForeignCall | None:
    kind = span.attributes.get(SPAN_KIND)
    if kind == "LLM":
        return _model_call(span.attributes)
    if kind == "TOOL":
        return _tool_call(span)
    return None


def _tool_call(span: SpanRecord) -> ForeignCall:
    attributes = span.attributes
    name = attributes.get(sc.TOOL_NAME)
    call = ForeignCall(OPENINFERENCE, "tool", str(name or span.name))
    call.tool_input = json_attribute(attributes, sc.INPUT_VALUE)
    call.has_output = sc.OUTPUT_VALUE in attributes
    call.tool_output = json_attribute(attributes, sc.OUTPUT_VALUE) if call.has_output else None
    if call.has_output and call.tool_output is None:
        call.tool_output = attributes.get(sc.OUTPUT_VALUE)
    if not call.has_output:
        call.gaps.append(f"tool {call.name}: no recorded result, will run live")
    return call


def _model_call(attributes: Mapping[str, Any]) -> ForeignCall:
    model = str(attributes.get(sc.LLM_MODEL_NAME) or attributes.get(sc.LLM_REQUEST_MODEL_NAME) or "unknown")
    call = ForeignCall(OPENINFERENCE, "model", model)
    body = (
        json_attribute(attributes, sc.INPUT_VALUE) if attributes.get(sc.INPUT_MIME_TYPE) == "application/json" else None
    )
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        call.request = body
        call.recorded = tuple(sorted(body))
    else:
        call.request, call.recorded = _flattened_request(attributes, model)
        call.gaps.append("request rebuilt from llm.input_messages (no input.value): content blocks may differ")
    output = (
        json_attribute(attributes, sc.OUTPUT_VALUE)
        if attributes.get(sc.OUTPUT_MIME_TYPE) == "application/json"
        else None
    )
    if isinstance(output, dict) and output.get("type") == "message" and isinstance(output.get("content"), list):
        call.message = output
    else:
        call.message = _flattened_message(attributes, model)
        if call.message is None:
            call.gaps.append("no recorded response (neither output.value nor llm.output_messages)")
        else:
            call.gaps.append("response rebuilt from llm.output_messages (no output.value): its id is made up")
    return call


def _indexed(attributes: Mapping[str, Any], which: str) -> list[dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    prefix = _MESSAGES[which]
    for name, value in attributes.items():
        match = _INDEXED.match(name[len(prefix) :]) if name.startswith(prefix) else None
        if match:
            found.setdefault(int(match.group(1)), {})[match.group(2)] = value
    return [found[i] for i in sorted(found)]


def _blocks(flat: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A flattened message's content blocks: ``message.contents.N.*``, else ``message.content`` and tool calls."""
    contents: dict[int, dict[str, Any]] = {}
    for name, value in flat.items():
        match = re.match(r"^message\.contents\.(\d+)\.(.+)$", name)
        if match:
            contents.setdefault(int(match.group(1)), {})[match.group(2)] = value
    blocks: list[dict[str, Any]] = []
    if contents:
        for index in sorted(contents):
            part = contents[index]
            kind = part.get("message_content.type")
            if kind == "text":
                blocks.append({"type": "text", "text": str(part.get("message_content.text", ""))})
            elif kind == "tool_use":
                blocks.append(_tool_use(part, "tool_call."))
            elif kind == "image":
                blocks.append(
                    {
                        "type": "image",
                        "source": {"type": "url", "url": str(part.get("message_content.image.image.url", ""))},
                    }
                )
        return blocks
    text = flat.get("message.content")
    if isinstance(text, str) and text:
        blocks.append({"type": "text", "text": text})
    calls: dict[int, dict[str, Any]] = {}
    for name, value in flat.items():
        match = re.match(r"^message\.tool_calls\.(\d+)\.(.+)$", name)
        if match:
            calls.setdefault(int(match.group(1)), {})[match.group(2)] = value
    blocks.extend(_tool_use(calls[i], "tool_call.") for i in sorted(calls))
    return blocks


def _tool_use(part: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    arguments = json_attribute(part, prefix + "function.arguments")
    return {
        "type": "tool_use",
        "id": str(part.get(prefix + "id", "")),
        "name": str(part.get(prefix + "function.name", "")),
        "input": arguments if isinstance(arguments, dict) else {},
    }


def _flattened_request(attributes: Mapping[str, Any], model: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    body: dict[str, Any] = {"model": model}
    parameters = json_attribute(attributes, sc.LLM_INVOCATION_PARAMETERS)
    if isinstance(parameters, dict):
        body.update(parameters)
    messages: list[dict[str, Any]] = []
    for flat in _indexed(attributes, "input_messages"):
        role = flat.get("message.role")
        if role == "system":
            body["system"] = str(flat.get("message.content", ""))
        elif role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": str(flat.get("message.tool_call_id", "")),
                "content": tool_result_content(flat.get("message.content", "")),
            }
            if messages and messages[-1]["role"] == "user" and isinstance(messages[-1]["content"], list):
                messages[-1]["content"].append(block)
            else:
                messages.append({"role": "user", "content": [block]})
        else:
            messages.append({"role": str(role or "user"), "content": _blocks(flat)})
    body["messages"] = messages
    tools = {int(m.group(1)): json_attribute(attributes, name) for name in attributes if (m := _TOOL.match(name))}
    if tools:
        body["tools"] = [tools[i] for i in sorted(tools)]
    return body, tuple(sorted(body))


def _flattened_message(attributes: Mapping[str, Any], model: str) -> dict[str, Any] | None:
    outputs = _indexed(attributes, "output_messages")
    if not outputs:
        return None
    finish = attributes.get(sc.LLM_FINISH_REASON)
    return message_json(
        content=_blocks(outputs[0]),
        model=str(attributes.get(sc.LLM_RESPONSE_MODEL_NAME) or model),
        message_id="",
        stop_reason=finish if isinstance(finish, str) else None,
        tokens=TokenCounts(
            input=_int(attributes.get(sc.LLM_TOKEN_COUNT_PROMPT)),
            output=_int(attributes.get(sc.LLM_TOKEN_COUNT_COMPLETION)),
            cache_read=_int(attributes.get(sc.LLM_TOKEN_COUNT_CACHE_READ)),
            cache_write=_int(attributes.get(sc.LLM_TOKEN_COUNT_CACHE_WRITE)),
        ),
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

"""A model call's override (a Message) as the HTTP exchange its recording holds.

``replay(..., overrides={5: {"content": [...]}})`` on a model call: the value is
the response as the Messages API returns it (a dict) or an SDK ``Message``. It
is served the way a recorded response is: one attempt with status 200 and that
body, or, when the call streamed, the server-sent events that stream it, so the
SDK builds the objects (``Message``, the stream's events and text) itself.

Fields left out get what an API response would hold: an id, ``type``,
``role``, the call's model, a ``stop_reason`` (``tool_use`` when a block is a
tool use, else ``end_turn``) and zero usage. A plain string is a reply of one
text block. A dict with ``attempts`` is taken as the recorded exchange itself.
"""

from __future__ import annotations

import itertools
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay.errors import ConfigurationError
from spanreplay.replaying.overrides import register_output_form

__all__ = ["model_output", "stream_events"]

_ids = itertools.count(1)
_JSON: Final = {"content-type": "application/json", "request-id": "req_override"}
_SSE: Final = {"content-type": "text/event-stream; charset=utf-8", "request-id": "req_override"}


def model_output(value: Any, request: Any, model: str, where: str) -> Any:
    """The recorded output (``{"attempts": [...]}``) that serves ``value`` to the SDK."""
    if isinstance(value, dict) and "attempts" in value:
        return value
    endpoint = request.get("endpoint") if isinstance(request, dict) else None
    body = request.get("body") if isinstance(request, dict) else None
    if endpoint == "count_tokens":
        count = {"input_tokens": value} if isinstance(value, int) else _as_dict(value, where)
        return {"attempts": [{"status": 200, "headers": dict(_JSON), "body": count}]}
    message = _message(value, model, where)
    if isinstance(body, dict) and body.get("stream") is True:
        attempt = {"status": 200, "headers": dict(_SSE), "streamed": True, "events": stream_events(message)}
        attempt["end"] = "read"
        return {"attempts": [attempt]}
    return {"attempts": [{"status": 200, "headers": dict(_JSON), "body": message}]}


def _as_dict(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump(mode="json", by_alias=True, exclude_unset=True)
        if isinstance(dumped, dict):
            return dumped
    raise ConfigurationError(
        f"{where.capitalize()} is a {type(value).__qualname__}; a model call's override is the response as the "
        "Messages API returns it: a dict ({'content': [{'type': 'text', 'text': '...'}]}), an anthropic Message, "
        "a string (one text block), or an exception instance to raise."
    )


def _message(value: Any, model: str, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        value = {"content": [{"type": "text", "text": value}]}
    message = dict(_as_dict(value, where))
    content = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(
        isinstance(b, dict) and isinstance(b.get("type"), str) for b in content
    ):
        raise ConfigurationError(
            f"{where.capitalize()} has no usable content: a Message's content is a list of blocks such as "
            "{'type': 'text', 'text': '...'} or {'type': 'tool_use', 'id': 'toolu_1', 'name': 'search', "
            "'input': {...}}."
        )
    uses_tool = any(block["type"] == "tool_use" for block in content)
    message["content"] = content
    message.setdefault("id", f"msg_override_{next(_ids):08d}")
    message.setdefault("type", "message")
    message.setdefault("role", "assistant")
    message.setdefault("model", model)
    message.setdefault("stop_reason", "tool_use" if uses_tool else "end_turn")
    message.setdefault("stop_sequence", None)
    message.setdefault("usage", {"input_tokens": 0, "output_tokens": 0})
    return message


def stream_events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The server-sent events (as a recording holds them) that stream ``message``."""
    found = message.get("usage")
    usage: dict[str, Any] = found if isinstance(found, dict) else {}
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
    events: list[dict[str, Any]] = [{"event": "message_start", "data": {"type": "message_start", "message": start}}]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        deltas: list[dict[str, Any]] = []
        if kind == "text":
            opening: dict[str, Any] = {**block, "text": ""}
            deltas.append({"type": "text_delta", "text": str(block.get("text", ""))})
        elif kind in ("tool_use", "server_tool_use"):
            opening = {**block, "input": {}}
            deltas.append({"type": "input_json_delta", "partial_json": orjson.dumps(block.get("input", {})).decode()})
        elif kind == "thinking":
            opening = {**block, "thinking": "", "signature": ""}
            deltas.append({"type": "thinking_delta", "thinking": str(block.get("thinking", ""))})
            deltas.append({"type": "signature_delta", "signature": str(block.get("signature", ""))})
        else:  # a block the stream sends whole (redacted thinking, a tool result of a server tool)
            opening = dict(block)
        events.append(
            {
                "event": "content_block_start",
                "data": {"type": "content_block_start", "index": index, "content_block": opening},
            }
        )
        for delta in deltas:
            events.append(
                {
                    "event": "content_block_delta",
                    "data": {"type": "content_block_delta", "index": index, "delta": delta},
                }
            )
        events.append({"event": "content_block_stop", "data": {"type": "content_block_stop", "index": index}})
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    final_usage = {"output_tokens": usage.get("output_tokens", 0)}
    events.append({"event": "message_delta", "data": {"type": "message_delta", "delta": delta, "usage": final_usage}})
    events.append({"event": "message_stop", "data": {"type": "message_stop"}})
    return events


register_output_form(sc.KIND_MODEL, model_output)

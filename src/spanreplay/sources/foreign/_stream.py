"""A recorded ``Message`` served as the server-sent events of a streaming call.

A foreign span holds the final message, not the events that streamed it. A
streaming call on replay gets events built from the message, in the order the
API sends them (start, each block's start, deltas and stop, the message delta,
stop), so the SDK's stream helpers accumulate the same final message.
"""

from __future__ import annotations

import json
from typing import Any, Final

_CHUNK: Final = 64


def events(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The events, in the form ``_exchange`` serves them (``{"event": name, "data": ...}``)."""
    usage = dict(message.get("usage") or {})
    start = {
        **message,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {**usage, "output_tokens": 0},
    }
    out: list[dict[str, Any]] = [_event("message_start", {"message": start})]
    for index, block in enumerate(message.get("content") or []):
        kind = block.get("type")
        if kind == "text":
            out.append(_event("content_block_start", {"index": index, "content_block": {**block, "text": ""}}))
            text = str(block.get("text", ""))
            out.extend(
                _event(
                    "content_block_delta",
                    {"index": index, "delta": {"type": "text_delta", "text": text[i : i + _CHUNK]}},
                )
                for i in range(0, len(text), _CHUNK)
            )
        elif kind in ("tool_use", "server_tool_use"):
            out.append(_event("content_block_start", {"index": index, "content_block": {**block, "input": {}}}))
            raw = json.dumps(block.get("input") or {})
            out.append(
                _event(
                    "content_block_delta", {"index": index, "delta": {"type": "input_json_delta", "partial_json": raw}}
                )
            )
        elif kind == "thinking":
            out.append(
                _event(
                    "content_block_start", {"index": index, "content_block": {**block, "thinking": "", "signature": ""}}
                )
            )
            thinking = {"type": "thinking_delta", "thinking": str(block.get("thinking", ""))}
            out.append(_event("content_block_delta", {"index": index, "delta": thinking}))
            signature = {"type": "signature_delta", "signature": str(block.get("signature", ""))}
            out.append(_event("content_block_delta", {"index": index, "delta": signature}))
        else:
            out.append(_event("content_block_start", {"index": index, "content_block": block}))
        out.append(_event("content_block_stop", {"index": index}))
    delta = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    out.append(_event("message_delta", {"delta": delta, "usage": {"output_tokens": usage.get("output_tokens", 0)}}))
    out.append(_event("message_stop", {}))
    return out


def _event(name: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"event": name, "data": {"type": name, **data}}

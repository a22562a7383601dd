"""What replay compares of a foreign model call: the request as far as the span recorded it.

Another instrumentation records the request in its own shape (GenAI message
parts, OpenInference's flattened messages), so neither side is compared as
sent: both are brought to one form first. Text is text whether it came as a
string or as text blocks; a tool result's JSON text is compared as the value it
holds; cache_control marks, thinking signatures and ``stream`` (replay answers
either way) are left out, as are the fields the span did not record.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import orjson

# Never compared: how the answer is delivered, and marks the conventions do not keep.
_NOT_COMPARED: Final = frozenset({"stream", "metadata", "extra_headers"})
_DROPPED_KEYS: Final = frozenset({"cache_control", "signature", "citations"})
# Anthropic's media blocks and the GenAI conventions' media parts.
_MEDIA: Final = frozenset({"image", "document", "blob", "uri", "file"})


def comparable(body: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """The part of a Messages request body that is compared, in one form whoever wrote it."""
    out: dict[str, Any] = {}
    for name in fields:
        if name in _NOT_COMPARED or name not in body:
            continue
        value = body[name]
        if name == "system":
            out[name] = _text(value)
        elif name == "messages" and isinstance(value, list):
            out[name] = [_message(m) for m in value if isinstance(m, Mapping)]
        elif name == "tools" and isinstance(value, list):
            out[name] = [_plain(t) for t in value]
        else:
            out[name] = _plain(value)
    return out


def _text(value: Any) -> Any:
    """A string, or text blocks, as one string; anything else as it is."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, Mapping) and b.get("type") == "text" for b in value):
        return "".join(str(b.get("text", b.get("content", ""))) for b in value)
    return _plain(value)


def _message(message: Mapping[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    merged: list[Any] = []
    for block in blocks if isinstance(blocks, list) else []:
        item = _block(block) if isinstance(block, Mapping) else _plain(block)
        # Adjacent text blocks are one text to the model; instrumentations split and join them differently.
        if merged and isinstance(item, dict) and item.get("type") == "text" and merged[-1].get("type") == "text":
            merged[-1] = {"type": "text", "text": merged[-1]["text"] + item["text"]}
        else:
            merged.append(item)
    return {"role": str(message.get("role", "")), "content": merged}


def _block(block: Mapping[str, Any]) -> dict[str, Any]:
    kind = block.get("type")
    if kind == "text":
        return {"type": "text", "text": str(block.get("text", ""))}
    if kind == "tool_use":
        return {
            "type": "tool_use",
            "id": block.get("id"),
            "name": block.get("name"),
            "input": _plain(block.get("input")),
        }
    if kind == "tool_result":
        out = {"type": "tool_result", "tool_use_id": block.get("tool_use_id"), "content": _result(block.get("content"))}
        if block.get("is_error"):
            out["is_error"] = True
        return out
    if isinstance(kind, str) and kind in _MEDIA:
        # Spans keep no image or document data (or keep it as a URL, a GenAI blob part...):
        # that a block of media stood here is all that is compared.
        return {"type": "media"}
    return {k: _plain(v) for k, v in block.items() if k not in _DROPPED_KEYS}


def _result(content: Any) -> Any:
    """A tool result's content: text blocks joined, JSON text read as its value."""
    text = _text(content)
    if isinstance(text, str):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    return text


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items() if k not in _DROPPED_KEYS}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value

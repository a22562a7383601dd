"""Which ``tool_use`` block of the model's last response a tool execution answers.

A recorded model call leaves its response's ``tool_use`` blocks here, per
run; a ``@spanreplay.tool`` call recorded next that matches one (same name,
same input) takes its id, and its span carries it as ``gen_ai.tool.call.id``.
Jaeger and Phoenix then show which tool_use each execution answered. Each id
is taken once, and a newer response replaces the blocks of the one before.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from typing import Any

import orjson

from spanreplay import semconv as sc

_pending: weakref.WeakKeyDictionary[object, list[tuple[str, bytes, str]]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _canonical(value: Any) -> bytes | None:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None  # not JSON (a tool's own objects): no tool_use block holds it


def note_response(run: object, content: Any) -> None:
    """The ``tool_use`` blocks of a model response ``run`` just recorded (its ``content`` JSON)."""
    blocks: list[tuple[str, bytes, str]] = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, Mapping) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
            encoded = _canonical(block.get("input") or {})
            if encoded is not None:
                blocks.append((str(block.get("name")), encoded, block["id"]))
    with _lock:
        _pending[run] = blocks


def answered(run: object, name: str, input: Any) -> dict[str, Any] | None:
    """The span attributes that link a tool call to the ``tool_use`` it answers, or None."""
    with _lock:
        pending = _pending.get(run)
    if not pending:
        return None
    encoded = _canonical(input)
    with _lock:
        for index, (block_name, block_input, block_id) in enumerate(pending):
            if block_name == name and block_input == encoded:
                del pending[index]
                return {sc.GEN_AI_TOOL_CALL_ID: block_id}
    return None

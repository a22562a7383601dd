"""A stand-in for the Anthropic Messages API on 127.0.0.1, for running the example offline.

It plays a small, rule-based support model: asked about an order, it calls the
``lookup_order`` and ``shipping_policy`` tools in one turn (two parallel
``tool_use`` blocks); given their results, it answers in text. It speaks the
API's wire format (JSON, or server-sent events with ``event:`` lines), so the
real ``anthropic`` SDK talks to it unchanged.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_ids = itertools.count(1)


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The support model: tool calls for a new question, a summary once the results are in."""
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
    results = [b for b in blocks if b.get("type") == "tool_result"]
    n = next(_ids)
    if results:
        facts = [json.loads(r["content"]) if isinstance(r.get("content"), str) else r.get("content") for r in results]
        order = next((f for f in facts if isinstance(f, dict) and "status" in f), {})
        policy = next((f for f in facts if isinstance(f, dict) and "policy" in f), {})
        text = (
            f"Order {order.get('order_id', '?')} is {order.get('status', 'unknown')} "
            f"(carrier {order.get('carrier', 'n/a')}). {policy.get('policy', '')}"
        ).strip()
        content_out: list[dict[str, Any]] = [{"type": "text", "text": text}]
        stop = "end_turn"
    else:
        question = " ".join(b.get("text", "") for b in blocks if b.get("type") == "text")
        match = re.search(r"\b([A-Z]-\d+)\b", question)
        order_id = match.group(1) if match else "A-17"
        content_out = [
            {"type": "text", "text": "Let me check that order and our shipping policy."},
            {"type": "tool_use", "id": f"toolu_{n:04d}a", "name": "lookup_order", "input": {"order_id": order_id}},
            {"type": "tool_use", "id": f"toolu_{n:04d}b", "name": "shipping_policy", "input": {"country": "FR"}},
        ]
        stop = "tool_use"
    return {
        "id": f"msg_local_{n:06d}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-sonnet-4-6"),
        "content": content_out,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 40 + 10 * n,
            "output_tokens": 30,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    out: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    for i, block in enumerate(message["content"]):
        empty = {"type": "text", "text": ""} if block["type"] == "text" else {**block, "input": {}}
        out.append(("content_block_start", {"type": "content_block_start", "index": i, "content_block": empty}))
        if block["type"] == "text":
            for word in re.findall(r"\S+\s*", block["text"]):
                delta = {"type": "text_delta", "text": word}
                out.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        else:
            delta = {"type": "input_json_delta", "partial_json": _compact(block["input"])}
            out.append(("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}))
        out.append(("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    usage = {"output_tokens": message["usage"]["output_tokens"]}
    out.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    out.append(("message_stop", {"type": "message_stop"}))
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        request_id = f"req_local_{next(_ids):06d}"
        if self.path.startswith("/v1/messages/count_tokens"):
            self._json({"input_tokens": len(_compact(body.get("messages", []))) // 4}, request_id)
            return
        message = answer(body)
        if not body.get("stream"):
            self._json(message, request_id)
            return
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("request-id", request_id)
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for name, data in events(message):
            self.wfile.write(f"event: {name}\ndata: {_compact(data)}\n\n".encode())
            self.wfile.flush()

    def _json(self, value: Any, request_id: str) -> None:
        data = _compact(value).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", request_id)
        self.end_headers()
        self.wfile.write(data)


def start() -> tuple[str, ThreadingHTTPServer]:
    """Start the server on a free port; returns its base URL and the server (``shutdown()`` stops it)."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}", httpd

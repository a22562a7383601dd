"""A real HTTP server on 127.0.0.1 that speaks the Anthropic Messages API.

The SDK talks to it over a socket exactly as it talks to the real API:
JSON bodies, server-sent events with ``event:`` lines, ``request-id`` headers,
error bodies with the API's error types, and token counting. Tests script what
it answers, one reply per request, in order::

    with MessagesAPIServer() as server:
        server.script(overloaded(), reply(text("Hi")))
        client = anthropic.Anthropic(base_url=server.url, api_key="test-key")

Without a script it answers each message request with a text reply that echoes
the last user text, so most tests need no script at all. ``server.requests``
keeps every request it received (path, headers, JSON body).

``MessagesAPIServer(default=support_model)`` answers as a small rule-based
support model instead: the one ``spanreplay demo`` and examples/support_agent
talk to when ANTHROPIC_API_KEY is unset.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

# The model name replies carry when a request or a builder names none.
MODEL = "claude-sonnet-4-6"

__all__ = [
    "MODEL",
    "MessagesAPIServer",
    "Received",
    "Reply",
    "api_error",
    "drop_connection",
    "echo",
    "message",
    "reply",
    "stall",
    "stream_events",
    "support_model",
    "text",
    "tool_use",
]


# --- message builders ----------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    """A Messages API text content block."""
    return {"type": "text", "text": value}


def tool_use(name: str, input: dict[str, Any], id: str) -> dict[str, Any]:
    """A Messages API tool_use content block: the model asks for tool ``name`` with ``input``."""
    return {"type": "tool_use", "id": id, "name": name, "input": input}


_ids = itertools.count(1)


def message(
    *content: dict[str, Any],
    stop_reason: str | None = None,
    model: str = MODEL,
    id: str | None = None,
    input_tokens: int = 25,
    output_tokens: int = 12,
    cache_read: int = 0,
    cache_write: int = 0,
) -> dict[str, Any]:
    """A Message body as the API returns it."""
    if stop_reason is None:
        stop_reason = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {
        "id": id or f"msg_{next(_ids):024d}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": list(content),
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cache_write,
            "cache_read_input_tokens": cache_read,
        },
    }


def stream_events(msg: dict[str, Any], *, chunk: int = 4) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events that stream ``msg``: start, blocks in deltas, delta, stop."""
    start = {**msg, "content": [], "stop_reason": None, "usage": {**msg["usage"], "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
    events.append(("ping", {"type": "ping"}))
    for index, block in enumerate(msg["content"]):
        if block["type"] == "text":
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": text("")})
            )
            value = block["text"]
            for i in range(0, len(value), chunk):
                delta = {"type": "text_delta", "text": value[i : i + chunk]}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        elif block["type"] == "tool_use":
            empty = {**block, "input": {}}
            events.append(
                ("content_block_start", {"type": "content_block_start", "index": index, "content_block": empty})
            )
            raw = json.dumps(block["input"])
            for i in range(0, len(raw), chunk * 3):
                delta = {"type": "input_json_delta", "partial_json": raw[i : i + chunk * 3]}
                events.append(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        else:
            raise ValueError(f"stream_events cannot stream a {block['type']!r} block")
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    usage = {"output_tokens": msg["usage"]["output_tokens"]}
    delta = {"stop_reason": msg["stop_reason"], "stop_sequence": None}
    events.append(("message_delta", {"type": "message_delta", "delta": delta, "usage": usage}))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


# --- replies ---------------------------------------------------------------------------


@dataclass
class Reply:
    """One scripted answer. Build them with ``reply``, ``api_error``, ``drop_connection``, ``stall``."""

    status: int = 200
    body: dict[str, Any] | None = None
    # For stream requests: the events to send instead of ``body`` (None: derived from body).
    events: list[tuple[str, dict[str, Any]]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    # Close the socket after sending this many events (a connection cut mid-stream).
    cut_after: int | None = None
    drop: bool = False
    delay: float = 0.0
    # Seconds to wait between events of a stream.
    event_gap: float = 0.0


def reply(*content: dict[str, Any], events: list[tuple[str, dict[str, Any]]] | None = None, **kwargs: Any) -> Reply:
    """A 200 answer with a message of ``content`` (streamed when the request asks for a stream)."""
    headers = kwargs.pop("headers", {})
    cut_after = kwargs.pop("cut_after", None)
    event_gap = kwargs.pop("event_gap", 0.0)
    return Reply(
        body=message(*content, **kwargs), events=events, headers=headers, cut_after=cut_after, event_gap=event_gap
    )


_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def api_error(status: int, message: str | None = None, *, headers: dict[str, str] | None = None) -> Reply:
    """An error answer with the API's error body (``{"type": "error", "error": {...}}``)."""
    kind = _ERROR_TYPES.get(status, "api_error")
    body = {"type": "error", "error": {"type": kind, "message": message or kind.replace("_", " ").capitalize()}}
    return Reply(status=status, body=body, headers=dict(headers or {}))


def drop_connection() -> Reply:
    """Close the connection without answering (the SDK sees a connection error)."""
    return Reply(drop=True)


def stall(seconds: float) -> Reply:
    """Answer only after ``seconds`` (longer than the client's timeout: a timeout)."""
    return Reply(body=message(text("late")), delay=seconds)


# --- the server ------------------------------------------------------------------------


def _compact(value: Any) -> str:
    # The API sends compact JSON; so does this server (a test can still send other bytes).
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _last_user_text(body: dict[str, Any]) -> str:
    for msg in reversed(body.get("messages") or []):
        if msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            return content
        for block in content or []:
            if block.get("type") == "text":
                return str(block.get("text", ""))
            if block.get("type") == "tool_result":
                result = block.get("content")
                return f"tool result {json.dumps(result)}"
    return ""


def echo(body: dict[str, Any]) -> Reply:
    """The default answer: a text reply that echoes the last user text."""
    return reply(text(f"echo: {_last_user_text(body)}"), model=str(body.get("model", MODEL)))


# Lines the support model ends its answer with, chosen by what the system prompt says.
OPEN_DESK = "A colleague will call you back today."
CLOSED_DESK = "We will reply by email tomorrow."
_COUNTRIES = {"france": "FR", "germany": "DE", "spain": "ES", "italy": "IT"}


def _tool_results(body: dict[str, Any]) -> dict[str, Any]:
    """The conversation's tool results so far, by tool name (the last result of each tool)."""
    names: dict[str, str] = {}
    results: dict[str, Any] = {}
    for msg in body.get("messages") or []:
        content = msg.get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
            elif block.get("type") == "tool_result":
                value = block.get("content")
                with contextlib.suppress(json.JSONDecodeError):
                    value = json.loads(value) if isinstance(value, str) else value
                results[names.get(str(block.get("tool_use_id")), "?")] = value
    return results


def _system_text(body: dict[str, Any]) -> str:
    system = body.get("system")
    if isinstance(system, list):
        return " ".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return str(system or "")


def support_model(body: dict[str, Any]) -> Reply:
    """A rule-based support model for an online shop, as a server's default answer.

    Asked about an order, it calls ``lookup_order`` and ``shipping_policy`` in one
    turn (two parallel ``tool_use`` blocks); given a shipped order, it calls
    ``track_shipment``; given the tracking, it answers in text, ending with a
    callback offer when the system prompt says the help desk is open and an
    email promise otherwise.
    """
    question = next(
        (
            m["content"]
            for m in body.get("messages") or []
            if m.get("role") == "user" and isinstance(m.get("content"), str)
        ),
        "",
    )
    done = _tool_results(body)
    turn = 1 + sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
    # Tokens roughly as the real API counts them (about four characters each), so costs look real.
    tokens: dict[str, Any] = {"input_tokens": max(1, len(_compact(body)) // 4), "model": str(body.get("model", MODEL))}
    if "lookup_order" not in done:
        match = re.search(r"\b([A-Z]-\d+)\b", question)
        order_id = match.group(1) if match else "A-17"
        country = next((code for name, code in _COUNTRIES.items() if name in question.lower()), "FR")
        return reply(
            text(f"Let me look up order {order_id} and our shipping policy for {country}."),
            tool_use("lookup_order", {"order_id": order_id}, f"toolu_{turn:02d}_a"),
            tool_use("shipping_policy", {"country": country}, f"toolu_{turn:02d}_b"),
            output_tokens=48,
            **tokens,
        )
    order: dict[str, Any] = done["lookup_order"] if isinstance(done["lookup_order"], dict) else {}
    if order.get("tracking") and "track_shipment" not in done:
        return reply(
            text(f"It has shipped with {order.get('carrier')}; let me ask them where it is."),
            tool_use(
                "track_shipment",
                {"carrier": order.get("carrier"), "tracking": order.get("tracking")},
                f"toolu_{turn:02d}_a",
            ),
            output_tokens=40,
            **tokens,
        )
    scan: dict[str, Any] = done["track_shipment"] if isinstance(done.get("track_shipment"), dict) else {}
    policy: dict[str, Any] = done["shipping_policy"] if isinstance(done.get("shipping_policy"), dict) else {}
    status = f"Order {order.get('order_id', '?')} is {order.get('status', 'unknown')}"
    if scan:
        status += f", last scanned at {scan.get('last_scan')} and due in {scan.get('eta_days')} days"
    desk = OPEN_DESK if "desk is open" in _system_text(body).lower() else CLOSED_DESK
    answer = f"{status}. {policy.get('policy', '')} {desk}".replace("  ", " ")
    return reply(text(answer), output_tokens=max(1, len(answer) // 4), **tokens)


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


class MessagesAPIServer:
    """The server, started on a free port of 127.0.0.1; a context manager that stops it."""

    def __init__(self, default: Callable[[dict[str, Any]], Reply] = echo) -> None:
        self.default = default
        self.requests: list[Received] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._request_ids = itertools.count(1)
        self._stopped = False
        self.spaced_json = False
        handle = self._handle

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # The headers and the body go out in two writes on a kept-alive
            # connection: with Nagle's algorithm the body waits for the client's
            # delayed ACK of the headers, about 40 ms a response.
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                handle(self)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="messages-api", daemon=True)
        self._thread.start()
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> MessagesAPIServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def script(self, *replies: Reply) -> None:
        """Queue answers for the next requests, in order (then the default resumes)."""
        with self._lock:
            self._script.extend(replies)

    def stop(self) -> None:
        """Stop listening: later requests fail to connect, as with the network unplugged."""
        if self._stopped:
            return
        self._stopped = True
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    @property
    def stopped(self) -> bool:
        with socket.socket() as probe:
            probe.settimeout(0.5)
            return probe.connect_ex(("127.0.0.1", self.port)) != 0

    @property
    def message_requests(self) -> list[Received]:
        return [r for r in self.requests if r.path.split("?")[0] == "/v1/messages"]

    # -- handling ------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            body = None
        path = handler.path
        received = Received("POST", path, {k.lower(): v for k, v in handler.headers.items()}, body)
        with self._lock:
            self.requests.append(received)
        request_id = f"req_{next(self._request_ids):06d}"
        route = path.split("?")[0]
        if not isinstance(body, dict):
            self._send_json(handler, 400, api_error(400, "body is not JSON").body, request_id, {})
            return
        if route == "/v1/messages/count_tokens":
            tokens = max(1, len(json.dumps(body.get("messages", []))) // 4)
            self._send_json(handler, 200, {"input_tokens": tokens}, request_id, {})
            return
        if route != "/v1/messages":
            self._send_json(handler, 404, api_error(404, f"no route {route}").body, request_id, {})
            return
        with self._lock:
            answer = self._script.popleft() if self._script else None
        if answer is None:
            answer = self.default(body)
        if answer.delay:
            time.sleep(answer.delay)
        if answer.drop:
            handler.close_connection = True
            handler.connection.shutdown(socket.SHUT_RDWR)
            return
        if answer.status != 200 or not body.get("stream"):
            self._send_json(handler, answer.status, answer.body, request_id, answer.headers)
            return
        assert answer.body is not None
        events = answer.events if answer.events is not None else stream_events(answer.body)
        self._send_stream(handler, events, request_id, answer)

    def _send_json(
        self, handler: BaseHTTPRequestHandler, status: int, body: Any, request_id: str, headers: dict[str, str]
    ) -> None:
        # A test can ask for the spaced JSON of json.dumps, to check bytes replay as sent.
        data = (json.dumps(body) if self.spaced_json else _compact(body)).encode()
        handler.send_response(status)
        handler.send_header("content-type", "application/json")
        handler.send_header("content-length", str(len(data)))
        handler.send_header("request-id", request_id)
        handler.send_header("anthropic-ratelimit-requests-remaining", "99")
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)
        handler.wfile.flush()

    def _send_stream(
        self,
        handler: BaseHTTPRequestHandler,
        events: Iterable[tuple[str, dict[str, Any]]],
        request_id: str,
        answer: Reply,
    ) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream; charset=utf-8")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("request-id", request_id)
        handler.send_header("connection", "close")
        for name, value in answer.headers.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.close_connection = True
        try:
            for n, (name, data) in enumerate(events):
                if answer.cut_after is not None and n >= answer.cut_after:
                    handler.connection.shutdown(socket.SHUT_RDWR)
                    return
                handler.wfile.write(f"event: {name}\ndata: {_compact(data)}\n\n".encode())
                handler.wfile.flush()
                if answer.event_gap:
                    time.sleep(answer.event_gap)
        except (BrokenPipeError, ConnectionResetError):
            # The client closed the stream early; that is its right.
            return

"""The HTTP exchanges of one Messages call: recorded as JSON, replayed as ``httpx2`` responses.

A call is every HTTP attempt the SDK makes for one method call (its retries
included). Each attempt is recorded as what came back: a status, the response
headers (no request headers, so no credentials), and the body as JSON, or the
server-sent events in order, or the connection error. Replay hands the SDK
responses rebuilt from those, so its own retry loop, parsing, stream helpers
and error classes produce the objects the agent saw, with no network.

A body the SDK did not read when the request returned (a stream) is recorded
as the agent reads it: a tap on ``response.stream`` collects the bytes and ends
the call's span on every exit path (read to the end, closed early, broken by
an error, dropped without reading).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx2
import orjson
from anthropic import APITimeoutError

from spanreplay import semconv as sc
from spanreplay.errors import ReplayDivergenceError
from spanreplay.model.error_records import decode_error, encode_error, rebuild_error
from spanreplay.model.tool_links import note_response
from spanreplay.recording.configuration import settings
from spanreplay.run.calls import Call

from ._attributes import response_attributes, summarize_events
from ._errors import connection_error

logger = logging.getLogger("spanreplay")

__all__ = ["CallRecorder", "CallReplayer", "parse_sse"]

# Response headers that describe the bytes on the wire, not the response: the
# body is recorded decoded and re-framed on replay.
_SKIP_HEADERS = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive", "set-cookie"}
)


def _headers(response: httpx2.Response) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in response.headers.multi_items():
        name = name.lower()
        if name in _SKIP_HEADERS:
            continue
        out[name] = f"{out[name]}, {value}" if name in out else value
    return out


def parse_sse(data: bytes) -> list[dict[str, Any]]:
    """The complete server-sent events in ``data``, in order.

    An event counts only once its blank line arrived: a stream closed in the
    middle of an event leaves that event out, as the SDK's reader would.
    """
    text = data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")
    blocks = text.split("\n\n")
    if not text.endswith("\n\n"):
        blocks = blocks[:-1]
    events: list[dict[str, Any]] = []
    for block in blocks:
        name: str | None = None
        lines: list[str] = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                lines.append(value)
        if name is None and not lines:
            continue
        raw = "\n".join(lines)
        event: dict[str, Any] = {"event": name}
        try:
            event["data"] = orjson.loads(raw)
        except orjson.JSONDecodeError:
            event["text"] = raw
        events.append(event)
    return events


def encode_sse(events: list[dict[str, Any]]) -> bytes:
    parts: list[bytes] = []
    for event in events:
        name = event.get("event")
        data = orjson.dumps(event["data"]) if "data" in event else str(event.get("text", "")).encode()
        head = f"event: {name}\n".encode() if name is not None else b""
        parts.append(head + b"data: " + data + b"\n\n")
    return b"".join(parts)


def _decode_body(raw: bytes, headers: Mapping[str, str], content_encoding: str | None) -> dict[str, Any]:
    """The recorded form of a body: events, JSON, or text."""
    if content_encoding:
        # httpx2 decodes gzip, deflate, brotli and zstd exactly as it does for the SDK.
        raw = httpx2.Response(200, headers={"content-encoding": content_encoding}, content=raw).content
    content_type = headers.get("content-type", "")
    recorded: dict[str, Any]
    if content_type.startswith("text/event-stream"):
        recorded = {"events": parse_sse(raw)}
        again = encode_sse(recorded["events"])
    else:
        try:
            recorded = {"body": orjson.loads(raw)}
        except orjson.JSONDecodeError:
            return {"text": raw.decode("utf-8", "replace")}
        again = orjson.dumps(recorded["body"])
    if again != raw:
        # The parsed form is what people read; replay serves these exact bytes, so an
        # agent reading the raw body (with_streaming_response) sees what it saw.
        recorded["raw"] = raw.decode("utf-8", "replace")
    return recorded


def _connection_error(exc: BaseException) -> dict[str, Any]:
    cause = exc.__cause__
    return {
        "type": "timeout" if isinstance(exc, APITimeoutError) else "connection",
        "message": str(exc),
        "cause": orjson.loads(encode_error(cause)) if cause is not None else None,
    }


class CallRecorder:
    """Collects the attempts of one call and ends its span when the call is over."""

    def __init__(self, call: Call, *, model: str | None, stream: bool) -> None:
        self.call = call
        self.model = model
        self.stream = stream
        self.started = time.perf_counter()
        self.first_chunk: float | None = None
        self.attempts: list[dict[str, Any]] = []
        # Weak: an agent that drops an unread stream must let it be collected, which
        # is how the tap learns the stream was dropped (the run holds this recorder).
        self._open_tap: weakref.ref[_Tap] | None = None
        self._returned = False
        self._lock = threading.Lock()
        call.on_abandon = self._abandoned

    @property
    def output(self) -> dict[str, Any]:
        return {"attempts": self.attempts}

    # -- attempts -------------------------------------------------------------------

    def response(self, response: httpx2.Response, client: object) -> None:
        """One attempt's response, read or not."""
        entry: dict[str, Any] = {"status": response.status_code, "headers": _headers(response)}
        self.attempts.append(entry)
        if hasattr(response, "_content"):
            # Read by send(): the body is at hand, already decoded.
            entry.update(_decode_body(response.content, entry["headers"], None))
            return
        entry["streamed"] = True
        tap = _Tap(self, entry, response)
        tap.client = client
        self._open_tap = weakref.ref(tap)
        response.stream = tap.wrap(response.stream)

    def connection_error(self, exc: BaseException) -> None:
        self.attempts.append({"error": _connection_error(exc)})

    def raised(self, exc: BaseException) -> None:
        """An attempt that failed before anything was sent (a bad argument, say)."""
        self.attempts.append({"raised": orjson.loads(encode_error(exc))})

    # -- the call's end -----------------------------------------------------------------

    def failed(self, exc: BaseException) -> None:
        """The SDK method raised: every attempt is in, the span ends now."""
        self.call.fail(exc, output=self.output, attributes=self._attributes())

    def returned(self) -> None:
        """The SDK method returned: the span ends now, or when the agent is done with the body."""
        with self._lock:
            self._returned = True
            tap = self._tap()
            waiting = tap is not None and not tap.ended
        if not waiting:
            self._finish(None)

    def tap_ended(self, tap: _Tap, error: BaseException | None) -> None:
        with self._lock:
            # By entry, not by the weak reference: the collector clears that first
            # when it collects a dropped stream.
            last = self._returned and bool(self.attempts) and tap.entry is self.attempts[-1]
        if last:
            self._finish(error)

    def first_bytes(self) -> None:
        if self.first_chunk is None:
            self.first_chunk = time.perf_counter()

    def _tap(self) -> _Tap | None:
        return self._open_tap() if self._open_tap is not None else None

    def _abandoned(self) -> None:
        tap = self._tap()
        if tap is not None and not tap.ended:
            tap.end("abandoned", None)
        self._finish(None)

    def _finish(self, error: BaseException | None) -> None:
        attributes = self._attributes()
        if error is None:
            error = self._stream_error()
        if error is not None:
            self.call.fail(error, output=self.output, attributes=attributes)
        else:
            self.call.finish(self.output, attributes=attributes)

    def _stream_error(self) -> BaseException | None:
        """The SDK error an ``event: error`` in the stream raised in the agent."""
        tap = self._tap()
        last = self.attempts[-1] if self.attempts else {}
        for event in last.get("events", ()):
            if event.get("event") == "error" and tap is not None:
                body = event.get("data", event.get("text"))
                client: Any = tap.client
                if client is None:
                    return None
                maker = getattr(client, "_make_status_error", None)
                if maker is None:
                    return None
                exc: BaseException = maker(f"{body}", body=body, response=tap.response)
                return exc
        return None

    def _attributes(self) -> dict[str, Any]:
        try:
            return self._compute_attributes()
        except Exception:
            if settings().raise_internal_errors:
                raise
            logger.exception("spanreplay could not compute the attributes of model call %s", self.call.call_id)
            return {}

    def _compute_attributes(self) -> dict[str, Any]:
        attributes: dict[str, Any] = {}
        last = self.attempts[-1] if self.attempts else None
        if last is None or "status" not in last:
            return attributes
        attributes[sc.HTTP_RESPONSE_STATUS_CODE] = last["status"]
        request_id = last["headers"].get("request-id")
        if request_id:
            attributes[sc.ANTHROPIC_REQUEST_ID] = request_id
        if last["status"] >= 400:
            return attributes
        if "events" in last:
            message = summarize_events(last["events"])
            if self.first_chunk is not None and self.stream:
                attributes[sc.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] = self.first_chunk - self.started
        elif isinstance(last.get("body"), dict):
            message = last["body"]
        else:
            return attributes
        attributes.update(response_attributes(message, request_model=self.model))
        note_response(self.call.run, message.get("content"))
        return attributes


class _Tap:
    """Wraps a response's byte stream, keeps the bytes, and reports how reading ended."""

    def __init__(self, recorder: CallRecorder, entry: dict[str, Any], response: httpx2.Response) -> None:
        self.recorder = recorder
        self.entry = entry
        self.response = response
        self.client: object | None = None
        self.chunks: list[bytes] = []
        self.ended = False
        self._lock = threading.Lock()
        self._encoding = response.headers.get("content-encoding")

    def wrap(
        self, body: httpx2.SyncByteStream | httpx2.AsyncByteStream
    ) -> httpx2.SyncByteStream | httpx2.AsyncByteStream:
        sync = isinstance(body, httpx2.SyncByteStream)
        asynchronous = isinstance(body, httpx2.AsyncByteStream)
        if sync and asynchronous:
            return _TapBoth(body, self)
        if sync:
            return _TapSync(body, self)  # type: ignore[arg-type]
        return _TapAsync(body, self)  # type: ignore[arg-type]

    def chunk(self, data: bytes) -> None:
        if data:
            self.recorder.first_bytes()
            self.chunks.append(data)

    def end(self, how: str, error: BaseException | None) -> None:
        with self._lock:
            if self.ended:
                return
            self.ended = True
        try:
            self.entry.update(_decode_body(b"".join(self.chunks), self.entry["headers"], self._encoding))
            self.entry["end"] = how
            if error is not None:
                self.entry["stream_error"] = orjson.loads(encode_error(error))
        except Exception:
            if settings().raise_internal_errors:
                raise
            logger.exception("spanreplay could not record a response body of call %s", self.recorder.call.call_id)
        self.recorder.tap_ended(self, error)


class _TapSync(httpx2.SyncByteStream):
    def __init__(self, body: httpx2.SyncByteStream, tap: _Tap) -> None:
        self._body = body
        self._tap = tap

    @property
    def elapsed(self) -> Any:
        return getattr(self._body, "elapsed", None)

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._body:
                self._tap.chunk(chunk)
                yield chunk
        except Exception as exc:
            self._tap.end("failed", exc)
            raise
        self._tap.end("read", None)

    def close(self) -> None:
        self._tap.end("closed", None)
        self._body.close()

    def __del__(self) -> None:
        # An agent may drop a response without reading or closing it.
        # At interpreter shutdown half of the world is gone: nothing to report then.
        with contextlib.suppress(Exception):
            self._tap.end("dropped", None)


class _TapAsync(httpx2.AsyncByteStream):
    def __init__(self, body: httpx2.AsyncByteStream, tap: _Tap) -> None:
        self._async_body = body
        self._tap = tap

    @property
    def elapsed(self) -> Any:
        return getattr(self._async_body, "elapsed", None)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = self._async_body.__aiter__()
        try:
            async for chunk in chunks:
                self._tap.chunk(chunk)
                yield chunk
        except Exception as exc:
            self._tap.end("failed", exc)
            raise
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        self._tap.end("read", None)

    async def aclose(self) -> None:
        self._tap.end("closed", None)
        await self._async_body.aclose()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._tap.end("dropped", None)


class _TapBoth(_TapSync, _TapAsync):
    def __init__(self, body: Any, tap: _Tap) -> None:
        _TapSync.__init__(self, body, tap)
        _TapAsync.__init__(self, body, tap)


# --- replay --------------------------------------------------------------------------


class _ReplayedStream(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A recorded body, then the recorded error that broke it (if one did)."""

    def __init__(self, data: bytes, error: dict[str, Any] | None) -> None:
        self._data = data
        self._error = error

    def _raise(self) -> None:
        if self._error is not None:
            raise rebuild_error(decode_error(orjson.dumps(self._error)))

    def __iter__(self) -> Iterator[bytes]:
        if self._data:
            yield self._data
        self._raise()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._data:
            yield self._data
        self._raise()


class CallReplayer:
    """Serves the recorded attempts of one call to the SDK, in order."""

    def __init__(self, call: Call, attempts: list[dict[str, Any]]) -> None:
        self.call = call
        self.attempts = attempts
        self._next = 0

    def respond(self, request: httpx2.Request) -> httpx2.Response:
        if self._next >= len(self.attempts):
            raise ReplayDivergenceError(
                f"Replay of model call {self.call.call_id} (seq {self.call.seq}) diverged: the SDK made HTTP "
                f"attempt {self._next + 1}, but the recording holds {len(self.attempts)}. The client retries "
                "more than the recorded one did; give it the recorded max_retries.",
                run_id=self.call.run.run_id,
                seq=self.call.seq,
                call_id=self.call.call_id,
                recorded=f"{len(self.attempts)} attempt(s)",
                attempted=f"attempt {self._next + 1}",
            )
        attempt = self.attempts[self._next]
        self._next += 1
        if "error" in attempt:
            raise connection_error(attempt["error"], request)
        if "raised" in attempt:
            where = f"run {self.call.run.run_id} seq {self.call.seq} (model call {self.call.call_id})"
            raise rebuild_error(decode_error(orjson.dumps(attempt["raised"])), where=where)
        if "raw" in attempt:
            data = str(attempt["raw"]).encode()
        elif "events" in attempt:
            data = encode_sse(attempt["events"])
        elif "body" in attempt:
            data = orjson.dumps(attempt["body"])
        else:
            data = str(attempt.get("text", "")).encode()
        response = httpx2.Response(
            int(attempt["status"]),
            headers=list(attempt.get("headers", {}).items()),
            stream=_ReplayedStream(data, attempt.get("stream_error")),
            request=request,
        )
        if not attempt.get("streamed"):
            response.read()
        return response

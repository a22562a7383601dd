"""The direct replay path gives the agent the very objects the SDK's own replay path gives.

A plain call (no stream, no raw response, no middleware) replays without the SDK's
request preparation and response parsing; everything else goes through the SDK.
These tests hold the two paths equal: on response bodies of every shape (a
property test against the SDK's own ``construct_type``), and end to end through
the real SDK against the local Messages API server, where a client with a
pass-through middleware takes the SDK's path.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pydantic
import pytest
from anthropic._models import construct_type
from anthropic.types import Message, MessageTokensCount
from anthropic.types.beta import BetaMessage
from hypothesis import given, settings
from hypothesis import strategies as st

import spanreplay
from helpers.accelerators import needs_accelerator
from helpers.messages_api_server import (
    MODEL,
    MessagesAPIServer,
    Reply,
    api_error,
    instrument,
    message,
    reply,
    serve,
    text,
    tool_use,
)
from spanreplay.instrumentation.anthropic import _direct

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

USER = [{"role": "user", "content": "Where is my order A-17?"}]
ARGS: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": USER}


def state(value: Any) -> Any:
    """Everything an agent can read of an SDK object: types, fields, extras, set fields, private attributes."""
    if isinstance(value, pydantic.BaseModel):
        extra = value.__pydantic_extra__ or {}
        return (
            type(value),
            {name: state(v) for name, v in value.__dict__.items()},
            {name: state(v) for name, v in extra.items()},
            sorted(value.model_fields_set),
            value.__pydantic_private__,
        )
    if isinstance(value, list):
        return [state(v) for v in value]
    if isinstance(value, dict):
        return {k: state(v) for k, v in value.items()}
    return (type(value), value)


def assert_same_object(fast: Any, slow: Any) -> None:
    assert state(fast) == state(slow)
    assert fast == slow
    if isinstance(fast, anthropic.BaseModel):
        with warnings.catch_warnings():
            # A body with a value of the wrong type warns when serialized, alike on both sides.
            warnings.simplefilter("ignore", UserWarning)
            assert fast.to_json() == slow.to_json()
            assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)


# --- response bodies of every shape -------------------------------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_blocks = [
    {"type": "text", "text": "Your parcel left the depot.", "citations": None},
    {"type": "text", "text": "See the tracking page."},
    {"type": "tool_use", "id": "toolu_01", "name": "get_order_status", "input": {"order_id": "A-17", "n": [1, 2.5]}},
    {"type": "thinking", "thinking": "The customer wants a date.", "signature": "sig=="},
    {"type": "redacted_thinking", "data": "opaque"},
    {"type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {"query": "depot hours"}},
    {"type": "a_block_of_a_later_api", "payload": {"x": 1}},
]
_usage = {
    "input_tokens": 25,
    "output_tokens": 12,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 3,
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    "server_tool_use": {"web_search_requests": 1},
    "service_tier": "standard",
}


@st.composite
def message_bodies(draw: st.DrawFn) -> dict[str, Any]:
    """A Messages API body: known and unknown blocks, fields left out, extra keys, odd values."""
    body: dict[str, Any] = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [dict(b) for b in draw(st.lists(st.sampled_from(_blocks), max_size=4))],
        "stop_reason": draw(st.sampled_from(["end_turn", "tool_use", "max_tokens", None, "a_later_reason"])),
        "stop_sequence": None,
        "usage": {k: v for k, v in _usage.items() if k in ("input_tokens", "output_tokens") or draw(st.booleans())},
    }
    for target in [body, body["usage"], *body["content"]]:
        if draw(st.booleans()):
            target[draw(st.sampled_from(["later_field", "container", "note"]))] = draw(_json)
        if draw(st.integers(0, 9)) == 0 and target:
            target.pop(draw(st.sampled_from(sorted(target))))  # a required field missing
        if draw(st.integers(0, 9)) == 0 and target:
            target[draw(st.sampled_from(sorted(target)))] = draw(_json)  # a value of another type
    return body


@settings(max_examples=300, deadline=None)
@given(message_bodies(), st.sampled_from([Message, BetaMessage]))
def test_a_body_is_built_as_the_sdk_builds_it(body: dict[str, Any], cls: type[anthropic.BaseModel]) -> None:
    fast = _direct.build(cls, orjson.loads(orjson.dumps(body)))
    slow = construct_type(type_=cls, value=orjson.loads(orjson.dumps(body)))
    assert_same_object(fast, slow)


@given(st.one_of(st.integers(0, 10**6), st.floats(allow_nan=False), st.text(max_size=3), st.none()))
def test_a_token_count_is_built_as_the_sdk_builds_it(tokens: Any) -> None:
    body = {"input_tokens": tokens}
    assert_same_object(
        _direct.build(MessageTokensCount, dict(body)), construct_type(type_=MessageTokensCount, value=body)
    )


@pytest.mark.parametrize(
    "value",
    [
        {"model": MODEL, "messages": USER, "max_tokens": 5},
        {"messages": [{"role": "user", "content": [{"type": "text", "text": "é 日本"}]}], "n": 1.5, "ok": None},
    ],
)
def test_plain_json_data_encodes_as_the_codec_encodes_it(value: dict[str, Any]) -> None:
    from spanreplay.model import payloads as _payloads

    assert _direct.encoded(value) == _payloads.encode_input(value)


@pytest.mark.parametrize(
    "value",
    [
        {"messages": iter(USER)},
        {"messages": USER, "metadata": anthropic.NotGiven()},
        {"when": __import__("datetime").date(2026, 1, 2)},
        {"tags": {"a", "b"}},
        {1: "a non-string key"},
    ],
    ids=["iterator", "nested-not-given", "date", "set", "int-key"],
)
def test_data_the_sdk_would_prepare_is_not_plain(value: dict[str, Any]) -> None:
    assert _direct.encoded(value) is None


# --- end to end through the real SDK ----------------------------------------------------------------


@pytest.fixture
def direct_served(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The objects the direct path served (the path itself runs unchanged)."""
    served: list[Any] = []
    serve = _direct.serve

    def counting(call: Any, cast_to: Any) -> Any:
        result = serve(call, cast_to)
        if result is not _direct.DECLINED:
            served.append(result)
        return result

    monkeypatch.setattr(_direct, "serve", counting)
    return served


class PassThrough(anthropic.Middleware):
    """A middleware that changes nothing: a client with it replays through the SDK's path."""

    def handle(self, request: Any, call_next: Any) -> Any:
        return call_next(request)

    async def handle_async(self, request: Any, call_next: Any) -> Any:
        return await call_next(request)


def failure(exc: BaseException) -> tuple[Any, ...]:
    return (
        type(exc),
        getattr(exc, "status_code", None),
        getattr(exc, "request_id", None),
        getattr(exc, "body", None),
        str(exc),
    )


def call(client: anthropic.Anthropic, how: str) -> Any:
    try:
        if how == "count_tokens":
            return client.messages.count_tokens(model=MODEL, messages=USER)
        if how == "beta":
            return client.beta.messages.create(**ARGS, betas=["context-management-2025-06-27"])
        return client.messages.create(**ARGS)
    except anthropic.APIError as exc:
        return failure(exc)


def _body_with_extras() -> Reply:
    body = message(text("Shipped."), tool_use("get_order_status", {"order_id": "A-17"}, "toolu_9"))
    body["a_later_field"] = {"x": [1, 2]}
    body["usage"]["a_later_count"] = 7
    return Reply(body=body, headers={"request-id": "req_extra"})


CASES: dict[str, tuple[Callable[[], list[Reply]], str, int, bool]] = {
    # name: (script, how the agent calls, max_retries, served directly)
    "plain": (lambda: [reply(text("Your parcel left the depot."))], "create", 2, True),
    "tool_use": (
        lambda: [reply(text("Checking."), tool_use("get_order_status", {"order_id": "A-17"}, "tu_1"))],
        "create",
        2,
        True,
    ),
    "extra_fields": (lambda: [_body_with_extras()], "create", 2, True),
    "count_tokens": (list, "count_tokens", 2, True),
    "beta": (lambda: [reply(text("Beta."))], "beta", 2, True),
    "retried": (lambda: [api_error(529), reply(text("After a retry."))], "create", 2, False),
    "rate_limited": (lambda: [api_error(429, headers={"request-id": "req_429"})], "create", 0, False),
    "overloaded": (lambda: [api_error(529)] * 2, "create", 1, False),
}


@needs_accelerator("direct")
@pytest.mark.parametrize("name", list(CASES))
def test_the_direct_path_serves_what_the_sdk_path_serves(
    name: str, server: MessagesAPIServer, trace_dir: Path, instrumented: None, direct_served: list[Any]
) -> None:
    script, how, max_retries, direct = CASES[name]
    server.script(*script())
    with anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=max_retries) as client:
        with spanreplay.record(agent=name) as run:
            recorded = call(client, how)
        server.stop()
        log = spanreplay.load(trace_dir, run.run_id)

        with spanreplay.replay(log):
            fast = call(client, how)
        assert len(direct_served) == (1 if direct else 0)
        # A pass-through middleware: the SDK's own path, which runs a client's middleware.
        with spanreplay.replay(log):
            slow = call(client.with_middleware(PassThrough()), how)
        assert len(direct_served) == (1 if direct else 0)

    if isinstance(recorded, tuple):  # an API error: the same class, status, request id, body, message
        assert fast == slow == recorded
    else:
        assert_same_object(fast, slow)
        assert fast == recorded
        assert fast._request_id == recorded._request_id


@needs_accelerator("direct")
def test_the_async_client_takes_the_direct_path_too(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None, direct_served: list[Any]
) -> None:
    server.script(reply(text("Async.")))

    async def agent(client: anthropic.AsyncAnthropic) -> Any:
        return await client.messages.create(**ARGS)

    async def record() -> tuple[str, Any]:
        async with (
            anthropic.AsyncAnthropic(base_url=server.url, api_key="test-key") as client,
            spanreplay.record() as run,
        ):
            return run.run_id, await agent(client)

    run_id, recorded = asyncio.run(record())
    server.stop()
    log = spanreplay.load(trace_dir, run_id)

    async def replay(middleware: bool) -> Any:
        async with anthropic.AsyncAnthropic(base_url=server.url, api_key="test-key") as client, spanreplay.replay(log):
            return await agent(client.with_middleware(PassThrough()) if middleware else client)

    fast = asyncio.run(replay(False))
    assert len(direct_served) == 1
    slow = asyncio.run(replay(True))
    assert_same_object(fast, slow)
    assert fast == recorded


def test_a_request_the_sdk_must_prepare_replays_through_the_sdk_path(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None, direct_served: list[Any]
) -> None:
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client:
        with spanreplay.record() as run:
            recorded = client.messages.create(model=MODEL, max_tokens=256, messages=iter(USER))
        server.stop()
        with spanreplay.replay(trace_dir, run.run_id):
            # The SDK turns the iterator into a list: the same request as recorded.
            assert client.messages.create(model=MODEL, max_tokens=256, messages=iter(USER)) == recorded
            assert direct_served == []


@needs_accelerator("direct")
def test_a_client_made_before_instrumenting_replays_directly_too(
    server: MessagesAPIServer, trace_dir: Path, direct_served: list[Any]
) -> None:
    from spanreplay.instrumentation.anthropic import AnthropicInstrumentor

    server.script(reply(text("Bound early.")))
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client:
        assert client.messages is not None  # the resource keeps the client's methods as they are now
        instrumentor = AnthropicInstrumentor()
        instrumentor.instrument(zero_code=False)
        try:
            with spanreplay.record() as run:
                recorded = client.messages.create(**ARGS)
            server.stop()
            with spanreplay.replay(trace_dir, run.run_id):
                replayed = client.messages.create(**ARGS)
        finally:
            instrumentor.uninstrument()
    assert direct_served == [replayed]
    assert_same_object(replayed, recorded)

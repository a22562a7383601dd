"""Every path through the Anthropic SDK, sync and async: record, stop the server, replay.

Each small agent below takes one path and returns what it saw (SDK objects,
stream events, the exceptions it caught). The test records it against the
local Messages API server, stops the server, replays the run, and requires the
replayed agent to see equal objects.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path as FilePath
from typing import Any

import anthropic
import pydantic
import pytest

import spanreplay
from helpers.messages_api_server import (
    MODEL,
    MessagesAPIServer,
    Reply,
    api_error,
    drop_connection,
    instrument,
    reply,
    serve,
    stall,
    text,
    tool_use,
)

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

USER = [{"role": "user", "content": "Where is my order A-17?"}]
ARGS: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": USER}


class Person(pydantic.BaseModel):
    name: str
    age: int


def failure(exc: BaseException) -> tuple[Any, ...]:
    """What an agent sees of an API error: its class and the fields it would read."""
    return (
        type(exc),
        getattr(exc, "status_code", None),
        getattr(exc, "request_id", None),
        getattr(exc, "body", None),
        str(exc),
    )


# Calls made by tool functions; replay must never add to them.
tool_calls: list[str] = []


@anthropic.beta_tool
def get_order_status(order_id: str) -> str:
    """The shipping status of an order."""
    tool_calls.append(order_id)
    return f"order {order_id} shipped yesterday"


@anthropic.beta_async_tool(name="get_order_status")
async def get_order_status_async(order_id: str) -> str:
    """The shipping status of an order."""
    tool_calls.append(order_id)
    return f"order {order_id} shipped yesterday"


# --- sync paths ---------------------------------------------------------------------------


def create(client: anthropic.Anthropic) -> list[Any]:
    return [client.messages.create(**ARGS)]


def create_stream(client: anthropic.Anthropic) -> list[Any]:
    return list(client.messages.create(**ARGS, stream=True))


def stream_text(client: anthropic.Anthropic) -> list[Any]:
    with client.messages.stream(**ARGS) as stream:
        chunks = list(stream.text_stream)
        return [chunks, stream.get_final_message(), stream.get_final_text()]


def stream_until_done(client: anthropic.Anthropic) -> list[Any]:
    with client.messages.stream(**ARGS) as stream:
        stream.until_done()
        return [stream.get_final_message()]


def stream_events(client: anthropic.Anthropic) -> list[Any]:
    with client.messages.stream(**ARGS) as stream:
        return [*stream, stream.get_final_message()]


def parse(client: anthropic.Anthropic) -> list[Any]:
    parsed = client.messages.parse(**ARGS, output_format=Person)
    return [parsed, parsed.parsed_output]


def count_tokens(client: anthropic.Anthropic) -> list[Any]:
    return [client.messages.count_tokens(model=MODEL, messages=USER)]


def beta_create(client: anthropic.Anthropic) -> list[Any]:
    return [client.beta.messages.create(**ARGS, betas=["context-management-2025-06-27"])]


def beta_stream(client: anthropic.Anthropic) -> list[Any]:
    with client.beta.messages.stream(**ARGS) as stream:
        return [*stream, stream.get_final_message()]


def beta_parse(client: anthropic.Anthropic) -> list[Any]:
    parsed = client.beta.messages.parse(**ARGS, output_format=Person)
    return [parsed, parsed.parsed_output]


def beta_count_tokens(client: anthropic.Anthropic) -> list[Any]:
    return [client.beta.messages.count_tokens(model=MODEL, messages=USER)]


def tool_runner(client: anthropic.Anthropic) -> list[Any]:
    runner = client.beta.messages.tool_runner(**ARGS, tools=[get_order_status])
    return [*runner]


def raw_response(client: anthropic.Anthropic) -> list[Any]:
    raw = client.messages.with_raw_response.create(**ARGS)
    return [raw.parse(), raw.status_code, raw.headers.get("request-id"), raw.retries_taken, raw.request_id]


def streaming_response(client: anthropic.Anthropic) -> list[Any]:
    with client.messages.with_streaming_response.create(**ARGS) as response:
        lines = list(response.iter_lines())
        return [lines, response.status_code, response.headers.get("request-id")]


def streaming_response_stream(client: anthropic.Anthropic) -> list[Any]:
    with client.messages.with_streaming_response.create(**ARGS, stream=True) as response:
        return [*response.parse()]


def api_failure(client: anthropic.Anthropic) -> list[Any]:
    try:
        client.messages.create(**ARGS)
    except anthropic.APIError as exc:
        return [failure(exc)]
    raise AssertionError("the scripted failure did not happen")


def stream_failure(client: anthropic.Anthropic) -> list[Any]:
    seen: list[Any] = []
    try:
        with client.messages.stream(**ARGS) as stream:
            seen.extend(stream)
    except anthropic.APIError as exc:
        seen.append(failure(exc))
        return seen
    raise AssertionError("the scripted failure did not happen")


# --- async paths --------------------------------------------------------------------------


async def acreate(client: anthropic.AsyncAnthropic) -> list[Any]:
    return [await client.messages.create(**ARGS)]


async def acreate_stream(client: anthropic.AsyncAnthropic) -> list[Any]:
    return [event async for event in await client.messages.create(**ARGS, stream=True)]


async def astream_text(client: anthropic.AsyncAnthropic) -> list[Any]:
    async with client.messages.stream(**ARGS) as stream:
        chunks = [chunk async for chunk in stream.text_stream]
        return [chunks, await stream.get_final_message(), await stream.get_final_text()]


async def astream_until_done(client: anthropic.AsyncAnthropic) -> list[Any]:
    async with client.messages.stream(**ARGS) as stream:
        await stream.until_done()
        return [await stream.get_final_message()]


async def astream_events(client: anthropic.AsyncAnthropic) -> list[Any]:
    async with client.messages.stream(**ARGS) as stream:
        return [*[event async for event in stream], await stream.get_final_message()]


async def aparse(client: anthropic.AsyncAnthropic) -> list[Any]:
    parsed = await client.messages.parse(**ARGS, output_format=Person)
    return [parsed, parsed.parsed_output]


async def acount_tokens(client: anthropic.AsyncAnthropic) -> list[Any]:
    return [await client.messages.count_tokens(model=MODEL, messages=USER)]


async def abeta_create(client: anthropic.AsyncAnthropic) -> list[Any]:
    return [await client.beta.messages.create(**ARGS, betas=["context-management-2025-06-27"])]


async def abeta_stream(client: anthropic.AsyncAnthropic) -> list[Any]:
    async with client.beta.messages.stream(**ARGS) as stream:
        return [*[event async for event in stream], await stream.get_final_message()]


async def abeta_parse(client: anthropic.AsyncAnthropic) -> list[Any]:
    parsed = await client.beta.messages.parse(**ARGS, output_format=Person)
    return [parsed, parsed.parsed_output]


async def abeta_count_tokens(client: anthropic.AsyncAnthropic) -> list[Any]:
    return [await client.beta.messages.count_tokens(model=MODEL, messages=USER)]


async def atool_runner(client: anthropic.AsyncAnthropic) -> list[Any]:
    runner = client.beta.messages.tool_runner(**ARGS, tools=[get_order_status_async])
    return [message async for message in runner]


async def araw_response(client: anthropic.AsyncAnthropic) -> list[Any]:
    raw = await client.messages.with_raw_response.create(**ARGS)
    return [await raw.parse(), raw.status_code, raw.headers.get("request-id"), raw.retries_taken, raw.request_id]


async def astreaming_response(client: anthropic.AsyncAnthropic) -> list[Any]:
    async with client.messages.with_streaming_response.create(**ARGS) as response:
        lines = [line async for line in response.iter_lines()]
        return [lines, response.status_code, response.headers.get("request-id")]


async def astreaming_response_stream(client: anthropic.AsyncAnthropic) -> list[Any]:
    async with client.messages.with_streaming_response.create(**ARGS, stream=True) as response:
        return [event async for event in await response.parse()]


async def aapi_failure(client: anthropic.AsyncAnthropic) -> list[Any]:
    try:
        await client.messages.create(**ARGS)
    except anthropic.APIError as exc:
        return [failure(exc)]
    raise AssertionError("the scripted failure did not happen")


async def astream_failure(client: anthropic.AsyncAnthropic) -> list[Any]:
    seen: list[Any] = []
    try:
        async with client.messages.stream(**ARGS) as stream:
            seen.extend([event async for event in stream])
    except anthropic.APIError as exc:
        seen.append(failure(exc))
        return seen
    raise AssertionError("the scripted failure did not happen")


# --- the catalogue ------------------------------------------------------------------------

PERSON_JSON = '{"name": "Ada", "age": 36}'
ORDER_REPLY = reply(text("Your order A-17 shipped yesterday and arrives on Friday."), cache_read=40, cache_write=8)


def _tool_script() -> list[Reply]:
    return [reply(tool_use("get_order_status", {"order_id": "A-17"}, "toolu_01")), ORDER_REPLY]


@dataclass
class Path:
    name: str
    sync: Callable[[anthropic.Anthropic], list[Any]]
    asynchronous: Callable[[anthropic.AsyncAnthropic], Awaitable[list[Any]]]
    script: Callable[[], list[Reply]] = field(default=lambda: [ORDER_REPLY])
    max_retries: int = 2
    timeout: float = 10.0
    uses_tools: bool = False


def _stream_error_events() -> list[Reply]:
    from helpers.messages_api_server import message, stream_events

    events = stream_events(message(text("partial answer")))[:4]
    events.append(("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    return [Reply(body=message(text("x")), events=events)]


PATHS = [
    Path("create", create, acreate),
    Path("create_stream", create_stream, acreate_stream),
    Path("stream_text", stream_text, astream_text),
    Path("stream_until_done", stream_until_done, astream_until_done),
    Path("stream_events", stream_events, astream_events),
    Path("parse", parse, aparse, script=lambda: [reply(text(PERSON_JSON))]),
    Path("count_tokens", count_tokens, acount_tokens, script=list),
    Path("beta_create", beta_create, abeta_create),
    Path("beta_stream", beta_stream, abeta_stream),
    Path("beta_parse", beta_parse, abeta_parse, script=lambda: [reply(text(PERSON_JSON))]),
    Path("beta_count_tokens", beta_count_tokens, abeta_count_tokens, script=list),
    Path("tool_runner", tool_runner, atool_runner, script=_tool_script, uses_tools=True),
    Path("raw_response", raw_response, araw_response),
    Path("streaming_response", streaming_response, astreaming_response),
    Path("streaming_response_stream", streaming_response_stream, astreaming_response_stream),
    Path("retry_529_then_ok", raw_response, araw_response, script=lambda: [api_error(529), ORDER_REPLY]),
    Path("rate_limited_429", api_failure, aapi_failure, script=lambda: [api_error(429)], max_retries=0),
    Path("server_error_500", api_failure, aapi_failure, script=lambda: [api_error(500)] * 2, max_retries=1),
    Path("overloaded_529", api_failure, aapi_failure, script=lambda: [api_error(529)] * 3, max_retries=2),
    Path("connection_error", api_failure, aapi_failure, script=lambda: [drop_connection()] * 2, max_retries=1),
    Path("timeout", api_failure, aapi_failure, script=lambda: [stall(1.5)], max_retries=0, timeout=0.5),
    Path("error_event_mid_stream", stream_failure, astream_failure, script=_stream_error_events),
]


# --- the tests ------------------------------------------------------------------------------


def _client(server: MessagesAPIServer, path: Path, cls: Any) -> Any:
    return cls(base_url=server.url, api_key="test-key", max_retries=path.max_retries, timeout=path.timeout)


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_sync_path_replays_the_objects_the_agent_saw(
    path: Path, server: MessagesAPIServer, trace_dir: FilePath, instrumented: None
) -> None:
    server.script(*path.script())
    tool_calls.clear()
    with _client(server, path, anthropic.Anthropic) as client, spanreplay.record(agent=path.name) as run:
        recorded = path.sync(client)
    calls_recorded = list(tool_calls)
    server.stop()

    with _client(server, path, anthropic.Anthropic) as client, spanreplay.replay(trace_dir, run.run_id) as replay:
        replayed = path.sync(client)

    assert replayed == recorded
    assert replay.outcome == "completed"
    assert tool_calls == calls_recorded, "a tool ran again on replay"
    if path.uses_tools:
        assert calls_recorded == ["A-17"]


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_async_path_replays_the_objects_the_agent_saw(
    path: Path, server: MessagesAPIServer, trace_dir: FilePath, instrumented: None
) -> None:
    server.script(*path.script())
    tool_calls.clear()

    async def record() -> tuple[str, list[Any]]:
        async with _client(server, path, anthropic.AsyncAnthropic) as client, spanreplay.record(agent=path.name) as run:
            return run.run_id, await path.asynchronous(client)

    run_id, recorded = asyncio.run(record())
    calls_recorded = list(tool_calls)
    server.stop()

    async def replay() -> list[Any]:
        async with _client(server, path, anthropic.AsyncAnthropic) as client, spanreplay.replay(trace_dir, run_id):
            return await path.asynchronous(client)

    assert asyncio.run(replay()) == recorded
    assert tool_calls == calls_recorded, "a tool ran again on replay"


def test_replay_sends_nothing_to_the_network(
    server: MessagesAPIServer, trace_dir: FilePath, instrumented: None
) -> None:
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client:
        with spanreplay.record() as run:
            stream_text(client)
            create(client)
        sent = len(server.requests)

        with spanreplay.replay(trace_dir, run.run_id):
            stream_text(client)
            create(client)

    assert len(server.requests) == sent


def test_retries_replay_as_they_happened(server: MessagesAPIServer, trace_dir: FilePath, instrumented: None) -> None:
    server.script(api_error(529), api_error(429, headers={"retry-after-ms": "10"}), ORDER_REPLY)
    with anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=3) as client:
        with spanreplay.record() as run:
            recorded = raw_response(client)
        server.stop()
        assert recorded[3] == 2  # retries_taken

        with spanreplay.replay(trace_dir, run.run_id):
            assert raw_response(client) == recorded

    event = spanreplay.load(trace_dir, run.run_id).events[0]
    assert [a["status"] for a in event.output["attempts"]] == [529, 429, 200]


def test_parallel_calls_under_gather_replay_without_divergence(
    server: MessagesAPIServer, trace_dir: FilePath, instrumented: None
) -> None:
    questions = [f"question {n}" for n in range(4)]

    async def agent() -> list[Any]:
        async with anthropic.AsyncAnthropic(base_url=server.url, api_key="test-key") as client:

            async def ask(q: str) -> Any:
                messages = [{"role": "user", "content": q}]
                async with client.messages.stream(model=MODEL, max_tokens=64, messages=messages) as s:
                    return await s.get_final_message()

            return list(await asyncio.gather(*(ask(q) for q in questions)))

    async def record() -> tuple[str, list[Any]]:
        async with spanreplay.record() as run:
            return run.run_id, await agent()

    run_id, recorded = asyncio.run(record())
    server.stop()

    async def replay() -> list[Any]:
        async with spanreplay.replay(trace_dir, run_id):
            return await agent()

    assert asyncio.run(replay()) == recorded
    assert [m.content[0].text for m in recorded] == [f"echo: {q}" for q in questions]

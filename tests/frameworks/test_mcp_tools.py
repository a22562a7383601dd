"""MCP client tools: a real stdio MCP server and the real Anthropic SDK, recorded, then replayed with neither."""

from __future__ import annotations

import importlib.metadata
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import anyio
import mcp.types as types
import pytest
from mcp import ClientSession, StdioServerParameters

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, reply, serve, text, tool_use
from spanreplay import semconv as sc
from spanreplay.instrumentation.mcp import McpInstrumentor

server = pytest.fixture(serve, name="server")
anthropic_instrumented = pytest.fixture(instrument, name="anthropic_instrumented")

SERVER_SCRIPT = Path(__file__).parent.parent / "helpers" / "mcp_order_server.py"
QUESTION = "Where is order A-17, and please refund 20 on it."


@pytest.fixture
def instrumented(anthropic_instrumented: None) -> Iterator[McpInstrumentor]:
    instrumentor = McpInstrumentor()
    instrumentor.instrument()
    yield instrumentor
    instrumentor.uninstrument()


@pytest.fixture
def calls(tmp_path: Path) -> Path:
    return tmp_path / "calls.jsonl"


def _real_calls(calls: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


def _params(calls: Path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=[str(SERVER_SCRIPT), str(calls)])


def _unrunnable(tmp_path: Path) -> StdioServerParameters:
    return StdioServerParameters(command=str(tmp_path / "no-such-mcp-server"), args=[])


async def _agent(params: StdioServerParameters, base_url: str, errlog: Any) -> tuple[str, list[Any]]:
    """The user's code: list the MCP tools, hand them to Claude, call the ones it asks for."""
    from mcp import stdio_client

    results: list[Any] = []
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
        anthropic.AsyncAnthropic(base_url=base_url, api_key="test-key", max_retries=0) as claude,
    ):
        await session.initialize()
        listed = await session.list_tools()
        tools: Any = [
            {"name": t.name, "description": t.description or "", "input_schema": t.input_schema} for t in listed.tools
        ]
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        while True:
            response = await claude.messages.create(model=MODEL, max_tokens=256, tools=tools, messages=messages)
            if response.stop_reason != "tool_use":
                return "".join(b.text for b in response.content if b.type == "text"), results
            messages.append({"role": "assistant", "content": [b.model_dump() for b in response.content]})
            answers = []
            for block in response.content:
                if block.type == "tool_use":
                    result = await session.call_tool(block.name, block.input)
                    results.append(result)
                    content = [{"type": "text", "text": c.text} for c in result.content if c.type == "text"]
                    answers.append(
                        {
                            "type": "tool_result",
                            "tool_use_id": block.id,
                            "content": content,
                            "is_error": result.is_error,
                        }
                    )
            messages.append({"role": "user", "content": answers})


def _script(server: MessagesAPIServer, amount: float = 20) -> None:
    server.script(
        reply(tool_use("lookup_order", {"order_id": "A-17"}, id="toolu_1"), stop_reason="tool_use"),
        reply(tool_use("refund", {"order_id": "A-17", "amount": amount}, id="toolu_2"), stop_reason="tool_use"),
        reply(text("A-17 has shipped; the refund is done.")),
    )


def _run(params: StdioServerParameters, base_url: str, tmp_path: Path) -> tuple[str, list[Any]]:
    with (tmp_path / "server-stderr.txt").open("a") as errlog:
        return anyio.run(_agent, params, base_url, errlog)


def _record(server: MessagesAPIServer, calls: Path, tmp_path: Path, amount: float = 20) -> tuple[str, str, list[Any]]:
    _script(server, amount)
    with spanreplay.record() as run:
        answer, results = _run(_params(calls), server.url, tmp_path)
    server.stop()
    return run.run_id, answer, results


def test_a_replay_needs_neither_the_model_nor_the_mcp_server(
    server: MessagesAPIServer, trace_dir: Path, calls: Path, tmp_path: Path, instrumented: McpInstrumentor
) -> None:
    run_id, answer, recorded = _record(server, calls, tmp_path)
    assert answer == "A-17 has shipped; the refund is done."
    assert [c["tool"] for c in _real_calls(calls)] == ["lookup_order", "refund"]
    steps = [(e.kind, e.key) for e in spanreplay.load(trace_dir, run_id)]
    assert steps == [
        (sc.KIND_MCP, sc.MCP_INITIALIZE),
        (sc.KIND_MCP, sc.MCP_TOOLS_LIST),
        (sc.KIND_MODEL, MODEL),
        (sc.KIND_TOOL, "lookup_order"),
        (sc.KIND_MODEL, MODEL),
        (sc.KIND_TOOL, "refund"),
        (sc.KIND_MODEL, MODEL),
    ]
    calls.unlink()

    with spanreplay.replay(trace_dir, run_id):
        replayed, results = _run(_unrunnable(tmp_path), server.url, tmp_path)

    assert replayed == answer
    assert not calls.exists()  # no tool ran: the server never started
    assert all(isinstance(r, types.CallToolResult) for r in results)
    assert results == recorded
    assert results[0].structured_content == {"order_id": "A-17", "status": "shipped", "total": 42.5}


def test_an_is_error_result_replays_as_an_is_error_result(
    server: MessagesAPIServer, trace_dir: Path, calls: Path, tmp_path: Path, instrumented: McpInstrumentor
) -> None:
    run_id, answer, recorded = _record(server, calls, tmp_path, amount=500)
    assert recorded[1].is_error
    assert "exceeds the limit of 100" in recorded[1].content[0].text

    with spanreplay.replay(trace_dir, run_id):
        replayed, results = _run(_unrunnable(tmp_path), server.url, tmp_path)

    assert replayed == answer
    assert isinstance(results[1], types.CallToolResult)
    assert results[1].is_error
    assert results[1] == recorded[1]
    assert len(_real_calls(calls)) == 2  # the two recorded calls, none on replay


def test_a_changed_tool_argument_diverges_at_the_tool_call(
    server: MessagesAPIServer, trace_dir: Path, calls: Path, tmp_path: Path, instrumented: McpInstrumentor
) -> None:
    run_id, _, _ = _record(server, calls, tmp_path)

    with pytest.raises(spanreplay.InputChangedError) as changed_input, spanreplay.replay(trace_dir, run_id):
        _script_replay_with_changed_argument(tmp_path, server.url)
    assert changed_input.value.seq == 4
    assert '"order_id": "A-17"' in changed_input.value.diff
    assert '"order_id": "B-99"' in changed_input.value.diff
    assert len(_real_calls(calls)) == 2


def _script_replay_with_changed_argument(tmp_path: Path, base_url: str) -> None:
    """The agent, except that it looks up another order than the model asked for."""

    async def agent() -> None:
        from mcp import stdio_client

        async with (
            stdio_client(_unrunnable(tmp_path)) as (read, write),
            ClientSession(read, write) as session,
            anthropic.AsyncAnthropic(base_url=base_url, api_key="test-key", max_retries=0) as claude,
        ):
            await session.initialize()
            listed = await session.list_tools()
            tools: Any = [
                {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
                for t in listed.tools
            ]
            messages: Any = [{"role": "user", "content": QUESTION}]
            response = await claude.messages.create(model=MODEL, max_tokens=256, tools=tools, messages=messages)
            block = next(b for b in response.content if b.type == "tool_use")
            await session.call_tool(block.name, {**block.input, "order_id": "B-99"})

    anyio.run(agent)


def test_a_request_without_a_recording_fails_at_once_naming_its_method(
    server: MessagesAPIServer, trace_dir: Path, calls: Path, tmp_path: Path, instrumented: McpInstrumentor
) -> None:
    run_id, _, _ = _record(server, calls, tmp_path)

    refused: list[BaseException] = []

    async def pings() -> None:
        from mcp import stdio_client

        async with stdio_client(_unrunnable(tmp_path)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            with anyio.fail_after(5):
                try:
                    await session.send_ping()
                except spanreplay.ReplayDivergenceError as error:
                    refused.append(error)

    # The replay stops early, so it also ends with the recorded steps it never reached.
    with pytest.raises(spanreplay.ReplayDivergenceError), spanreplay.replay(trace_dir, run_id):
        anyio.run(pings)
    assert len(refused) == 1
    assert "MCP request 'ping'" in str(refused[0])
    assert "no MCP server" in str(refused[0])


def test_outside_a_run_the_session_is_untouched(
    server: MessagesAPIServer, trace_dir: Path, calls: Path, tmp_path: Path, instrumented: McpInstrumentor
) -> None:
    _script(server)
    answer, results = _run(_params(calls), server.url, tmp_path)
    assert answer == "A-17 has shipped; the refund is done."
    assert len(_real_calls(calls)) == 2
    assert [type(r) for r in results] == [types.CallToolResult, types.CallToolResult]
    assert not trace_dir.exists() or not any(trace_dir.iterdir())  # nothing was recorded


def test_an_mcp_outside_the_tested_range_logs_one_line_and_wraps_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real_version = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.27.0" if name == "mcp" else real_version(name))
    before = ClientSession.call_tool
    instrumentor = McpInstrumentor()
    with caplog.at_level(logging.WARNING, logger="spanreplay"):
        instrumentor.instrument()
    assert ClientSession.call_tool is before
    assert not instrumentor.is_instrumented_by_opentelemetry
    lines = [r.getMessage() for r in caplog.records if r.name == "spanreplay"]
    assert len(lines) == 1
    assert "mcp 1.27.0 is outside the tested range" in lines[0]
    assert "spanreplay[mcp]" in lines[0]


def test_uninstrument_restores_the_session_and_the_transport() -> None:
    import mcp
    import mcp.client.stdio

    originals = (ClientSession.call_tool, ClientSession.initialize, mcp.stdio_client, mcp.client.stdio.stdio_client)
    instrumentor = McpInstrumentor()
    instrumentor.instrument()
    assert ClientSession.call_tool is not originals[0]
    instrumentor.uninstrument()
    assert (ClientSession.call_tool, ClientSession.initialize, mcp.stdio_client, mcp.client.stdio.stdio_client) == (
        originals
    )


def test_a_request_that_reaches_the_replay_transport_is_answered_with_an_error_at_once() -> None:
    from mcp.shared.exceptions import MCPError

    from spanreplay.instrumentation.mcp._offline import offline_streams

    refused: list[MCPError] = []

    async def ping() -> None:
        async with offline_streams() as (read, write), ClientSession(read, write) as session:
            with anyio.fail_after(5):
                try:
                    await session.send_ping()
                except MCPError as error:
                    refused.append(error)

    anyio.run(ping)
    assert len(refused) == 1
    assert "'ping' reached the transport during a replay" in str(refused[0])

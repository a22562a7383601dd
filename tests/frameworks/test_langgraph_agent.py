"""A LangGraph agent recorded against the local Messages API server, replayed with the server gone.

The graph (helpers/langgraph_agent.py) fans out to two probe nodes that run at
once and call a tool each, then lets Claude call two tools at once through a
``ToolNode``. Every tool is a plain ``@langchain_core.tools.tool``: nothing but
``spanreplay.instrument_all()`` records them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage

import spanreplay
from helpers import langgraph_agent as agent
from helpers.messages_api_server import MessagesAPIServer, serve

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(agent.instrumented, name="instrumented")


def _invoke(graph: Any, mode: str, probe: str = "A-17") -> dict[str, Any]:
    if mode == "sync":
        return dict(graph.invoke(agent.question(probe)))
    return dict(asyncio.run(graph.ainvoke(agent.question(probe))))


def _seen(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    """What the agent got, less the ids LangGraph makes afresh on every run."""
    seen: list[tuple[Any, ...]] = []
    for message in result["messages"]:
        if isinstance(message, ToolMessage):
            seen.append((ToolMessage, message.content, message.artifact, message.tool_call_id, message.name))
        else:
            seen.append((type(message), message.content))
    orders = sorted(result["orders"], key=lambda order: order["order_id"])
    return [*seen, ("orders", orders)]


def _record(server: MessagesAPIServer, mode: str) -> tuple[str, dict[str, Any]]:
    server.script(*agent.script())
    graph = agent.build(server.url)
    agent.calls.clear()
    with spanreplay.record(agent="langgraph") as run:
        result = _invoke(graph, mode)
    server.stop()
    assert agent.calls == {"lookup_order": 2, "get_weather": 1, "ship_date": 1}
    assert result["messages"][-1].content == agent.FINAL
    return run.run_id, result


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_agent_replays_offline_with_no_real_tool_call(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None, mode: str
) -> None:
    run_id, recorded = _record(server, mode)
    log = spanreplay.load(trace_dir, run_id)
    tools = sorted((e.key, e.input_json) for e in log if e.kind == "tool")
    assert tools == [
        ("get_weather", b'{"city":"Oslo"}'),
        ("lookup_order", b'{"order_id":"A-17"}'),
        ("lookup_order", b'{"order_id":"B-2"}'),
        ("ship_date", b'{"order_id":"A-17"}'),
    ]
    assert [e.kind for e in log].count("model") == 2

    agent.calls.clear()
    graph = agent.build(server.url)
    with spanreplay.replay(trace_dir, run_id) as replay:
        replayed = _invoke(graph, mode)
    assert replay.outcome == "completed"
    assert agent.calls == {}
    assert replayed["messages"][-1].content == agent.FINAL
    assert _seen(replayed) == _seen(recorded)
    assert [type(m) for m in replayed["messages"]][-4:] == [AIMessage, ToolMessage, ToolMessage, AIMessage]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_changed_tool_argument_diverges_at_that_tool_call(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None, mode: str
) -> None:
    run_id, _ = _record(server, mode)
    recorded = next(e for e in spanreplay.load(trace_dir, run_id) if e.input_json == b'{"order_id":"A-17"}')

    agent.calls.clear()
    graph = agent.build(server.url)
    with pytest.raises(spanreplay.InputChangedError) as caught, spanreplay.replay(trace_dir, run_id):
        _invoke(graph, mode, probe="A-18")
    assert caught.value.seq == recorded.seq
    assert caught.value.call_id == recorded.call_id
    assert '-  "order_id": "A-17"' in caught.value.diff
    assert '+  "order_id": "A-18"' in caught.value.diff
    assert agent.calls == {}

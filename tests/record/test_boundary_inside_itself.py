"""A boundary made inside the same boundary is one step: recorded once, served whole on replay.

A LangChain tool whose body calls the MCP tool of the same name, each instrumented,
would otherwise record the call twice, once nested in the other.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import spanreplay

CALLS: list[str] = []


@spanreplay.tool(name="lookup")
def inner_lookup(order: str) -> dict[str, str]:
    CALLS.append(f"inner {order}")
    return {"order": order, "status": "shipped"}


@spanreplay.tool(name="lookup")
def outer_lookup(order: str) -> dict[str, str]:
    CALLS.append(f"outer {order}")
    return inner_lookup(order)


@spanreplay.tool(name="enrich")
def enrich(order: str) -> dict[str, str]:
    CALLS.append(f"enrich {order}")
    return {**inner_lookup(order), "carrier": "DHL"}


@spanreplay.tool(name="lookup")
async def inner_lookup_async(order: str) -> dict[str, str]:
    CALLS.append(f"inner {order}")
    return {"order": order, "status": "shipped"}


@spanreplay.tool(name="lookup")
async def outer_lookup_async(order: str) -> dict[str, str]:
    CALLS.append(f"outer {order}")
    return await inner_lookup_async(order)


@pytest.fixture(autouse=True)
def _calls() -> None:
    CALLS.clear()


def test_the_same_tool_inside_itself_is_recorded_once_and_replayed_without_running(trace_dir: Path) -> None:
    with spanreplay.record(agent="nest") as run:
        assert outer_lookup("A1") == {"order": "A1", "status": "shipped"}
    assert CALLS == ["outer A1", "inner A1"]  # recording runs the real work, all of it
    log = spanreplay.load(trace_dir, run.run_id)
    assert [(e.kind, e.key, e.call_id) for e in log.events] == [("tool", "lookup", "tool:lookup#0")]

    CALLS.clear()
    with spanreplay.replay(trace_dir, run.run_id) as replayed:
        assert outer_lookup("A1") == {"order": "A1", "status": "shipped"}
    assert CALLS == []
    assert replayed.outcome == "completed"


def test_another_tool_inside_a_tool_is_still_its_own_step(trace_dir: Path) -> None:
    with spanreplay.record(agent="nest") as run:
        enrich("B2")
    log = spanreplay.load(trace_dir, run.run_id)
    assert [(e.key, e.call_id) for e in log.events] == [
        ("enrich", "tool:enrich#0"),
        ("lookup", "tool:enrich#0/tool:lookup#0"),
    ]


def test_async_the_same_tool_inside_itself_is_one_step(trace_dir: Path) -> None:
    async def main() -> dict[str, str]:
        return await outer_lookup_async("C3")

    with spanreplay.record(agent="nest") as run:
        assert asyncio.run(main())["order"] == "C3"
    assert CALLS == ["outer C3", "inner C3"]
    log = spanreplay.load(trace_dir, run.run_id)
    assert [e.call_id for e in log.events] == ["tool:lookup#0"]

    CALLS.clear()
    with spanreplay.replay(trace_dir, run.run_id):
        assert asyncio.run(main())["order"] == "C3"
    assert CALLS == []

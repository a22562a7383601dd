"""Parallel tool calls through langchain's thread pool are branches, whatever order the threads run in.

LangGraph's ``ToolNode`` runs a model response's tool calls with
``ContextThreadPoolExecutor.map``, which runs each in a context it copied up front:
without the adapter's help they carried no branch, took their call ids in the order
the threads ran, and a replay whose threads ran the other way diverged.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.runnables.config import ContextThreadPoolExecutor
from langchain_core.tools import tool

import spanreplay
from spanreplay.instrumentation.langchain import LangChainToolsInstrumentor

ran: list[str] = []
# Which item finishes first: the other waits for it.
first_done = threading.Event()
order: list[str] = []


@pytest.fixture(name="instrumented")
def _instrumented() -> Iterator[None]:
    instrumentor = LangChainToolsInstrumentor()
    instrumentor.instrument()
    ran.clear()
    yield
    instrumentor.uninstrument()


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    ran.append(f"weather {city}")
    return f"sunny in {city}"


@tool
def ship_date(order_id: str) -> str:
    """When an order ships."""
    ran.append(f"ship_date {order_id}")
    return f"{order_id} ships Monday"


def call(item: tuple[str, str]) -> str:
    name, argument = item
    if name != order[0]:
        assert first_done.wait(10), "the item meant to run first never finished"
    result = weather.invoke({"city": argument}) if name == "weather" else ship_date.invoke({"order_id": argument})
    if name == order[0]:
        first_done.set()
    return result


def agent() -> list[str]:
    first_done.clear()
    with ContextThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(call, [("weather", "Oslo"), ("ship_date", "A-17")]))


@pytest.mark.usefixtures("instrumented")
@pytest.mark.parametrize(("recorded_first", "replayed_first"), [("weather", "ship_date"), ("ship_date", "weather")])
def test_map_items_are_branches_and_replay_in_either_order(
    trace_dir: Path, recorded_first: str, replayed_first: str
) -> None:
    order[:] = [recorded_first]
    with spanreplay.record(agent="pool") as run:
        answers = agent()
    assert answers == ["sunny in Oslo", "A-17 ships Monday"]
    log = spanreplay.load(trace_dir, run.run_id)
    call_ids = sorted(e.call_id for e in log.events)
    # One branch per item, numbered in the order the code submitted them, not the threads' order.
    assert call_ids == ["branch:call#0/tool:weather#0", "branch:call#1/tool:ship_date#0"]

    ran.clear()
    order[:] = [replayed_first]
    with spanreplay.replay(trace_dir, run.run_id) as replayed:
        assert agent() == answers
    assert ran == []
    assert replayed.outcome == "completed"


def test_outside_a_run_the_pool_maps_as_it_always_did(instrumented: None) -> None:
    order[:] = ["weather"]
    assert agent() == ["sunny in Oslo", "A-17 ships Monday"]
    assert ran == ["weather Oslo", "ship_date A-17"]

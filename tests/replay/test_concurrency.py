"""Call ids under concurrency: gather, thread pools and nested boundaries replay without false divergence."""

from __future__ import annotations

import asyncio
import contextvars
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay

SEEDS = range(5)


class Delays:
    """Random sleeps in record mode; any real call in replay mode fails the test."""

    def __init__(self) -> None:
        self.rng = random.Random(0)
        self.live = True
        self.lock = threading.Lock()

    def next(self) -> float:
        if not self.live:
            pytest.fail("replay ran the real work of a tool")
        with self.lock:
            return self.rng.uniform(0, 0.004)


DELAYS = Delays()


@pytest.fixture(autouse=True)
def _delays() -> None:
    DELAYS.__init__()  # type: ignore[misc]


@spanreplay.tool
async def fetch(n: int) -> dict[str, Any]:
    await asyncio.sleep(DELAYS.next())
    # A nested boundary: its call id sits under this call's, whatever the interleaving.
    stamp = spanreplay.now()
    await asyncio.sleep(DELAYS.next())
    return {"n": n, "at": stamp.isoformat(), "draw": random.random()}


@spanreplay.tool
def lookup(n: int) -> dict[str, Any]:
    time.sleep(DELAYS.next())
    return {"n": n, "draw": random.random(), "thread": threading.current_thread().name}


@spanreplay.tool
def plan(goal: str) -> list[str]:
    when = spanreplay.now()
    first = spanreplay.random()
    second = spanreplay.random()
    return [goal, when.isoformat(), f"{first:.6f}", f"{second:.6f}"]


async def gather_agent(count: int) -> list[Any]:
    return list(await asyncio.gather(*(fetch(n) for n in range(count))))


def _record_async(count: int) -> tuple[str, list[Any]]:
    async def main() -> tuple[str, list[Any]]:
        async with spanreplay.record(agent="gather") as run:
            return run.run_id, await gather_agent(count)

    return asyncio.run(main())


def _replay_async(trace_dir: Path, run_id: str, count: int) -> tuple[list[Any], str | None]:
    async def main() -> tuple[list[Any], str | None]:
        run = spanreplay.replay(trace_dir, run_id)
        async with run:
            result = await gather_agent(count)
        return result, run.outcome

    return asyncio.run(main())


@pytest.mark.parametrize("seed", SEEDS)
def test_gather_with_random_delays_replays_without_false_divergence(trace_dir: Path, seed: int) -> None:
    DELAYS.rng.seed(seed)
    run_id, recorded = _record_async(6)
    DELAYS.live = False
    replayed, outcome = _replay_async(trace_dir, run_id, 6)
    assert replayed == recorded
    assert outcome == "completed"


def test_gather_takes_call_ids_in_call_order_not_completion_order(trace_dir: Path) -> None:
    DELAYS.rng.seed(3)
    run_id, _ = _record_async(6)
    log = spanreplay.load(trace_dir, run_id)
    tools = {e.call_id: e for e in log if e.kind == "tool"}
    # Each task of the gather is a branch of the run, numbered in the order gather started them.
    assert {cid: e.input for cid, e in tools.items()} == {f"branch:fetch#{n}/tool:fetch#0": {"n": n} for n in range(6)}
    ended = sorted(tools.values(), key=lambda e: e.end_ns)
    assert [e.call_id for e in ended] != sorted(tools), "the delays should have reordered completion"
    nested = sorted(e.call_id for e in log if e.kind == "clock")
    assert nested == sorted(f"branch:fetch#{n}/tool:fetch#0/clock:now#0" for n in range(6))


def test_nested_boundaries_are_served_with_their_parent(trace_dir: Path) -> None:
    with spanreplay.record() as run:
        recorded = plan("ship it")
    log = spanreplay.load(trace_dir, run.run_id)
    assert [e.call_id for e in log] == [
        "tool:plan#0",
        "tool:plan#0/clock:now#0",
        "tool:plan#0/random:random#0",
        "tool:plan#0/random:random#1",
    ]
    assert [e.parent_call_id for e in log] == ["", "tool:plan#0", "tool:plan#0", "tool:plan#0"]
    DELAYS.live = False
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        # plan's body never runs, so its nested clock and random are never asked for;
        # they count as served with plan, not as leftovers.
        assert plan("ship it") == recorded
    assert replaying.outcome == "completed"


def test_nested_spans_are_children_of_their_boundary_span(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with spanreplay.record():
        plan("x")
    spans = {s.name: s for s in memory_exporter.get_finished_spans()}
    parent = spans["execute_tool plan"]
    assert spans["clock now"].parent is not None
    assert spans["clock now"].parent.span_id == parent.context.span_id


def _pool_agent(items: list[int]) -> list[Any]:
    # A plain ThreadPoolExecutor does not copy context variables into its threads.
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(lookup, items))


@pytest.mark.parametrize("seed", SEEDS)
def test_tools_called_from_a_thread_pool_join_the_open_run_and_replay(trace_dir: Path, seed: int) -> None:
    DELAYS.rng.seed(seed)
    items = list(range(8))
    with spanreplay.record(agent="pool") as run:
        recorded = _pool_agent(items)
    log = spanreplay.load(trace_dir, run.run_id)
    assert sorted(e.input["n"] for e in log) == items
    assert {e.run_id for e in log} == {run.run_id}
    assert len({r["thread"] for r in recorded}) > 1, "the pool should have used several threads"
    DELAYS.live = False
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        replayed = _pool_agent(items)
    assert replayed == recorded
    assert replaying.outcome == "completed"


def test_thread_pool_boundaries_are_children_of_the_run_span(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with spanreplay.record(agent="pool"):
        _pool_agent([1, 2, 3])
    spans = memory_exporter.get_finished_spans()
    root = next(s for s in spans if s.name == "invoke_agent pool")
    tools = [s for s in spans if s.name == "execute_tool lookup"]
    assert len(tools) == 3
    assert all(s.parent is not None and s.parent.span_id == root.context.span_id for s in tools)


def test_a_changed_input_in_a_thread_pool_is_still_reported(trace_dir: Path) -> None:
    with spanreplay.record() as run:
        _pool_agent([1, 2])
    DELAYS.live = False
    with pytest.raises(spanreplay.InputChangedError), spanreplay.replay(trace_dir, run.run_id):
        _pool_agent([1, 5])


@spanreplay.tool
def research(topics: list[int]) -> list[Any]:
    # Fan-out from inside a tool: each submit carries this call's context, so the
    # lookups nest under research and are served with it on replay.
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = [pool.submit(contextvars.copy_context().run, lookup, t) for t in topics]
        return [f.result() for f in futures]


def test_a_tool_that_fans_out_to_threads_with_its_context_nests_their_calls(trace_dir: Path) -> None:
    with spanreplay.record() as run:
        recorded = research([1, 2, 3, 4])
    log = spanreplay.load(trace_dir, run.run_id)
    # Each submit is a branch of research, numbered in submit order.
    assert sorted(e.call_id for e in log if e.parent_call_id) == [
        f"tool:research#0/branch:lookup#{n}/tool:lookup#0" for n in range(4)
    ]
    DELAYS.live = False
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        assert research([1, 2, 3, 4]) == recorded
    assert replaying.outcome == "completed"

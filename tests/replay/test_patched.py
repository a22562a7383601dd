"""Version markers: a run recorded with one version of the code replays against the next.

Each test records with the code as it was (``CODE`` says which version runs)
and replays with the code as it is now, the way a deploy changes an agent.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

import spanreplay
from spanreplay import semconv as sc

# Which version of the code runs: "old" knows no marker, "new" asks patched("retry-v2").
CODE = {"version": "old", "real_calls": 0}


@pytest.fixture(autouse=True)
def _old_code() -> None:
    CODE.update(version="old", real_calls=0)


@spanreplay.tool
def fetch(item: str) -> dict[str, Any]:
    CODE["real_calls"] += 1
    return {"item": item, "tries": 1}


@spanreplay.tool
def fetch_with_retry(item: str, tries: int) -> dict[str, Any]:
    CODE["real_calls"] += 1
    return {"item": item, "tries": tries}


def agent() -> dict[str, Any]:
    spanreplay.uuid4()
    if CODE["version"] == "new" and spanreplay.patched("retry-v2"):
        got = fetch_with_retry("apple", 3)
    else:
        got = fetch("apple")
    got["at"] = spanreplay.now().isoformat()
    return got


def record(function: Any = agent) -> str:
    with spanreplay.record(agent="shop") as run:
        function()
    return run.run_id


def replay(trace_dir: Path, run_id: str, function: Any = agent) -> tuple[Any, spanreplay.ReplayingRun]:
    real_before = CODE["real_calls"]
    with spanreplay.replay(trace_dir, run_id) as run:
        result = function()
    assert CODE["real_calls"] == real_before, "replay ran a real tool"
    return result, run


def test_outside_any_run_patched_is_true() -> None:
    assert spanreplay.patched("retry-v2") is True


@pytest.mark.parametrize("bad", ["", "has space", "a/b", "a#0", "-leading", "x" * 201, 42])
def test_a_marker_id_that_cannot_be_a_call_id_segment_is_refused(bad: Any) -> None:
    with pytest.raises(spanreplay.ConfigurationError, match="marker id"):
        spanreplay.patched(bad)


def test_a_run_recorded_before_the_marker_replays_the_old_path_after_the_code_adds_it(trace_dir: Path) -> None:
    run_id = record()
    CODE["version"] = "new"
    result, run = replay(trace_dir, run_id)
    assert run.outcome == "completed"
    assert result["tries"] == 1  # the old path: fetch, not fetch_with_retry
    # patched() took no step: every recorded step was served, no marker was asked of the engine.
    assert run.engine.served == len(run.events) == 3
    assert [e.kind for e in run.events] == [sc.KIND_UUID, sc.KIND_TOOL, sc.KIND_CLOCK]


def test_a_run_recorded_after_the_marker_records_it_as_a_step_and_replays_the_new_path(trace_dir: Path) -> None:
    CODE["version"] = "new"
    run_id = record()
    log = spanreplay.load(trace_dir, run_id)
    assert [(e.seq, e.kind, e.key) for e in log] == [
        (1, sc.KIND_UUID, "uuid4"),
        (2, sc.KIND_MARKER, "retry-v2"),
        (3, sc.KIND_TOOL, "fetch_with_retry"),
        (4, sc.KIND_CLOCK, "now"),
    ]
    marker = log.by_seq(2)
    assert marker is not None
    assert marker.call_id == "marker:retry-v2#0"
    assert marker.output is True
    result, run = replay(trace_dir, run_id)
    assert run.outcome == "completed"
    assert result["tries"] == 3
    assert run.engine.served == 4


def test_old_and_new_runs_replay_side_by_side_against_the_new_code(trace_dir: Path) -> None:
    old = record()
    CODE["version"] = "new"
    new = record()

    def asks_twice() -> tuple[bool, int]:
        result = agent()
        # A second ask in the same run takes no step and gives the first answer again.
        return spanreplay.patched("retry-v2"), result["tries"]

    answers = {}
    for run_id in (old, new, old):
        answers[run_id], run = replay(trace_dir, run_id, asks_twice)
        assert run.outcome == "completed"
    assert answers == {old: (False, 1), new: (True, 3)}


def test_a_marker_asked_for_in_a_loop_is_recorded_once(trace_dir: Path) -> None:
    def looping() -> list[bool]:
        return [spanreplay.patched("batch-v3") for _ in range(5)]

    run_id = record(looping)
    log = spanreplay.load(trace_dir, run_id)
    assert [(e.kind, e.key) for e in log] == [(sc.KIND_MARKER, "batch-v3")]
    result, run = replay(trace_dir, run_id, looping)
    assert result == [True] * 5
    assert run.outcome == "completed"


def test_code_that_no_longer_asks_for_a_recorded_marker_diverges_at_the_marker(trace_dir: Path) -> None:
    CODE["version"] = "new"
    run_id = record()
    CODE["version"] = "old"  # the marker removed, and with it the new path

    def without_marker_but_same_calls() -> None:
        spanreplay.uuid4()
        fetch_with_retry("apple", 3)
        spanreplay.now()

    with pytest.raises(spanreplay.DifferentCallError) as caught, spanreplay.replay(trace_dir, run_id):
        without_marker_but_same_calls()
    assert caught.value.seq == 2
    assert "marker 'retry-v2'" in str(caught.value)


def test_a_marker_reached_at_another_point_than_recorded_diverges(trace_dir: Path) -> None:
    CODE["version"] = "new"
    run_id = record()

    def marker_moved_after_the_tool() -> None:
        spanreplay.uuid4()
        fetch_with_retry("apple", 3)
        spanreplay.patched("retry-v2")
        spanreplay.now()

    with pytest.raises(spanreplay.DifferentCallError), spanreplay.replay(trace_dir, run_id):
        marker_moved_after_the_tool()


def test_a_marker_asked_for_inside_a_tool_is_served_with_the_tool(trace_dir: Path) -> None:
    @spanreplay.tool
    def plan(item: str) -> str:
        return "v2" if spanreplay.patched("plan-v2") else "v1"

    def planner() -> tuple[str, bool]:
        shape = plan("apple")
        return shape, spanreplay.patched("plan-v2")

    run_id = record(planner)
    log = spanreplay.load(trace_dir, run_id)
    assert [e.call_id for e in log] == ["tool:plan#0", "tool:plan#0/marker:plan-v2#0", "marker:plan-v2#0"]
    result, run = replay(trace_dir, run_id, planner)
    assert result == ("v2", True)
    assert run.outcome == "completed"

    # Recorded by code whose tool asked for the marker, replayed by code that asks only at the top:
    # the run holds the marker (True), and nothing is taken for it.
    def top_only() -> tuple[str, bool]:
        return plan("apple"), spanreplay.patched("plan-v2")

    nested_only = record(lambda: plan("apple"))
    result, run = replay(trace_dir, nested_only, top_only)
    assert result == ("v2", True)
    assert run.outcome == "completed"


def test_each_thread_records_its_own_marker_so_the_scheduler_order_does_not_matter(trace_dir: Path) -> None:
    def worker(results: list[bool], start: threading.Event, wait: threading.Event | None) -> None:
        if wait is not None:
            wait.wait(5)
        results.append(spanreplay.patched("fanout-v2"))
        start.set()

    def fan_out(first: int) -> list[bool]:
        results: list[bool] = []
        done = [threading.Event(), threading.Event()]
        # Thread ``first`` asks first; the other waits for it.
        threads = [
            threading.Thread(target=worker, args=(results, done[i], None if i == first else done[first]))
            for i in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(5)
        return results

    run_id = record(lambda: fan_out(0))
    log = spanreplay.load(trace_dir, run_id)
    assert sorted(e.call_id.split("/")[-1] for e in log) == ["marker:fanout-v2#0"] * 2
    # Replayed with the other thread asking first: each still takes its own recorded marker.
    result, run = replay(trace_dir, run_id, lambda: fan_out(1))
    assert result == [True, True]
    assert run.outcome == "completed"


async def fan_out() -> list[Any]:
    async def one(n: int) -> Any:
        if CODE["version"] == "new" and spanreplay.patched("retry-v2"):
            return await asyncio.to_thread(fetch_with_retry, f"i{n}", 3)
        return await asyncio.to_thread(fetch, f"i{n}")

    return list(await asyncio.gather(*(one(n) for n in range(3))))


def test_tasks_of_a_run_recorded_before_the_marker_take_the_old_path(trace_dir: Path) -> None:
    run_id = record(lambda: asyncio.run(fan_out()))
    CODE["version"] = "new"
    result, run = replay(trace_dir, run_id, lambda: asyncio.run(fan_out()))
    assert [got["tries"] for got in result] == [1, 1, 1]
    assert run.outcome == "completed"


def test_tasks_of_a_run_recorded_with_the_marker_each_take_their_own(trace_dir: Path) -> None:
    CODE["version"] = "new"
    run_id = record(lambda: asyncio.run(fan_out()))
    markers = [e for e in spanreplay.load(trace_dir, run_id) if e.kind == sc.KIND_MARKER]
    assert len(markers) == 3
    assert len({e.parent_call_id for e in markers}) == 3
    result, run = replay(trace_dir, run_id, lambda: asyncio.run(fan_out()))
    assert [got["tries"] for got in result] == [3, 3, 3]
    assert run.outcome == "completed"


def test_show_lists_the_marker_as_a_step_of_its_own_kind(trace_dir: Path) -> None:
    from click.testing import CliRunner

    from spanreplay.cli import cli

    CODE["version"] = "new"
    run_id = record()
    shown = CliRunner().invoke(cli, ["show", str(trace_dir), run_id])
    assert shown.exit_code == 0, shown.output
    line = next(line for line in shown.output.splitlines() if "marker:retry-v2#0" in line)
    cells = [cell.strip() for cell in line.split("\u2502")]
    assert cells[:4] == ["2", "marker:retry-v2#0", "marker", "retry-v2"]
    as_json = CliRunner().invoke(cli, ["show", str(trace_dir), run_id, "--json"])
    step = json.loads(as_json.output)["steps"][1]
    assert (step["seq"], step["kind"], step["key"], step["output"]) == (2, "marker", "retry-v2", True)

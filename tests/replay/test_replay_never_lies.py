"""A replay either reproduces the recorded run or says where the code stopped matching it.

Each case here once replayed "successfully" (or ran real work) where the code had
left the recorded path: a divergence the agent caught, calls made out of order, a
changed call hidden by a recorded failure beside it, a boundary outside any run's
context, and parallel branches that got each other's values.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import spanreplay
from spanreplay import semconv as sc
from spanreplay.api.runs import RecordingRun
from spanreplay.cli import cli


class Live:
    """Counts real tool calls; once disarmed, a real call fails the test."""

    def __init__(self) -> None:
        self.armed = True
        self.calls = 0

    def enter(self) -> None:
        if not self.armed:
            pytest.fail("replay ran the real work of a tool")
        self.calls += 1


LIVE = Live()


@pytest.fixture(autouse=True)
def _live() -> None:
    LIVE.__init__()  # type: ignore[misc]


@spanreplay.tool
def lookup(n: int) -> dict[str, Any]:
    LIVE.enter()
    return {"n": n, "draw": random.random()}


@spanreplay.tool
def audit(note: str) -> str:
    LIVE.enter()
    return f"noted {note}"


def record(fn: Callable[[], Any]) -> tuple[str, Any]:
    with spanreplay.record(agent="t") as run:
        result = fn()
    return run.run_id, result


def lookups(numbers: list[int]) -> list[Any]:
    """An agent that hands tool errors to the model as text, as agents do."""
    out: list[Any] = []
    for n in numbers:
        try:
            out.append(lookup(n))
        except Exception as exc:
            out.append(f"tool failed: {exc}")
    return out


# --- 2. a divergence the agent catches is not forgotten ------------------------------


def test_a_caught_divergence_is_raised_again_when_the_replay_ends(trace_dir: Path) -> None:
    run_id, _ = record(lambda: lookups([1, 2, 3]))
    LIVE.armed = False
    run = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(spanreplay.InputChangedError) as caught, run:
        lookups([1, 99, 2, 3])
    error = caught.value
    assert error.seq == 2
    assert error.call_id == "tool:lookup#1"
    assert '"n": 99' in error.diff
    notes = "\n".join(getattr(error, "__notes__", ()))
    assert "caught this error at seq 2 and went on" in notes
    assert "the run then completed" in notes
    assert run.outcome == "diverged"


def test_a_caught_divergence_is_not_reproduced_by_the_recorded_failure_after_it(trace_dir: Path) -> None:
    class Declined(Exception):
        pass

    @spanreplay.tool
    def pay(amount: int) -> str:
        LIVE.enter()
        raise Declined(f"card declined for {amount}")

    def agent(amounts: list[int]) -> None:
        for amount in amounts[:-1]:
            with contextlib.suppress(Exception):
                pay(amount)
        pay(amounts[-1])

    with pytest.raises(Declined), spanreplay.record() as recording:
        agent([10, 20])
    LIVE.armed = False
    run = spanreplay.replay(trace_dir, recording.run_id)
    # The first payment changed and was caught; the second fails as recorded, which is
    # no reproduction: the replay had already left the recorded path.
    with pytest.raises(spanreplay.InputChangedError) as caught, run:
        agent([15, 20])
    assert caught.value.seq == 1
    assert "not count as reproduced" in "\n".join(caught.value.__notes__)
    assert run.outcome == "diverged"


AGENT_SOURCE = """
import spanreplay

NUMBERS = [1, 2, 3]


@spanreplay.tool
def lookup(n):
    raise AssertionError("the real lookup ran on replay")


def main():
    out = []
    for n in NUMBERS:
        try:
            out.append(lookup(n))
        except Exception as exc:
            out.append(str(exc))
    return out
"""


def test_the_cli_exits_3_on_a_caught_divergence_and_says_it_was_caught(
    trace_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"caught_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        AGENT_SOURCE.replace('raise AssertionError("the real lookup ran on replay")', "return {'n': n}")
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = __import__(name)
    run_id, _ = record(module.main)
    (tmp_path / f"{name}.py").write_text(AGENT_SOURCE.replace("NUMBERS = [1, 2, 3]", "NUMBERS = [1, 99, 2, 3]"))
    import sys

    sys.modules.pop(name)
    result = CliRunner().invoke(cli, ["replay", str(trace_dir), run_id, "--entry", f"{name}:main"])
    sys.modules.pop(name, None)
    assert result.exit_code == 3, result.output
    assert "diverged: " in result.stderr
    assert "seq 2" in result.stderr
    assert "caught this error at seq 2 and went on" in result.stderr


# --- 3. order only bends where the recording was concurrent --------------------------


def test_sequential_calls_made_in_another_order_are_a_different_call(trace_dir: Path) -> None:
    run_id, _ = record(lambda: [lookup(1), lookup(2), lookup(3)])
    LIVE.armed = False
    run = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(spanreplay.DifferentCallError) as caught, run:
        [lookup(2), lookup(1), lookup(3)]
    error = caught.value
    assert error.seq == 1
    message = str(error)
    assert "out of the recorded order" in message
    assert '"n":1' in error.recorded if error.recorded else False
    assert '"n":2' in (error.attempted or "")
    assert "seq 2, before the one at seq 1" in message
    assert run.outcome == "diverged"


def test_a_skipped_call_is_named_where_the_next_one_is_made(trace_dir: Path) -> None:
    run_id, _ = record(lambda: [lookup(1), audit("x"), lookup(2)])
    LIVE.armed = False
    with pytest.raises(spanreplay.DifferentCallError) as caught, spanreplay.replay(trace_dir, run_id):
        [lookup(1), lookup(2)]
    # lookup(2) has its recorded call id and input, but audit at seq 2 came before it.
    assert caught.value.seq == 2
    assert "tool 'audit'" in (caught.value.recorded or "")


def test_calls_of_one_gather_may_complete_in_any_order(trace_dir: Path) -> None:
    @spanreplay.tool
    async def fetch(n: int) -> int:
        LIVE.enter()
        await asyncio.sleep(random.uniform(0, 0.003))
        return n * 10

    async def agent(rng: random.Random) -> list[int]:
        async def one(n: int) -> int:
            for _ in range(rng.randrange(4)):
                await asyncio.sleep(0)
            return await fetch(n)

        return list(await asyncio.gather(*(one(n) for n in range(6))))

    with spanreplay.record() as run:
        recorded = asyncio.run(agent(random.Random(0)))
    LIVE.armed = False
    for seed in range(10):
        with spanreplay.replay(trace_dir, run.run_id) as replaying:
            assert asyncio.run(agent(random.Random(seed))) == recorded
        assert replaying.outcome == "completed"


def _record_legacy(monkeypatch: pytest.MonkeyPatch, fn: Callable[[], Any]) -> str:
    """A run written by a release before branch scopes (schema 2): gather calls share a scope."""
    with monkeypatch.context() as patch:
        patch.setattr(RecordingRun, "branches", False)
        patch.setattr(sc, "SCHEMA_VERSION", 2)
        run_id, _ = record(fn)
    return run_id


def test_a_run_recorded_before_branches_still_lets_overlapping_siblings_swap(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    @spanreplay.tool
    async def fetch(n: int) -> int:
        LIVE.enter()
        await asyncio.sleep(0.001 * (5 - n))
        return n

    async def agent(order: list[int]) -> list[int]:
        async def one(n: int, delay: int) -> int:
            for _ in range(delay):
                await asyncio.sleep(0)
            return await fetch(n)

        return list(await asyncio.gather(*(one(n, d) for n, d in zip(range(5), order, strict=True))))

    run_id = _record_legacy(monkeypatch, lambda: asyncio.run(agent([0, 0, 0, 0, 0])))
    log = spanreplay.load(trace_dir, run_id)
    assert sorted(e.call_id for e in log) == [f"tool:fetch#{n}" for n in range(5)]
    LIVE.armed = False
    # Reversed start order: each call takes another's ordinal, and they overlapped when recorded.
    with spanreplay.replay(log) as replaying:
        assert asyncio.run(agent([4, 3, 2, 1, 0])) == [0, 1, 2, 3, 4]
    assert replaying.outcome == "completed"


def test_a_run_recorded_before_branches_still_refuses_to_swap_sequential_calls(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = _record_legacy(monkeypatch, lambda: [lookup(1), lookup(2)])
    LIVE.armed = False
    with (
        pytest.raises(spanreplay.DifferentCallError, match="out of the recorded order"),
        spanreplay.replay(trace_dir, run_id),
    ):
        [lookup(2), lookup(1)]


# --- 4. a changed call in a gather is not hidden by a recorded failure beside it -------


class WeatherDown(Exception):
    pass


def test_a_changed_input_beside_a_recorded_failure_in_a_gather_is_a_divergence(trace_dir: Path) -> None:
    @spanreplay.tool
    async def weather(city: str) -> str:
        LIVE.enter()
        raise WeatherDown(f"no forecast for {city}")

    @spanreplay.tool
    async def hotels(city: str, max_price: int) -> list[str]:
        LIVE.enter()
        await asyncio.sleep(0.002)
        return [f"{city} inn"]

    async def plan(max_price: int) -> Any:
        return await asyncio.gather(weather("Oslo"), hotels("Oslo", max_price=max_price))

    with pytest.raises(WeatherDown), spanreplay.record() as recording:
        asyncio.run(plan(150))
    LIVE.armed = False
    run = spanreplay.replay(trace_dir, recording.run_id)
    with pytest.raises(spanreplay.InputChangedError) as caught, run:
        asyncio.run(plan(100))
    assert '"max_price": 100' in caught.value.diff
    assert run.outcome == "diverged"
    # Unchanged, the same replay reproduces the recorded failure.
    again = spanreplay.replay(trace_dir, recording.run_id)
    with pytest.raises(WeatherDown), again:
        asyncio.run(plan(150))
    assert again.outcome == "reproduced"


# --- 6. fail closed: no run in the context while a replay is open --------------------


class Worker:
    """A thread started before any run: it cannot tell which run its calls belong to."""

    def __init__(self) -> None:
        self.jobs: queue.Queue[Callable[[], Any] | None] = queue.Queue()
        self.results: queue.Queue[Any] = queue.Queue()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while (job := self.jobs.get()) is not None:
            try:
                self.results.put(job())
            except BaseException as exc:
                self.results.put(exc)

    def call(self, job: Callable[[], Any]) -> Any:
        self.jobs.put(job)
        return self.results.get(timeout=10)

    def stop(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=10)


@pytest.fixture
def worker() -> Iterator[Worker]:
    started = Worker()
    yield started
    started.stop()


def in_a_thread(got: list[Any], n: int) -> None:
    thread = threading.Thread(target=lambda: got.append(lookup(n)))
    thread.start()
    thread.join()


def test_a_thread_started_inside_one_of_two_open_replays_is_served_by_it(trace_dir: Path) -> None:
    recorded: list[Any] = []
    first_id, _ = record(lambda: lookup(1))
    second_id, _ = record(lambda: in_a_thread(recorded, 2))
    LIVE.armed = False
    got: list[Any] = []
    outer = spanreplay.replay(trace_dir, first_id)
    with outer:
        lookup(1)
        with spanreplay.replay(trace_dir, second_id) as inner:
            in_a_thread(got, 2)
    assert got == recorded
    assert (outer.outcome, inner.outcome) == ("completed", "completed")


def test_a_boundary_with_no_run_in_its_context_is_refused_while_replays_are_open(
    trace_dir: Path, worker: Worker
) -> None:
    first_id, _ = record(lambda: lookup(1))
    second_id, _ = record(lambda: lookup(2))
    LIVE.armed = False
    outer = spanreplay.replay(trace_dir, first_id)
    inner = spanreplay.replay(trace_dir, second_id)
    refused: list[Any] = []

    def agent() -> None:
        lookup(2)
        refused.append(worker.call(lambda: lookup(1)))  # the worker catches what its job raises

    with pytest.raises(spanreplay.NoRunInContextError) as caught, outer, inner:
        agent()
    assert refused == [caught.value]
    message = str(caught.value)
    assert "tool 'lookup'" in message
    assert "contextvars.copy_context().run" in message
    assert "asyncio.to_thread" in message
    assert inner.outcome == "diverged"
    assert outer.outcome == "diverged"
    assert LIVE.calls == 2  # the two recordings; not one real call on replay


def test_one_open_replay_refuses_a_thread_that_carries_no_run_too(trace_dir: Path, worker: Worker) -> None:
    run_id, _ = record(lambda: lookup(1))
    LIVE.armed = False

    def agent() -> None:
        lookup(1)
        worker.call(lambda: lookup(1))

    with pytest.raises(spanreplay.NoRunInContextError), spanreplay.replay(trace_dir, run_id):
        agent()


def test_recording_runs_such_a_boundary_unrecorded_and_warns_once_naming_it(trace_dir: Path, worker: Worker) -> None:
    got: list[Any] = []

    def agent() -> None:
        got.extend([lookup(1), worker.call(lambda: lookup(5)), worker.call(lambda: lookup(6))])

    with (
        pytest.warns(spanreplay.SpanReplayWarning, match=r"tool 'lookup'.*ran unrecorded") as warned,
        spanreplay.record() as run,
    ):
        agent()
    assert [g["n"] for g in got] == [1, 5, 6]
    assert len([w for w in warned if "ran unrecorded" in str(w.message)]) == 1
    assert LIVE.calls == 3
    assert [e.input for e in spanreplay.load(trace_dir, run.run_id)] == [{"n": 1}]


# --- 8. parallel branches get their own values ---------------------------------------


@spanreplay.tool
async def slow_fetch(i: int) -> int:
    LIVE.enter()
    await asyncio.sleep(random.uniform(0, 0.002))
    return i


async def branches_agent(rng: random.Random, count: int = 8) -> list[tuple[int, str, float]]:
    async def branch(i: int) -> tuple[int, str, float]:
        got = await slow_fetch(i)
        # Code between the boundaries yields a different number of times on every run:
        # the branches reach their draws in a different order each time.
        for _ in range(rng.randrange(6)):
            await asyncio.sleep(0)
        return got, str(spanreplay.uuid4()), spanreplay.random()

    return list(await asyncio.gather(*(branch(i) for i in range(count))))


def test_asyncio_branches_each_get_back_their_own_draws_in_50_trials(trace_dir: Path) -> None:
    with spanreplay.record() as run:
        recorded = asyncio.run(branches_agent(random.Random(1)))
    assert len({uuid for _, uuid, _ in recorded}) == 8
    LIVE.armed = False
    orders = set()
    for seed in range(50):
        with spanreplay.replay(trace_dir, run.run_id) as replaying:
            assert asyncio.run(branches_agent(random.Random(seed))) == recorded
        assert replaying.outcome == "completed"
        orders.add(seed)
    assert len(orders) == 50


def test_taskgroup_and_to_thread_branches_keep_their_values(trace_dir: Path) -> None:
    def draw_in_thread(i: int) -> float:
        time.sleep(random.uniform(0, 0.002))
        return spanreplay.random()

    async def agent(rng: random.Random) -> list[Any]:
        async def branch(i: int) -> Any:
            for _ in range(rng.randrange(5)):
                await asyncio.sleep(0)
            return (spanreplay.uuid4().hex, await asyncio.to_thread(draw_in_thread, i))

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(branch(i)) for i in range(6)]
        return [t.result() for t in tasks]

    with spanreplay.record() as run:
        recorded = asyncio.run(agent(random.Random(0)))
    for seed in range(10):
        with spanreplay.replay(trace_dir, run.run_id) as replaying:
            assert asyncio.run(agent(random.Random(seed))) == recorded
        assert replaying.outcome == "completed"


def _pool_agent(rng: random.Random, submit: str) -> list[float]:
    delays = [rng.uniform(0, 0.002) for _ in range(8)]

    def work(i: int) -> float:
        time.sleep(delays[i])
        return spanreplay.random()

    with ThreadPoolExecutor(max_workers=4) as pool:
        if submit == "copy_context":
            futures = [pool.submit(contextvars.copy_context().run, work, i) for i in range(8)]
        else:
            futures = [pool.submit(work, i) for i in range(8)]
        return [f.result() for f in futures]


@pytest.mark.parametrize("submit", ["copy_context", "plain"])
def test_thread_pool_branches_each_get_back_their_own_draws_in_50_trials(trace_dir: Path, submit: str) -> None:
    with spanreplay.record() as run:
        recorded = _pool_agent(random.Random(0), submit)
    assert len(set(recorded)) == 8
    for seed in range(50):
        with spanreplay.replay(trace_dir, run.run_id) as replaying:
            assert _pool_agent(random.Random(seed), submit) == recorded
        assert replaying.outcome == "completed"


def test_plain_threads_are_branches_numbered_in_start_order(trace_dir: Path) -> None:
    def agent(rng: random.Random) -> dict[int, float]:
        got: dict[int, float] = {}
        delays = [rng.uniform(0, 0.002) for _ in range(5)]

        def work(i: int) -> None:
            time.sleep(delays[i])
            got[i] = spanreplay.random()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return got

    with spanreplay.record() as run:
        recorded = agent(random.Random(0))
    ids = sorted(e.call_id for e in spanreplay.load(trace_dir, run.run_id))
    assert ids == [f"branch:{agent.__qualname__}.<locals>.work#{i}/random:random#0" for i in range(5)]
    for seed in range(20):
        with spanreplay.replay(trace_dir, run.run_id):
            assert agent(random.Random(seed)) == recorded


# --- 9. ignore paths say what they matched -------------------------------------------


def test_an_ignore_path_that_matches_nothing_warns_with_the_paths_that_exist(trace_dir: Path) -> None:
    request = {"body": {"system": "be brief", "messages": [{"role": "user", "content": "hi"}]}}

    def agent() -> Any:
        return spanreplay.boundary("model", "m", request, lambda: {"ok": True})

    run_id, _ = record(agent)
    with pytest.warns(spanreplay.SpanReplayWarning) as warned:
        run = spanreplay.replay(trace_dir, run_id, ignore_paths=["system", "body.messages[*].content"])
    [warning] = [str(w.message) for w in warned]
    assert "'system'" in warning
    assert "at the top level the inputs have: body" in warning
    assert "Did you mean body.system?" in warning
    with run:
        agent()
    assert run.outcome == "completed"

"""Sub-agents on replay: the parent's replay serves each child run's steps where it opened it.

A supervisor whose sub-agent opened a run of its own replays offline with the same
answer and no real call; the child replays alone from its own steps; a change inside
the child diverges at the child's step; parallel sub-agents keep their own runs; a
child the source does not hold fails closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
from pathlib import Path

import orjson
import pytest

import spanreplay
from spanreplay import semconv as sc
from spanreplay.errors import DifferentCallError, InputChangedError, RunNotFoundError, UnsafeTraceValueError

real_calls: list[str] = []


@pytest.fixture(autouse=True)
def fresh_calls() -> None:
    real_calls.clear()


@spanreplay.tool
def search(query: str) -> str:
    real_calls.append(query)
    return f"results for {query} ({spanreplay.uuid4()})"


def researcher(topic: str) -> str:
    with spanreplay.record(agent="researcher"):
        return search(topic) + f" at {spanreplay.random()}"


def supervisor(topic: str = "otters") -> str:
    plan = search("plan")
    found = researcher(topic)
    return f"{plan} | {found} | {spanreplay.random()}"


def recorded(trace_dir: Path, topic: str = "otters") -> tuple[str, str, str]:
    """The supervisor recorded: its run id, its child's run id and its answer."""
    with spanreplay.record(agent="supervisor") as run:
        answer = supervisor(topic)
    (child,) = [r.run_id for r in spanreplay.runs(trace_dir) if r.parent == run.run_id]
    real_calls.clear()
    return run.run_id, child, answer


def test_the_supervisor_replays_its_sub_agent_offline(trace_dir: Path) -> None:
    parent, _, answer = recorded(trace_dir)
    with spanreplay.replay(trace_dir, parent) as run:
        replayed = supervisor()
    assert replayed == answer
    assert real_calls == []
    assert run.outcome == "completed"


def test_the_code_may_open_the_supervisors_own_run_under_replay(trace_dir: Path) -> None:
    parent, _, answer = recorded(trace_dir)
    # The code's own record() joins the replay; the sub-agent inside it is its child.
    with spanreplay.replay(trace_dir, parent) as run, spanreplay.record(agent="supervisor"):
        replayed = supervisor()
    assert (replayed, real_calls, run.outcome) == (answer, [], "completed")


def test_the_parents_trace_file_alone_finds_its_child_beside_it(trace_dir: Path) -> None:
    parent, _, answer = recorded(trace_dir)
    with spanreplay.replay(trace_dir / f"{parent}.jsonl", parent):
        assert supervisor() == answer
    with spanreplay.replay(spanreplay.load(trace_dir, parent)):
        assert supervisor() == answer
    assert real_calls == []


def test_a_sub_agent_replays_alone_from_its_own_steps(trace_dir: Path) -> None:
    _, child, answer = recorded(trace_dir)
    with spanreplay.replay(trace_dir, child) as run:
        alone = researcher("otters")
    assert alone == answer.split(" | ")[1]
    assert (real_calls, run.outcome, run.run_id) == ([], "completed", child)


def test_a_changed_argument_inside_the_child_diverges_at_the_childs_step(trace_dir: Path) -> None:
    parent, child, _ = recorded(trace_dir)
    with pytest.raises(InputChangedError) as raised, spanreplay.replay(trace_dir, parent) as run:
        supervisor("badgers")
    error = raised.value
    assert (error.run_id, error.seq) == (child, 1)
    assert child in str(error)
    assert "seq 1" in str(error)
    assert run.outcome == "diverged"
    assert real_calls == []


def test_a_child_divergence_the_parent_catches_still_ends_the_replay(trace_dir: Path) -> None:
    parent, child, _ = recorded(trace_dir)

    def forgiving() -> str:
        plan = search("plan")
        with contextlib.suppress(InputChangedError):
            researcher("badgers")
        return plan

    with pytest.raises(InputChangedError) as raised, spanreplay.replay(trace_dir, parent) as run:
        forgiving()
    assert raised.value.run_id == child
    assert run.outcome == "diverged"


def test_a_sub_agent_the_recording_did_not_open_diverges_in_the_parent(trace_dir: Path) -> None:
    parent, _, _ = recorded(trace_dir)

    def twice() -> None:
        search("plan")
        researcher("otters")
        researcher("otters")

    with pytest.raises(DifferentCallError) as raised, spanreplay.replay(trace_dir, parent):
        twice()
    assert raised.value.run_id == parent
    assert "agent:researcher#1" in str(raised.value)


def test_a_child_missing_from_the_source_fails_closed(trace_dir: Path) -> None:
    parent, child, _ = recorded(trace_dir)
    (trace_dir / f"{child}.jsonl").unlink()
    with pytest.raises(RunNotFoundError) as raised, spanreplay.replay(trace_dir, parent) as run:
        supervisor()
    message = str(raised.value)
    assert child in message
    assert str(trace_dir) in message
    assert raised.value.run_id == child
    assert real_calls == []
    assert run.outcome == "diverged"


@spanreplay.agent
async def scout(topic: str) -> str:
    await asyncio.sleep(0.002 if topic == "slow" else 0)
    return f"{search(topic)} {spanreplay.random()}"


@spanreplay.agent(name="worker")
def work(topic: str, out: dict[str, str]) -> None:
    out[topic] = f"{search(topic)} {spanreplay.random()}"


def parallel() -> tuple[list[str], dict[str, str]]:
    async def gathered() -> list[str]:
        return list(await asyncio.gather(scout("slow"), scout("fast")))

    scouted = asyncio.run(gathered())
    out: dict[str, str] = {}
    threads = [threading.Thread(target=work, args=(topic, out)) for topic in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return scouted, out


def test_parallel_sub_agents_replay_each_from_its_own_run(trace_dir: Path) -> None:
    with spanreplay.record(agent="supervisor") as recording:
        answer = parallel()
    children = [r for r in spanreplay.runs(trace_dir) if r.parent == recording.run_id]
    assert len(children) == 4
    real_calls.clear()
    with spanreplay.replay(trace_dir, recording.run_id) as run:
        replayed = parallel()
    assert replayed == answer
    assert real_calls == []
    assert run.outcome == "completed"
    # The parent holds one opening per sub-agent, each in its own branch.
    opened = [e for e in spanreplay.load(trace_dir, recording.run_id).events if e.kind == sc.KIND_AGENT]
    assert len({e.call_id for e in opened}) == 4


@pytest.mark.parametrize(
    ("named", "refused"),
    [
        ("../../outside/run_x", UnsafeTraceValueError),
        ("/etc/passwd", UnsafeTraceValueError),
        ("run_x/../../y", UnsafeTraceValueError),
        ("", RunNotFoundError),
        (7, RunNotFoundError),
    ],
)
def test_a_child_run_id_that_cannot_name_a_file_is_refused_before_any_file_is_read(
    trace_dir: Path, named: object, refused: type[Exception]
) -> None:
    # The parent's sub-agent step names the child it opened; a trace edited to name a path
    # outside the trace folder (or no run id at all) is refused, never followed.
    parent, _, _ = recorded(trace_dir)
    log = spanreplay.load(trace_dir, parent)
    (step,) = [e for e in log.events if e.kind == sc.KIND_AGENT]
    hostile = dataclasses.replace(step, output_json=orjson.dumps({"run_id": named}))
    edited = spanreplay.EventLog(log.run, tuple(hostile if e is step else e for e in log.events))
    with pytest.raises(refused) as raised, spanreplay.replay(edited) as run:
        supervisor()
    message = str(raised.value)
    if refused is UnsafeTraceValueError:
        assert f"the sub-agent step of run {parent}" in message
        assert "cannot name a trace file" in message
    else:
        assert "names no child run" in message
    assert real_calls == []
    assert run.outcome == "diverged"

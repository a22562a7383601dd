"""``fork()``: serve a recorded run's steps up to a point, then run the real work as a new recorded run."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import spanreplay
from helpers.demo_runs import TRACKED, demo_sdk_restored, record_demo
from spanreplay import _demo


@pytest.fixture(autouse=True)
def sdk_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from demo_sdk_restored(monkeypatch)


def _served_from(log: spanreplay.EventLog) -> dict[int, str | None]:
    return {e.seq: e.attributes.get("spanreplay.served_from") for e in log}


def test_a_fork_at_a_step_records_a_new_run_that_names_its_parent_and_replays_on_its_own(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = record_demo(monkeypatch, failure_rate=1.0)
    monkeypatch.setattr(_demo, "FAILURE_RATE", 0.0)  # the carrier answers this time
    with _demo.local_api() as server, spanreplay.fork(trace_dir, parent, at=6) as run:
        answer = asyncio.run(_demo.main())
    assert answer.startswith("Order A-17 is shipped, last scanned at Lyon hub")
    assert run.forked_at == 6
    # Steps 1 to 5 were served: only the tracking tool ran, and one model call (the last) was sent.
    assert dict(_demo.real_calls) == {"track_shipment": 1}
    assert len(server.message_requests) == 1

    log = spanreplay.load(trace_dir, run.run_id)
    assert run.run_id != parent
    assert log.run.forked_from == parent
    assert log.run.forked_at == 6
    assert log.run.status == "ok"
    assert _served_from(log) == {1: parent, 2: parent, 3: parent, 4: parent, 5: parent, 6: None, 7: None, 8: None}
    parent_log = spanreplay.load(trace_dir, parent)
    for seq in range(1, 6):
        forked, recorded = log.by_seq(seq), parent_log.by_seq(seq)
        assert forked is not None
        assert recorded is not None
        assert (forked.call_id, forked.input, forked.output) == (recorded.call_id, recorded.input, recorded.output)

    # The new run replays on its own, with no server and no real call.
    _demo.real_calls.clear()
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        assert asyncio.run(_demo.main()) == answer
    assert replaying.outcome == "completed"
    assert not _demo.real_calls


def test_a_fork_without_a_point_goes_live_where_the_code_stops_matching(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = record_demo(monkeypatch, failure_rate=1.0)
    edited = {**TRACKED, "last_scan": "Paris hub"}
    with _demo.local_api() as server, spanreplay.fork(trace_dir, parent, overrides={6: edited}) as run:
        answer = asyncio.run(_demo.main())
    # The edited tool result changed the next model call: the fork went live there.
    assert "Paris hub" in answer
    assert run.forked_at == 8
    assert not _demo.real_calls
    assert len(server.message_requests) == 1
    log = spanreplay.load(trace_dir, run.run_id)
    assert log.run.forked_at == 8
    # Seq 7 (the random draw inside the tool) was served with the tool, and is written as served too.
    assert _served_from(log) == dict.fromkeys(range(1, 8), parent) | {8: None}
    step = log.by_seq(6)
    assert step is not None
    assert step.output == edited
    assert step.error is None

    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        assert asyncio.run(_demo.main()) == answer
    assert replaying.outcome == "completed"


# --- a small agent of plain tools ----------------------------------------------------------------


@dataclasses.dataclass
class Order:
    id: str
    status: str


LIVE: list[str] = []


@spanreplay.tool
def find_order(order_id: str) -> Order:
    LIVE.append("find_order")
    return Order(order_id, "shipped")


@spanreplay.tool
def notify(status: str) -> str:
    LIVE.append("notify")
    return f"told the customer: {status}"


def agent(order_id: str = "A-17") -> str:
    return notify(find_order(order_id).status)


def agent_opening_its_own_run() -> str:
    with spanreplay.record(agent="own"):
        return agent()


def _record(trace_dir: Path) -> str:
    with spanreplay.record(agent="orders") as run:
        agent()
    LIVE.clear()
    return run.run_id


def test_a_fork_serves_typed_outputs_and_runs_the_rest(trace_dir: Path) -> None:
    parent = _record(trace_dir)
    with spanreplay.fork(trace_dir, parent, at=2, agent="orders-fork") as run:
        assert agent() == "told the customer: shipped"
    assert LIVE == ["notify"]
    log = spanreplay.load(trace_dir, run.run_id)
    assert log.run.agent == "orders-fork"
    assert [(e.seq, e.key) for e in log] == [(1, "find_order"), (2, "notify")]
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        agent()
    assert replaying.outcome == "completed"


def test_record_inside_a_fork_joins_it(trace_dir: Path) -> None:
    parent = _record(trace_dir)
    with spanreplay.fork(trace_dir, parent, at=2) as run:
        agent_opening_its_own_run()
    assert LIVE == ["notify"]
    assert [run_summary.run_id for run_summary in spanreplay.runs(trace_dir)].count(run.run_id) == 1
    assert len(spanreplay.runs(trace_dir)) == 2  # the parent and the fork: no run of its own for the inner record()


def test_a_call_before_the_fork_point_that_does_not_match_diverges(trace_dir: Path) -> None:
    parent = _record(trace_dir)
    run = spanreplay.fork(trace_dir, parent, at=2)
    with pytest.raises(spanreplay.InputChangedError) as caught, run:
        agent("B-2")
    assert caught.value.seq == 1
    assert any("goes live at seq 2" in note for note in caught.value.__notes__)
    assert LIVE == []  # nothing ran live before the fork point
    # The new run holds the refused call with the divergence as its error, and ends with it.
    log = spanreplay.load(trace_dir, run.run_id)
    (step,) = log.events
    assert (step.seq, step.key, step.input) == (1, "find_order", {"order_id": "B-2"})
    assert step.error is not None
    assert step.error.type_name == "InputChangedError"
    assert log.run.status == "error"


def test_a_divergence_the_code_catches_still_ends_the_fork(trace_dir: Path) -> None:
    parent = _record(trace_dir)

    def forgiving() -> None:
        with contextlib.suppress(spanreplay.InputChangedError):
            find_order("B-2")

    with pytest.raises(spanreplay.InputChangedError), spanreplay.fork(trace_dir, parent, at=2) as run:
        forgiving()
    # The new run is recorded as ended by the divergence, not as a run that went well.
    log = spanreplay.load(trace_dir, run.run_id)
    assert log.run.status == "error"
    assert log.run.error is not None
    assert log.run.error.type_name == "InputChangedError"


def test_an_override_is_recorded_masked_in_the_fork(trace_dir: Path) -> None:
    parent = _record(trace_dir)
    secret = "call bob.jones@example.com"
    with spanreplay.fork(trace_dir, parent, at=2, overrides={1: {"id": "A-17", "status": secret}}) as run:
        assert agent() == f"told the customer: {secret}"  # served as given: the code sees the value
    text = "".join(path.read_text() for path in trace_dir.glob("*.jsonl*"))
    assert "bob.jones@example.com" not in text
    log = spanreplay.load(trace_dir, run.run_id)
    step = log.by_seq(1)
    assert step is not None
    assert "bob.jones" not in str(step.output)


@pytest.mark.parametrize(
    ("at", "overrides", "message"),
    [
        (0, None, r"fork\(at=0\) is not a step .* from 1 to 3"),
        (4, None, r"fork\(at=4\) is not a step"),
        (True, None, r"fork\(at=True\)"),
        (1, {2: "x"}, r"override of seq 2 .* at or after the fork point \(at=1\)"),
    ],
)
def test_bad_fork_points_are_refused(trace_dir: Path, at: Any, overrides: Any, message: str) -> None:
    parent = _record(trace_dir)
    with pytest.raises(spanreplay.ConfigurationError, match=message):
        spanreplay.fork(trace_dir, parent, at=at, overrides=overrides)


def test_a_fork_after_the_last_step_serves_every_step(trace_dir: Path) -> None:
    parent = _record(trace_dir)
    with spanreplay.fork(trace_dir, parent, at=3, allow_effects=True) as run:
        agent()
    assert LIVE == []
    assert run.forked_at is None
    log = spanreplay.load(trace_dir, run.run_id)
    assert log.run.forked_from == parent
    assert log.run.forked_at is None

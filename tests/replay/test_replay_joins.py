"""Replay of runs whose code opens its own run, and of calls cancelled while recording."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import spanreplay

REAL_CALLS: list[str] = []


@spanreplay.tool
async def slow_lookup(order_id: str) -> dict[str, str]:
    REAL_CALLS.append("slow_lookup")
    await asyncio.sleep(0.2)
    return {"order": order_id}


@spanreplay.tool
async def failing_refund(order_id: str) -> None:
    REAL_CALLS.append("failing_refund")
    await asyncio.sleep(0.01)
    raise ConnectionError(f"refund service refused {order_id}")


async def gathered_agent() -> None:
    await asyncio.gather(slow_lookup("A-1"), failing_refund("A-1"))


def test_a_call_cancelled_by_a_failing_sibling_replays_to_the_same_failure(trace_dir: Path) -> None:
    with pytest.raises(ConnectionError), spanreplay.record(agent="gather") as run:
        asyncio.run(gathered_agent())
    log = spanreplay.load(trace_dir, run.run_id)
    slow = next(e for e in log if e.key == "slow_lookup")
    assert slow.error is not None
    assert slow.error.type_name == "CancelledError"

    REAL_CALLS.clear()
    with pytest.raises(ConnectionError, match="refund service refused A-1"), spanreplay.replay(log) as replaying:
        asyncio.run(gathered_agent())
    assert replaying.outcome == "reproduced"
    assert REAL_CALLS == []


@spanreplay.tool
def charge(amount: int) -> str:
    REAL_CALLS.append("charge")
    return f"charged {amount}"


def agent_that_opens_its_own_run() -> str:
    with spanreplay.record(agent="billing") as run:
        assert run.mode is spanreplay.Mode.REPLAY or REAL_CALLS == []
        return charge(42)


def test_record_inside_an_open_replay_joins_it_and_runs_no_real_work(trace_dir: Path) -> None:
    REAL_CALLS.clear()
    assert agent_that_opens_its_own_run() == "charged 42"
    assert REAL_CALLS == ["charge"]
    (recorded,) = spanreplay.runs(trace_dir)

    REAL_CALLS.clear()
    with spanreplay.replay(trace_dir, recorded.run_id) as replaying:
        assert agent_that_opens_its_own_run() == "charged 42"
    assert REAL_CALLS == []
    assert replaying.outcome == "completed"
    assert len(spanreplay.runs(trace_dir)) == 1  # the joined run wrote nothing

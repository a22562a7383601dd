"""A divergence raised inside a task group ends the replay as that divergence, not as "caught".

anyio and asyncio's TaskGroup wrap what a task raised in an ExceptionGroup; the code
did not catch the divergence, so the replay must not say it did.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

import spanreplay
from spanreplay.errors import InputChangedError


@spanreplay.tool(name="fetch")
async def fetch(city: str) -> str:
    return f"weather in {city}"


async def agent(cities: list[str]) -> list[str]:
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(fetch(city)) for city in cities]
    return [task.result() for task in tasks]


def test_a_divergence_inside_a_task_group_is_not_reported_as_caught(trace_dir: Path) -> None:
    with spanreplay.record(agent="group") as run:
        asyncio.run(agent(["Paris"]))

    with pytest.raises(InputChangedError) as raised, spanreplay.replay(trace_dir, run.run_id) as replayed:
        asyncio.run(agent(["Lyon"]))
    divergence = raised.value
    # The replay ends with the divergence itself; the task group that carried it is its context.
    assert isinstance(divergence.__context__, ExceptionGroup)
    assert divergence.__context__.exceptions == (divergence,)
    assert replayed.outcome == "diverged"
    notes = getattr(divergence, "__notes__", [])
    assert not any("caught this error" in note for note in notes), notes


def test_a_divergence_the_code_does_catch_is_still_said_to_be_caught(trace_dir: Path) -> None:
    with spanreplay.record(agent="group") as run:
        asyncio.run(agent(["Paris"]))

    async def swallowing() -> None:
        with contextlib.suppress(ExceptionGroup):
            await agent(["Lyon"])

    with pytest.raises(InputChangedError) as raised, spanreplay.replay(trace_dir, run.run_id):
        asyncio.run(swallowing())
    assert any("caught this error" in note for note in raised.value.__notes__)

"""A new SDK instrumented through the boundary contract alone: ``BoundaryCall`` and ``Run.call()``.

The toy SDK below is what any client library looks like to spanreplay: a method
that reaches the world. Its instrumentation asks the current run to take the call
and never asks which kind of run it is in; the same code records, replays offline
and diverges when the code asks for something else.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import spanreplay
from spanreplay.errors import InputChangedError


class ToyClient:
    """The SDK: ``fetch(url)`` reaches the network; here it counts its real calls."""

    def __init__(self) -> None:
        self.real_calls: list[str] = []

    def fetch(self, url: str) -> dict[str, Any]:
        self.real_calls.append(url)
        return {"url": url, "status": 200, "body": f"page at {url}"}

    async def fetch_async(self, url: str) -> dict[str, Any]:
        self.real_calls.append(url)
        await asyncio.sleep(0)
        return {"url": url, "status": 200, "body": f"page at {url}"}


def instrument(client: ToyClient) -> None:
    """The whole instrumentation: each fetch becomes a boundary of kind ``http``, keyed by host."""
    fetch, fetch_async = client.fetch, client.fetch_async

    def call(url: str, work: Callable[[], Any]) -> spanreplay.BoundaryCall:
        return spanreplay.BoundaryCall(
            kind="http", key=url.split("/")[2], input={"url": url}, function=work, attributes={"toy.url": url}
        )

    def traced_fetch(url: str) -> dict[str, Any]:
        run = spanreplay.current_run()
        if run is None:
            return fetch(url)
        return run.call(call(url, functools.partial(fetch, url)))  # type: ignore[no-any-return]

    async def traced_fetch_async(url: str) -> dict[str, Any]:
        run = spanreplay.current_run()
        if run is None:
            return await fetch_async(url)
        return await run.call_async(call(url, functools.partial(fetch_async, url)))  # type: ignore[no-any-return]

    client.fetch = traced_fetch  # type: ignore[method-assign]
    client.fetch_async = traced_fetch_async  # type: ignore[method-assign]


def agent(client: ToyClient, page: str) -> list[dict[str, Any]]:
    first = client.fetch(f"https://example.test/{page}")
    second = asyncio.run(client.fetch_async("https://other.test/about"))
    return [first, second]


def _recorded(trace_dir: Path) -> tuple[str, list[dict[str, Any]]]:
    client = ToyClient()
    instrument(client)
    with spanreplay.record(agent="toy") as run:
        pages = agent(client, "docs")
    assert client.real_calls == ["https://example.test/docs", "https://other.test/about"]
    return run.run_id, pages


def test_a_toy_sdk_records_its_calls_through_the_contract(trace_dir: Path) -> None:
    run_id, _ = _recorded(trace_dir)
    log = spanreplay.load(trace_dir, run_id)
    assert [(e.kind, e.key, e.input) for e in log] == [
        ("http", "example.test", {"url": "https://example.test/docs"}),
        ("http", "other.test", {"url": "https://other.test/about"}),
    ]
    assert log.events[0].output == {
        "url": "https://example.test/docs",
        "status": 200,
        "body": "page at https://example.test/docs",
    }
    assert log.events[1].awaited


def test_a_toy_sdk_replays_offline_without_running_the_real_function(trace_dir: Path) -> None:
    run_id, recorded = _recorded(trace_dir)
    client = ToyClient()
    instrument(client)
    with spanreplay.replay(trace_dir, run_id) as replaying:
        pages = agent(client, "docs")
    assert pages == recorded
    assert client.real_calls == []  # served from the recording: the SDK never ran
    assert replaying.outcome == "completed"


def test_a_toy_sdk_diverges_when_the_argument_changes(trace_dir: Path) -> None:
    run_id, _ = _recorded(trace_dir)
    client = ToyClient()
    instrument(client)
    replaying = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(InputChangedError) as raised, replaying:
        agent(client, "pricing")
    assert raised.value.seq == 1
    assert "pricing" in str(raised.value)
    assert client.real_calls == []
    assert replaying.outcome == "diverged"

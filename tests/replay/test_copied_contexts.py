"""Branches survive executors that run work in a copied context, and a recording that cannot
tell concurrent siblings apart says so when it is made.

LangGraph runs parallel nodes by submitting ``ctx.run`` to langchain's
``ContextThreadPoolExecutor``, which wraps it again as ``partial(copy_context().run,
ctx.run, fn)``: the work sees only the innermost context. The executors here do the
same with the standard library alone.
"""

from __future__ import annotations

import contextvars
import functools
import random
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import spanreplay
from spanreplay import SpanReplayWarning

CITIES = {"research": "Paris", "critic": "Lyon", "editor": "Nice"}


class CopyingExecutor(ThreadPoolExecutor):
    """What langchain's ContextThreadPoolExecutor does: every job runs in a copy of the submitter's context."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        return super().submit(functools.partial(contextvars.copy_context().run, fn, *args, **kwargs))


class Delays:
    def __init__(self) -> None:
        self.rng = random.Random(0)
        self.live = True
        self.lock = threading.Lock()

    def sleep(self) -> None:
        if not self.live:
            pytest.fail("replay ran the real work of a tool")
        with self.lock:
            delay = self.rng.uniform(0, 0.003)
        time.sleep(delay)


DELAYS = Delays()


@pytest.fixture(autouse=True)
def _delays() -> None:
    DELAYS.__init__()  # type: ignore[misc]


@spanreplay.tool
def ask(prompt: str) -> str:
    DELAYS.sleep()
    return f"{prompt} -> {random.random():.6f}"


def node(name: str) -> tuple[str, float]:
    return ask(f"{name}: {CITIES[name]}"), spanreplay.random()


def _submit(pool: ThreadPoolExecutor, how: str, name: str) -> Future[Any]:
    """One parallel node, submitted the way ``how`` names."""
    if how == "single":  # copy_context().run, as asyncio.to_thread does
        return pool.submit(contextvars.copy_context().run, node, name)
    if how == "double":  # LangGraph on langchain's executor: ctx.run, wrapped again by the executor
        return pool.submit(contextvars.copy_context().run, node, name)
    if how == "partial":  # the context's run inside a partial, itself in a partial
        inner = functools.partial(contextvars.copy_context().run, node)
        return pool.submit(functools.partial(inner, name))
    raise AssertionError(how)


def graph(how: str, seed: int) -> list[tuple[str, float]]:
    DELAYS.rng.seed(seed)
    executor = CopyingExecutor if how in ("double", "partial") else ThreadPoolExecutor
    with executor(max_workers=3) as pool:
        futures = [_submit(pool, how, name) for name in CITIES]
        return [f.result() for f in futures]


@pytest.mark.parametrize("how", ["single", "double", "partial"])
def test_parallel_nodes_in_copied_contexts_are_branches_and_replay_every_time(trace_dir: Path, how: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpanReplayWarning)
        with spanreplay.record(agent="graph") as run:
            recorded = graph(how, 0)
    log = spanreplay.load(trace_dir, run.run_id)
    tools = sorted(e.call_id for e in log if e.kind == "tool")
    assert tools == [f"branch:node#{n}/tool:ask#0" for n in range(3)]
    assert not log.run.gaps
    DELAYS.live = False
    for seed in range(6):
        with spanreplay.replay(trace_dir, run.run_id) as replaying:
            assert graph(how, seed + 1) == recorded
        assert replaying.outcome == "completed"


def test_langchain_context_thread_pool_executor_keeps_branches(trace_dir: Path) -> None:
    config = pytest.importorskip("langchain_core.runnables.config")

    def agent() -> list[Any]:
        with config.ContextThreadPoolExecutor(max_workers=3) as pool:
            futures = [pool.submit(contextvars.copy_context().run, node, name) for name in CITIES]
            return [f.result() for f in futures]

    with spanreplay.record() as run:
        recorded = agent()
    assert sorted(e.call_id for e in spanreplay.load(trace_dir, run.run_id) if e.kind == "tool") == [
        f"branch:node#{n}/tool:ask#0" for n in range(3)
    ]
    DELAYS.live = False
    for _ in range(3):
        with spanreplay.replay(trace_dir, run.run_id) as replaying:
            assert agent() == recorded
        assert replaying.outcome == "completed"

"""replay(guard=True): direct clock and random reads in a replayed run, named by file and line."""

from __future__ import annotations

import asyncio
import cProfile
import logging
import profile
import random
import sys
import threading
import time
import uuid
import warnings
from collections.abc import Callable
from datetime import date
from datetime import datetime as dt
from pathlib import Path
from random import choice

import pytest

import spanreplay
from spanreplay import DeterminismWarning, SpanReplayWarning

SOURCE = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> int:
    """The line of this file that ends with ``# read: <marker>``."""
    (line,) = [number for number, text in enumerate(SOURCE, start=1) if text.endswith(f"# read: {marker}")]
    return line


@spanreplay.tool
def lookup(order: str) -> str:
    return f"{order}: shipped"


def _record(trace_dir: Path) -> str:
    with spanreplay.record(agent="guarded") as run:
        lookup("A-17")
    return run.run_id


def replay_guarded(trace_dir: Path, run_id: str, body: Callable[[], object], *, served: bool = True) -> None:
    """Replay the recorded ``lookup("A-17")`` (unless ``served`` is False), then ``body``, guarded."""
    with spanreplay.replay(trace_dir, run_id, guard=True):
        if served:
            lookup("A-17")
        body()


def direct_reads() -> list[object]:
    values: list[object] = []
    for _ in range(2):  # twice: still one warning per call site
        values.append(time.time())  # read: time.time
        values.append(dt.now())  # read: datetime.now
        values.append(date.today())  # read: date.today
        values.append(choice([1, 2, 3]))  # read: random.choice
        values.append(random.random())  # read: random.random
        values.append(uuid.uuid4())  # read: uuid.uuid4
    return values


def _reported(caught: list[warnings.WarningMessage]) -> dict[int, str]:
    assert all(issubclass(w.category, DeterminismWarning) for w in caught)
    assert all(w.filename == __file__ for w in caught)
    return {w.lineno: str(w.message) for w in caught}


def test_guard_warns_once_per_call_site_with_file_and_line(trace_dir: Path) -> None:
    run_id = _record(trace_dir)

    with pytest.warns(DeterminismWarning) as caught:
        replay_guarded(trace_dir, run_id, direct_reads)

    reported = _reported(caught.list)
    markers = ["time.time", "datetime.now", "date.today", "random.choice", "random.random", "uuid.uuid4"]
    assert sorted(reported) == sorted(line_of(marker) for marker in markers)
    assert len(caught.list) == len(markers)
    message = reported[line_of("datetime.now")]
    assert message.startswith(f"{__file__}:{line_of('datetime.now')}: datetime.now() read the clock directly ")
    assert f"during the replay of run {run_id}" in message
    assert message.endswith("Use spanreplay.now() (lint rule SR101).")
    assert "Use spanreplay.random() (lint rule SR201)." in reported[line_of("random.choice")]
    assert issubclass(DeterminismWarning, SpanReplayWarning)


def test_without_guard_a_replay_says_nothing(trace_dir: Path) -> None:
    run_id = _record(trace_dir)

    with warnings.catch_warnings(record=True) as caught, spanreplay.replay(trace_dir, run_id):
        warnings.simplefilter("always")
        lookup("A-17")
        direct_reads()

    assert caught == []


def test_recorded_reads_seeded_generators_and_the_standard_library_are_not_reported(trace_dir: Path) -> None:
    with spanreplay.record(agent="guarded") as run:
        lookup("A-17")
        spanreplay.now()
        spanreplay.random()
        spanreplay.uuid4()

    with warnings.catch_warnings(record=True) as caught, spanreplay.replay(trace_dir, run.run_id, guard=True):
        warnings.simplefilter("always")
        lookup("A-17")
        spanreplay.now()
        spanreplay.random()
        spanreplay.uuid4()
        random.Random(7).choice([1, 2])
        random.Random(7).random()
        logging.LogRecord("x", logging.INFO, __file__, 1, "made with time.time() inside logging", None, None)
        start = time.perf_counter()
        time.monotonic() - start

    assert [str(w.message) for w in caught] == []


def test_hooks_are_restored_when_the_replay_fails(trace_dir: Path) -> None:
    run_id = _record(trace_dir)
    before = (sys.getprofile(), threading.getprofile())

    def fails() -> None:
        time.time()  # read: before the error
        raise ValueError("the code changed")

    with pytest.warns(DeterminismWarning) as caught, pytest.raises(spanreplay.OutcomeChangedError):
        replay_guarded(trace_dir, run_id, fails)

    assert (sys.getprofile(), threading.getprofile()) == before
    assert sorted(_reported(caught.list)) == [line_of("before the error")]
    with warnings.catch_warnings(record=True) as after:
        warnings.simplefilter("always")
        time.time()
    assert after == []


def test_a_read_that_makes_the_replay_diverge_is_still_named(trace_dir: Path) -> None:
    run_id = _record(trace_dir)

    def diverges() -> None:
        lookup(f"A-{int(time.time())}")  # read: diverges

    with pytest.warns(DeterminismWarning) as caught, pytest.raises(spanreplay.InputChangedError):
        replay_guarded(trace_dir, run_id, diverges, served=False)

    assert sorted(_reported(caught.list)) == [line_of("diverges")]


def test_a_thread_started_in_the_run_is_watched(trace_dir: Path) -> None:
    run_id = _record(trace_dir)

    def worker() -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # utcnow, from Python 3.12
            dt.utcnow()  # read: in a thread

    def in_a_thread() -> None:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()

    with pytest.warns(DeterminismWarning) as caught:
        replay_guarded(trace_dir, run_id, in_a_thread)

    assert sorted(_reported(caught.list)) == [line_of("in a thread")]


def test_an_async_run_is_watched(trace_dir: Path) -> None:
    run_id = _record(trace_dir)

    async def main() -> None:
        async with spanreplay.replay(trace_dir, run_id, guard=True):
            lookup("A-17")
            await asyncio.sleep(0)
            time.time_ns()  # read: in a coroutine

    with pytest.warns(DeterminismWarning) as caught:
        asyncio.run(main())

    assert sorted(_reported(caught.list)) == [line_of("in a coroutine")]


def test_a_running_profiler_is_left_alone_and_the_run_is_said_to_be_unguarded(trace_dir: Path) -> None:
    # profile.Profile holds sys.setprofile on every Python (as debuggers do): the guard
    # cannot share it, so it leaves the profiler on and says the run goes unwatched.
    run_id = _record(trace_dir)
    profiler = profile.Profile()
    still_on: list[object] = []

    def after_the_boundary() -> None:
        time.time()

    def guarded() -> None:
        with pytest.warns(DeterminismWarning, match="a profiler is running") as caught:
            replay_guarded(trace_dir, run_id, after_the_boundary)
        still_on.append(sys.getprofile())
        assert len(caught.list) == 1

    profiler.runcall(guarded)

    assert still_on == [profiler.dispatcher]
    profiler.create_stats()
    assert "after_the_boundary" in {name for _, _, name in profiler.stats}


@pytest.mark.skipif(sys.version_info < (3, 12), reason="cProfile holds sys.setprofile before Python 3.12")
def test_cprofile_on_sys_monitoring_and_the_guard_both_watch_the_run(trace_dir: Path) -> None:
    # From Python 3.12 cProfile watches through sys.monitoring and leaves sys.setprofile
    # free: the run is guarded and profiled at once.
    run_id = _record(trace_dir)

    def after_the_boundary() -> None:
        time.time()  # read: under cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        with pytest.warns(DeterminismWarning) as caught:
            replay_guarded(trace_dir, run_id, after_the_boundary)
    finally:
        profiler.disable()

    assert sorted(_reported(caught.list)) == [line_of("under cProfile")]
    profiled = {code.co_name for code, *_ in profiler.getstats() if not isinstance(code, str)}
    assert "after_the_boundary" in profiled


def test_a_thread_that_outlives_the_run_drops_the_hook(trace_dir: Path) -> None:
    run_id = _record(trace_dir)
    go, done = threading.Event(), threading.Event()
    seen_after: list[object] = []

    def outliving() -> None:
        go.wait()
        time.time()  # after the run: not reported
        seen_after.append(sys.getprofile())
        done.set()

    thread = threading.Thread(target=outliving)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        replay_guarded(trace_dir, run_id, thread.start)
    go.set()
    done.wait(timeout=10)
    thread.join()

    assert caught == []
    assert seen_after == [None]


def test_a_guarded_replay_inside_a_guarded_replay_is_watched_by_the_outer_one(trace_dir: Path) -> None:
    outer_id, inner_id = _record(trace_dir), _record(trace_dir)

    def inner() -> None:
        replay_guarded(trace_dir, inner_id, lambda: time.time())  # read: nested

    with pytest.warns(DeterminismWarning) as caught:
        replay_guarded(trace_dir, outer_id, inner)

    assert sorted(_reported(caught.list)) == [line_of("nested")]
    assert f"run {outer_id}" in str(caught.list[0].message)

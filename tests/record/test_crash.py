"""A recording process killed with SIGKILL: every completed boundary survives, the run shows as crashed."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import spanreplay

pytestmark = pytest.mark.slow

# The agent, shared by the recording subprocess and the replaying test: it runs
# a few steps, then hangs inside a tool until it is killed.
AGENT = textwrap.dedent(
    """
    import asyncio
    import sys
    import time

    import spanreplay

    @spanreplay.tool
    def step(n: int) -> dict:
        return {"n": n, "draw": spanreplay.random()}

    @spanreplay.tool
    def hang(reason: str) -> None:
        spanreplay.now()  # a nested boundary that completes before the process dies
        print("HANGING", flush=True)
        time.sleep(120)

    @spanreplay.tool
    async def fetch(n: int) -> int:
        await asyncio.sleep(0.01 * n)
        return n

    @spanreplay.tool
    async def stall(reason: str) -> None:
        print("HANGING", flush=True)
        await asyncio.sleep(120)

    def sequential() -> list:
        out = []
        for n in range(4):
            out.append(step(n))
            out.append(spanreplay.now())
        hang("waiting for the kill")
        return out

    async def concurrent() -> list:
        # stall starts second and never ends; fetch(1) and fetch(2) end after it started.
        return list(await asyncio.gather(fetch(0), stall("kill me"), fetch(1), fetch(2)))

    if __name__ == "__main__":
        from opentelemetry.sdk.trace import TracerProvider

        spanreplay.configure(trace_dir=sys.argv[1], tracer_provider=TracerProvider(), raise_internal_errors=True)
        with spanreplay.record(agent="crashy", run_id=sys.argv[2]):
            if sys.argv[3] == "sequential":
                sequential()
            else:
                asyncio.run(concurrent())
    """
)


@pytest.fixture
def agent_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    (tmp_path / "crashy_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    import crashy_agent

    yield crashy_agent
    sys.modules.pop("crashy_agent", None)


def _record_and_kill(tmp_path: Path, trace_dir: Path, run_id: str, shape: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, str(tmp_path / "crashy_agent.py"), str(trace_dir), run_id, shape],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == b"HANGING\n", (line, proc.stderr.read() if proc.stderr else b"")
        if shape == "concurrent":
            time.sleep(0.3)  # let fetch(1) and fetch(2) end while stall is still running
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_a_killed_run_keeps_every_completed_boundary_and_shows_as_crashed(
    tmp_path: Path, trace_dir: Path, agent_module: Any
) -> None:
    run_id = "run_20260101_000000_deadbeef"
    _record_and_kill(tmp_path, trace_dir, run_id, "sequential")

    [summary] = spanreplay.runs(trace_dir)
    assert (summary.run_id, summary.agent, summary.status) == (run_id, "crashy", "crashed")
    # hang (seq 13) never ended, but its nested clock (seq 14) did: a gap the loader explains.
    with pytest.warns(spanreplay.SpanReplayWarning, match=r"crashed.*seq 13"):
        log = spanreplay.load(trace_dir, run_id)
    assert log.run.status == "crashed"
    tools = [e for e in log if e.call_id.startswith("tool:step#") and "/" not in e.call_id]
    assert [e.output["n"] for e in tools] == [0, 1, 2, 3]
    assert [e.call_id for e in log][-1] == "tool:hang#0/clock:now#0"
    assert log.by_call_id("tool:hang#0") is None  # it never ended, so it was never written


def test_replaying_a_killed_run_reaches_the_crash_point_and_counts_as_reproduced(
    tmp_path: Path, trace_dir: Path, agent_module: Any
) -> None:
    run_id = "run_20260101_000000_feedface"
    _record_and_kill(tmp_path, trace_dir, run_id, "sequential")
    with pytest.warns(spanreplay.SpanReplayWarning, match="crashed"):
        run = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(spanreplay.UnexpectedCallError) as caught, run:
        agent_module.sequential()
    assert run.outcome == "reproduced"
    assert caught.value.call_id == "tool:hang#0"
    assert caught.value.recorded is None
    assert run_id in str(caught.value)
    assert "died" in str(caught.value)


def test_a_boundary_still_running_when_killed_leaves_a_gap_that_replay_recognises(
    tmp_path: Path, trace_dir: Path, agent_module: Any
) -> None:
    run_id = "run_20260101_000000_0badf00d"
    _record_and_kill(tmp_path, trace_dir, run_id, "concurrent")
    with pytest.warns(spanreplay.SpanReplayWarning, match=r"crashed.*seq 2"):
        log = spanreplay.load(trace_dir, run_id)
    assert sorted(e.call_id for e in log) == [f"branch:fetch#{n}/tool:fetch#0" for n in range(3)]

    run = spanreplay.replay(log)

    async def replay() -> None:
        async with run:
            await agent_module.concurrent()

    with pytest.raises(spanreplay.UnexpectedCallError) as caught:
        asyncio.run(replay())
    assert caught.value.call_id == "branch:stall#0/tool:stall#0"
    assert "seq 2" in str(caught.value)
    assert run.outcome == "reproduced"


def test_a_line_torn_by_the_kill_is_skipped_with_a_warning(tmp_path: Path, trace_dir: Path, agent_module: Any) -> None:
    run_id = "run_20260101_000000_cafebabe"
    _record_and_kill(tmp_path, trace_dir, run_id, "sequential")
    path = trace_dir / f"{run_id}.jsonl"
    with pytest.warns(spanreplay.SpanReplayWarning, match="crashed"):
        complete = len(spanreplay.load(path))
    with path.open("ab") as f:
        f.write(b'{"resourceSpans":[{"resource":{"attributes":[{"key":"spanreplay.run.id","value":{"stri')
    with pytest.warns(spanreplay.SpanReplayWarning) as warned:
        log = spanreplay.load(path)
    assert any("cut short" in str(w.message) for w in warned)
    assert len(log) == complete

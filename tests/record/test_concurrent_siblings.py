"""A recording that cannot tell concurrent siblings apart says so when it is made.

Work that runs in a context copied where spanreplay did not see it start (here a
pool job that enters a context copied before it was submitted, inside a closure)
shares its starter's scope: two such boundaries at once take ordinals in whatever
order they get there. The recording warns, marks the run, and replay, ``show`` and
a divergence say why it may not replay exactly.
"""

from __future__ import annotations

import contextvars
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from click.testing import CliRunner

import spanreplay
from spanreplay import SpanReplayWarning
from spanreplay.cli import cli


@spanreplay.tool
def ask(prompt: str) -> str:
    return f"{prompt}!"


@spanreplay.tool
def meet(name: str) -> str:
    # Both calls are running at once: each waits for the other.
    BARRIER.wait(timeout=5)
    return f"met {name}"


BARRIER = threading.Barrier(2)


def hidden_fan_out() -> list[str]:
    """A pool that hands each job a context copied before it was submitted, inside a closure."""
    contexts = [contextvars.copy_context() for _ in range(2)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(lambda i=i: contexts[i].run(meet, f"n{i}")) for i in range(2)]
        return [f.result() for f in futures]


def test_concurrent_siblings_with_no_branch_are_warned_about_when_recorded(trace_dir: Path) -> None:
    BARRIER.reset()
    with pytest.warns(SpanReplayWarning) as caught, spanreplay.record(agent="hidden") as run:
        hidden_fan_out()
    (warning,) = [w for w in caught if "at the same time" in str(w.message)]
    message = str(warning.message)
    assert run.run_id in message
    assert "tool:meet#0" in message
    assert "tool:meet#1" in message
    assert "copies the context" in message
    assert "tasks or threads spanreplay sees" in message

    log = spanreplay.load(trace_dir, run.run_id)
    (gap,) = log.run.gaps
    assert "tool:meet#0 and tool:meet#1" in gap
    shown = CliRunner().invoke(cli, ["show", str(trace_dir), run.run_id], prog_name="spanreplay")
    assert "at the same time from one scope" in shown.output
    # The replay says it before it starts, and a divergence carries it too.
    with pytest.warns(SpanReplayWarning, match="at the same time from one scope"):
        replaying = spanreplay.replay(trace_dir, run.run_id)
    with pytest.raises(spanreplay.ReplayDivergenceError) as diverged, replaying:
        pass
    assert "may not replay exactly" in "\n".join(diverged.value.__notes__)


def test_one_scope_used_by_one_thread_after_another_is_not_warned_about(trace_dir: Path) -> None:
    def one_after_another() -> list[str]:
        contexts = [contextvars.copy_context() for _ in range(2)]
        out = []
        with ThreadPoolExecutor(max_workers=2) as pool:
            for i in range(2):
                out.append(pool.submit(lambda i=i: contexts[i].run(ask, f"n{i}")).result())
        return out

    with warnings.catch_warnings():
        warnings.simplefilter("error", SpanReplayWarning)
        with spanreplay.record() as run:
            one_after_another()
    log = spanreplay.load(trace_dir, run.run_id)
    assert [e.call_id for e in log] == ["tool:ask#0", "tool:ask#1"]
    assert not log.run.gaps

"""The support-agent example records against its local stand-in and replays offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import spanreplay

AGENT = Path(__file__).parent.parent / "examples" / "support_agent" / "agent.py"


@pytest.mark.slow
def test_support_agent_records_parallel_tools_and_replays_them(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    traces = tmp_path / "traces"
    recorded = subprocess.run(
        [sys.executable, str(AGENT), "--traces", str(traces)], env=env, capture_output=True, text=True, timeout=120
    )
    assert recorded.returncode == 0, recorded.stderr
    assert "Order A-17 is shipped (carrier La Poste)." in recorded.stdout

    (run,) = spanreplay.runs(traces)
    steps = [(e.kind, e.key) for e in spanreplay.load(traces, run.run_id)]
    assert steps[0] == ("model", "claude-sonnet-4-6")
    assert sorted(steps[1:3]) == [("tool", "lookup_order"), ("tool", "shipping_policy")]
    assert steps[3] == ("model", "claude-sonnet-4-6")

    replayed = subprocess.run(
        [sys.executable, str(AGENT), "--traces", str(traces), "--replay", run.run_id],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert f"replayed run {run.run_id}: completed" in replayed.stderr

"""examples/: the tool agent's README commands, run as a user would, and the Claude support agent."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import spanreplay
from helpers.paths import REPO
from spanreplay.cli import EXIT_DIVERGED, EXIT_OK, EXIT_REPRODUCED

EXAMPLE = REPO / "examples" / "tool_agent"
README = EXAMPLE / "README.md"
SCRIPT = Path(sys.executable).parent / "spanreplay"


def fenced(language: str) -> list[str]:
    """The bodies of the README's fenced blocks in one language."""
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.DOTALL)


def readme_commands() -> list[str]:
    [block] = fenced("sh")
    return [line.strip() for line in block.splitlines() if line.strip()]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory laid out like the repository root, holding only the example."""
    shutil.copytree(
        EXAMPLE, tmp_path / "examples" / "tool_agent", ignore=shutil.ignore_patterns("__pycache__", "traces")
    )
    return tmp_path


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A README command line, with ``python`` and ``spanreplay`` the ones under test."""
    args = shlex.split(command)
    if args[0] == "python":
        args[0] = sys.executable
    elif args[0] == "spanreplay":
        assert SCRIPT.exists(), f"the spanreplay console script is not installed next to {sys.executable}"
        args[0] = str(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANREPLAY_"))}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def recorded_ids(output: str, status: str) -> list[str]:
    return [line.split()[0] for line in output.splitlines() if line.startswith("run_") and line.split()[1] == status]


def test_readme_commands_record_list_show_and_reproduce_the_failure(checkout: Path) -> None:
    commands = readme_commands()
    assert commands[0] == "python examples/tool_agent/agent.py"
    assert [c.split()[:2] for c in commands[1:]] == [
        ["spanreplay", "runs"],
        ["spanreplay", "show"],
        ["spanreplay", "show"],
        ["spanreplay", "replay"],
    ]

    recording = run(commands[0], checkout)
    assert recording.returncode == 0, recording.stderr
    [failed] = recorded_ids(recording.stdout, "error")
    assert "ConnectionError: weather service closed the connection" in recording.stdout
    assert f"spanreplay replay traces/ {failed} --entry examples.tool_agent.agent:main" in recording.stdout
    assert len(list((checkout / "traces").glob("*.jsonl"))) == len(recorded_ids(recording.stdout, "ok")) + 1

    steps = json.loads(run(f"spanreplay show traces/ {failed} --json", checkout).stdout)["steps"]
    [forecast] = [s for s in steps if s["key"] == "get_forecast"]
    filled = [c.replace("RUN", failed).replace(" N", f" {forecast['seq']}") for c in commands[1:]]

    runs, show, show_seq, replay = (run(c, checkout) for c in filled)
    assert runs.returncode == EXIT_OK, runs.stderr
    [failed_line] = [line for line in runs.stdout.splitlines() if failed in line]
    assert " error " in failed_line
    assert "ConnectionError" in failed_line

    assert show.returncode == EXIT_OK, show.stderr
    [forecast_line] = [line for line in show.stdout.splitlines() if "tool:get_forecast#0" in line]
    assert "error" in forecast_line
    assert [s["key"] for s in steps[:3]] == ["now", "search_flights", "search_hotels"]

    assert show_seq.returncode == EXIT_OK, show_seq.stderr
    assert '"type": "ConnectionError"' in show_seq.stdout
    assert '"city": "LIS"' in show_seq.stdout

    assert replay.returncode == EXIT_REPRODUCED, replay.stdout + replay.stderr
    assert f"raised again at seq {forecast['seq']} (tool 'get_forecast')" in replay.stdout
    assert "Traceback" not in replay.stderr


def test_replaying_a_run_that_succeeded_exits_0(checkout: Path) -> None:
    recording = run("python examples/tool_agent/agent.py --weather-failure-rate 0 --max-runs 1", checkout)
    [ok] = recorded_ids(recording.stdout, "ok")
    replay = run(f"spanreplay replay traces/ {ok} --entry examples.tool_agent.agent:main", checkout)
    assert replay.returncode == EXIT_OK, replay.stdout + replay.stderr
    assert "completed: the replay matched the recording; 6 of 6 recorded steps served" in replay.stdout


def test_an_edited_agent_diverges_with_exit_3_and_an_input_diff(checkout: Path) -> None:
    recording = run("python examples/tool_agent/agent.py --weather-failure-rate 0 --max-runs 1", checkout)
    [ok] = recorded_ids(recording.stdout, "ok")
    agent = checkout / "examples" / "tool_agent" / "agent.py"
    source = agent.read_text()
    assert source.count("await get_forecast(DESTINATION,") == 1
    agent.write_text(source.replace("await get_forecast(DESTINATION,", "await get_forecast(ORIGIN,"))
    replay = run(f"spanreplay replay traces/ {ok} --entry examples.tool_agent.agent:main", checkout)
    assert replay.returncode == EXIT_DIVERGED, replay.stdout + replay.stderr
    assert "get_forecast" in replay.stderr
    assert '-  "city": "LIS"' in replay.stderr
    assert '+  "city": "BER"' in replay.stderr


def test_readme_python_snippet_reproduces_the_failure(checkout: Path) -> None:
    recording = run("python examples/tool_agent/agent.py", checkout)
    [failed] = recorded_ids(recording.stdout, "error")
    [snippet] = fenced("python")
    (checkout / "snippet.py").write_text(snippet.replace('"RUN"', repr(failed)))
    proc = subprocess.run([sys.executable, "snippet.py"], cwd=checkout, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("raised again: weather service closed the connection")
    assert proc.stdout.splitlines()[-1] == "reproduced"


# --- examples/support_agent: Claude through the packaged local Messages API server --------------

SUPPORT_AGENT = EXAMPLE.parent / "support_agent" / "agent.py"


def support_agent(*args: str, failure_rate: float, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "SPANREPLAY_", "OTEL_"))}
    env["SUPPORT_AGENT_CARRIER_FAILURE_RATE"] = str(failure_rate)
    return subprocess.run(
        [sys.executable, str(SUPPORT_AGENT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def nothing_listens(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) != 0


def test_support_agent_records_parallel_tools_and_replays_them_with_no_server(tmp_path: Path) -> None:
    recorded = support_agent("--traces", "traces", failure_rate=0.0, cwd=tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    assert "Order A-17 is shipped, last scanned at Lyon hub" in recorded.stdout

    (run,) = spanreplay.runs(tmp_path / "traces")
    steps = [(e.kind, e.key) for e in spanreplay.load(tmp_path / "traces", run.run_id)]
    assert steps[:2] == [("clock", "now"), ("model", "claude-sonnet-4-6")]
    # The first reply's two tool_use blocks ran together, before the next model call.
    assert sorted(steps[2:4]) == [("tool", "lookup_order"), ("tool", "shipping_policy")]
    assert steps[4:] == [
        ("model", "claude-sonnet-4-6"),
        ("tool", "track_shipment"),
        ("random", "random"),
        ("model", "claude-sonnet-4-6"),
    ]

    # The local server died with the recording process, and a replay points the
    # client at a port where nothing listens: any call that left it would fail.
    assert nothing_listens(9)
    replayed = support_agent("--traces", "traces", "--replay", run.run_id, failure_rate=0.0, cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert f"replayed run {run.run_id}: completed" in replayed.stderr


def test_support_agent_failure_reproduces_through_replay_entry(tmp_path: Path) -> None:
    recorded = support_agent("--traces", "traces", failure_rate=1.0, cwd=tmp_path)
    assert recorded.returncode == 1
    assert "failed with CarrierTimeout: La Poste tracking API timed out" in recorded.stderr
    (run,) = spanreplay.runs(tmp_path / "traces")
    assert run.status == "error"

    assert nothing_listens(9)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "SPANREPLAY_", "OTEL_"))}
    replayed = subprocess.run(
        [str(SCRIPT), "replay", str(tmp_path / "traces"), run.run_id, "--entry", "agent:support"],
        cwd=SUPPORT_AGENT.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert replayed.returncode == EXIT_REPRODUCED, replayed.stdout + replayed.stderr
    assert "reproduced: CarrierTimeout" in replayed.stdout
    assert "(tool 'track_shipment'), the step where the recorded run failed" in replayed.stdout

"""examples/langgraph_mcp_agent: its README commands, run as a user would, record and then replay offline."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import spanreplay
from helpers.paths import REPO
from spanreplay.cli import EXIT_DIVERGED, EXIT_OK

EXAMPLE = REPO / "examples" / "langgraph_mcp_agent"
ENTRY = "examples.langgraph_mcp_agent.agent:main"
SCRIPT = Path(sys.executable).parent / "spanreplay"
ANSWER = "Order A-17 was delivered, and I refunded 10.00 EUR on it (reference RF-A-17-1000)."


def readme_commands() -> list[str]:
    [block] = re.findall(r"```sh\n(.*?)```", (EXAMPLE / "README.md").read_text(), flags=re.DOTALL)
    return [line.strip() for line in block.splitlines() if line.strip()]


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A directory laid out like the repository root, holding only the example."""
    shutil.copytree(EXAMPLE, tmp_path / "examples" / EXAMPLE.name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A README command line, with ``python`` and ``spanreplay`` the ones under test, and no API key."""
    args = shlex.split(command)
    if args[0] == "python":
        args[0] = sys.executable
    elif args[0] == "spanreplay":
        assert SCRIPT.exists(), f"the spanreplay console script is not installed next to {sys.executable}"
        args[0] = str(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OTEL_", "SPANREPLAY_"))}
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


def record(checkout: Path) -> tuple[str, subprocess.CompletedProcess[str]]:
    recorded = run("python examples/langgraph_mcp_agent/agent.py record", checkout)
    assert recorded.returncode == 0, recorded.stderr
    [run_id] = re.findall(r"recorded run (run_\S+) into traces/", recorded.stderr)
    return run_id, recorded


def test_readme_commands_record_then_replay_with_no_model_and_no_mcp_server(checkout: Path) -> None:
    install, record_cmd, show, replay, cli_replay = readme_commands()
    assert install.startswith("pip install -e '.[frameworks-test]'")  # not run: this environment has it
    assert record_cmd == "python examples/langgraph_mcp_agent/agent.py record"

    run_id, recorded = record(checkout)
    assert recorded.stdout == ANSWER + "\n"
    call_log = checkout / "order_desk_calls.log"
    assert [line.split(",")[0] for line in call_log.read_text().splitlines()] == [
        '{"tool": "lookup_order"',
        '{"tool": "refund"',
    ]
    logged = call_log.read_bytes()

    shown = run(show.replace("RUN", run_id), checkout)
    assert shown.returncode == EXIT_OK, shown.stderr
    assert "mcp:tools/list#0" in shown.stdout
    steps = [(e.kind, e.key) for e in spanreplay.load(checkout / "traces", run_id)]
    assert steps[:3] == [("mcp", "initialize"), ("mcp", "tools/list"), ("model", "claude-sonnet-4-6")]
    assert [key for kind, key in steps if kind == "model"] == ["claude-sonnet-4-6"] * 3
    assert {key for kind, key in steps if kind == "tool"} == {"lookup_order", "refund"}

    # No MCP server can start now, and the stand-in Claude died with the recording process.
    (checkout / "examples" / EXAMPLE.name / "server.py").unlink()
    replayed = run(replay.replace("RUN", run_id), checkout)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert f"replayed run {run_id}: completed" in replayed.stderr

    through_cli = run(cli_replay.replace("RUN", run_id), checkout)
    assert through_cli.returncode == EXIT_OK, through_cli.stdout + through_cli.stderr
    assert "completed: the replay matched the recording" in through_cli.stdout
    assert f"returned: {ANSWER!r}" in through_cli.stdout

    assert call_log.read_bytes() == logged  # neither replay reached the order desk


def test_an_edited_question_diverges_at_the_first_model_call(checkout: Path) -> None:
    run_id, _ = record(checkout)
    agent = checkout / "examples" / EXAMPLE.name / "agent.py"
    source = agent.read_text()
    assert source.count("Could you refund 10 EUR") == 1
    agent.write_text(source.replace("Could you refund 10 EUR", "Could you refund 30 EUR"))
    replayed = run(f"spanreplay replay traces/ {run_id} --entry {ENTRY}", checkout)
    assert replayed.returncode == EXIT_DIVERGED, replayed.stdout + replayed.stderr
    assert "model:claude-sonnet-4-6#0" in replayed.stderr
    assert "refund 30 EUR" in replayed.stderr

"""The commands over a directory with one damaged trace file: the other runs still work.

A torn line in one run's file made runs, show, replay, check and cost exit 2 for
every run of the directory. Now the damaged line costs one warning and its own
run: runs and cost exit 0 (the run shows as damaged), show and replay of another
run exit 0, of the damaged run exit 2 with the refusal, and check replays the
others and counts the damaged one as an error (exit 2, as documented).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from fixtures.recordings import lines, record_agent, seq_of
from spanreplay.cli import EXIT_BAD_INPUT, EXIT_OK, cli

AGENT = """
import spanreplay

def main():
    spanreplay.boundary("tool", "search", {"q": "weather in Oslo"}, lambda: {"hits": 3})
    spanreplay.now()
    spanreplay.random()
    for i in range(3):
        spanreplay.boundary("tool", "lookup", {"i": i}, lambda i=i: {"row": i * i})
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="spanreplay")


@pytest.fixture
def damaged(trace_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """traces/ with run_alpha and run_gamma whole and run_beta's third step torn; yields the entry."""
    for run_id in ("run_alpha", "run_beta", "run_gamma"):
        record_agent(run_id)
    path = trace_dir / "run_beta.jsonl"
    raw = lines(path)
    index = next(i for i, line in enumerate(raw) if seq_of(line) == 3)
    raw[index] = raw[index][: raw[index].index(b"run_beta") + 40]  # the next line follows right after it
    path.write_bytes(b"".join(raw))
    module = f"agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{module}.py").write_text(AGENT)
    monkeypatch.chdir(tmp_path)
    yield f"{module}:main"
    sys.modules.pop(module, None)


def warned_once(result: Result) -> None:
    assert result.stderr.count("warning: ") == 1, result.stderr
    assert "traces/run_beta.jsonl:4: skipped a damaged line" in result.stderr


def test_runs_and_cost_list_every_run_and_exit_0(damaged: str) -> None:
    listed = invoke("runs", "traces")
    assert listed.exit_code == EXIT_OK, listed.output
    warned_once(listed)
    rows = {line.split()[0]: line for line in listed.stdout.splitlines() if line.startswith(" run_")}
    assert " damaged " in rows["run_beta"]
    assert " ok " in rows["run_alpha"]
    assert " ok " in rows["run_gamma"]
    assert "run_beta: Run run_beta cannot be loaded: the damaged line traces/run_beta.jsonl:4" in listed.stdout
    cost = invoke("cost", "traces")
    assert cost.exit_code == EXIT_OK, cost.output
    warned_once(cost)


def test_show_and_replay_work_for_the_other_runs_and_refuse_the_damaged_one(damaged: str) -> None:
    for args in (["show", "traces", "run_alpha"], ["replay", "traces", "run_gamma", "--entry", damaged]):
        result = invoke(*args)
        assert result.exit_code == EXIT_OK, result.output
        assert result.stderr == ""  # the run filter never meets another run's damaged line
    for args in (["show", "traces", "run_beta"], ["replay", "traces", "run_beta", "--entry", damaged]):
        result = invoke(*args)
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        warned_once(result)
        assert (
            "error: Run run_beta cannot be loaded: the damaged line traces/run_beta.jsonl:4: not valid JSON"
            in result.stderr
        )
        assert "Traceback" not in result.output


def test_check_replays_the_other_runs_and_counts_the_damaged_one_as_an_error(damaged: str) -> None:
    result = invoke("check", "traces", "--entry", damaged)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    verdicts = {
        line.split()[0]: line.split()[1].rstrip(":") for line in result.stdout.splitlines() if line.startswith("run_")
    }
    assert verdicts == {"run_alpha": "completed", "run_beta": "error", "run_gamma": "completed"}

"""``spanreplay demo`` and its bundled agent, in process and through the real console script."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay import _builtins, _demo
from spanreplay.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_REPRODUCED, CliState, cli

SCRIPT = Path(sys.executable).parent / "spanreplay"


def invoke(*args: str, provider: TracerProvider | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), obj=CliState(tracer_provider=provider), prog_name="spanreplay")


def next_commands(output: str) -> list[list[str]]:
    """The commands the demo suggests at the end, as argument lists (without 'spanreplay')."""
    tail = output.split("Next, try:", 1)[1]
    return [shlex.split(line)[1:] for line in tail.splitlines() if line.strip().startswith("spanreplay ")]


def script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), f"the spanreplay console script is not installed next to {sys.executable}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANREPLAY_"))}
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


# --- the demo agent -------------------------------------------------------------------------


def record_demo(monkeypatch: pytest.MonkeyPatch, *, failure_rate: float, at: datetime | None = None) -> str:
    """One recorded run of the demo agent, with the carrier's flakiness and the real clock set."""
    monkeypatch.setattr(_demo, "FAILURE_RATE", failure_rate)
    if at is not None:
        monkeypatch.setattr(_builtins, "_utcnow", lambda: at)
    run_id = ""
    try:
        with spanreplay.record(agent=_demo.AGENT) as run:
            run_id = run.run_id
            _demo.main()
    except _demo.CarrierTimeout:
        pass
    monkeypatch.undo()
    return run_id


def test_demo_agent_runs_its_tools_for_real_outside_any_run() -> None:
    _demo.real_calls.clear()
    try:
        answer = _demo.main()
    except _demo.CarrierTimeout:
        assert _demo.real_calls["track_shipment"] == 1
        assert "open_ticket" not in _demo.real_calls
    else:
        assert "Order 1042" in answer
        assert dict(_demo.real_calls) == {"lookup_order": 1, "track_shipment": 1, "open_ticket": 1}


@pytest.mark.parametrize(
    ("at", "follow_up"),
    [
        (datetime(2026, 3, 2, 10, 30, tzinfo=UTC), "A colleague will call you back today."),  # a Monday
        (datetime(2026, 3, 2, 22, 0, tzinfo=UTC), "We will reply by email tomorrow."),
        (datetime(2026, 3, 7, 10, 30, tzinfo=UTC), "We will reply by email tomorrow."),  # a Saturday
    ],
)
def test_demo_agent_replays_the_branch_its_recorded_clock_chose(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch, at: datetime, follow_up: str
) -> None:
    run_id = record_demo(monkeypatch, failure_rate=0.0, at=at)
    [ticket] = [e for e in spanreplay.load(trace_dir, run_id) if e.key == "open_ticket"]
    assert ticket.input["callback"] is (follow_up.startswith("A colleague"))
    _demo.real_calls.clear()
    # Replayed now, at whatever hour the test runs: the recorded instant decides.
    with spanreplay.replay(trace_dir, run_id):
        answer = _demo.main()
    assert answer.endswith(f"{follow_up} (ticket T-1042-51)")
    assert not _demo.real_calls


def test_demo_agent_failure_is_recorded_in_the_tool_and_replayed_without_it(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = record_demo(monkeypatch, failure_rate=1.0)
    log = spanreplay.load(trace_dir, run_id)
    assert log.run.status == "error"
    [failed] = [e for e in log if e.failed]
    assert (failed.key, failed.error and failed.error.type_name) == ("track_shipment", "CarrierTimeout")
    # The draw that decided the timeout is nested in the tool call that it failed.
    assert [e.call_id for e in log if e.kind == "random"] == ["tool:track_shipment#0/random:random#0"]
    _demo.real_calls.clear()
    run = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(_demo.CarrierTimeout, match="ParcelCo tracking API timed out"), run:
        _demo.main()
    assert run.outcome == "reproduced"
    assert not _demo.real_calls


# --- spanreplay demo, in process --------------------------------------------------------------


def test_demo_records_until_a_failure_and_reproduces_it_without_real_calls(
    tmp_path: Path, provider: TracerProvider
) -> None:
    traces = tmp_path / "demo-traces"
    result = invoke("demo", "--trace-dir", str(traces), provider=provider)
    assert result.exit_code == EXIT_OK, result.output
    found = spanreplay.runs(traces)
    assert found, result.output
    assert [r.status for r in found][-1] == "error"
    assert all(r.status == "ok" for r in found[:-1])
    failed = found[-1]
    assert failed.error is not None
    assert "CarrierTimeout" in failed.error
    out = result.stdout
    for run in found:
        assert run.run_id in out
    assert f"Replaying {failed.run_id}" in out
    assert "reproduced: CarrierTimeout" in out
    assert "the step where the recorded run failed" in out
    assert "Real tool calls during the replay: 0." in out


def test_demo_suggests_commands_that_work_as_described(tmp_path: Path, provider: TracerProvider) -> None:
    traces = tmp_path / "demo-traces"
    result = invoke("demo", "--trace-dir", str(traces), provider=provider)
    assert result.exit_code == EXIT_OK, result.output
    failed = spanreplay.runs(traces)[-1].run_id
    commands = next_commands(result.stdout)
    assert [c[0] for c in commands] == ["runs", "show", "show", "replay"]
    runs, show, show_seq, replay = (invoke(*c) for c in commands)
    assert runs.exit_code == EXIT_OK
    assert failed in runs.stdout
    assert show.exit_code == EXIT_OK
    assert "track_shipment" in show.stdout
    assert show_seq.exit_code == EXIT_OK
    assert '"type": "CarrierTimeout"' in show_seq.stdout
    assert commands[3] == ["replay", str(traces), failed, "--entry", "spanreplay._demo:main"]
    assert replay.exit_code == EXIT_REPRODUCED, replay.output


def test_demo_into_a_path_that_is_a_file_is_a_usage_error(tmp_path: Path, provider: TracerProvider) -> None:
    occupied = tmp_path / "traces"
    occupied.write_text("not a directory")
    result = invoke("demo", "--trace-dir", str(occupied), provider=provider)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "is a file" in result.output


# --- the real console script ------------------------------------------------------------------


def test_console_script_demo_in_a_fresh_directory_then_replays_the_failure(tmp_path: Path) -> None:
    demo = script("demo", cwd=tmp_path)
    assert demo.returncode == EXIT_OK, demo.stdout + demo.stderr
    assert "Traceback" not in demo.stderr
    assert "reproduced: CarrierTimeout" in demo.stdout
    assert "Real tool calls during the replay: 0." in demo.stdout
    files = sorted((tmp_path / "traces").glob("*.jsonl"))
    assert files
    assert all(f.stat().st_mode & 0o077 == 0 for f in files)  # owner-only trace files

    commands = next_commands(demo.stdout)
    assert commands[-1][:2] == ["replay", "traces"]
    replayed = script(*commands[-1], cwd=tmp_path)
    assert replayed.returncode == EXIT_REPRODUCED, replayed.stdout + replayed.stderr
    assert "reproduced: CarrierTimeout" in replayed.stdout
    listed = script("runs", "traces", cwd=tmp_path)
    assert listed.returncode == EXIT_OK
    assert commands[-1][2] in listed.stdout


def test_console_script_reports_bad_input_in_one_line_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    proc = script("runs", "empty", cwd=tmp_path)
    assert proc.returncode == EXIT_BAD_INPUT
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("error: Directory empty holds no trace files")
    debug = script("--debug", "runs", "empty", cwd=tmp_path)
    assert debug.returncode == EXIT_BAD_INPUT
    assert "Traceback (most recent call last)" in debug.stderr


def test_python_dash_m_runs_the_same_command_line(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "spanreplay.cli", "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"spanreplay, version {spanreplay.__version__}"

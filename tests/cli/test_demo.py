"""``spanreplay demo`` and its bundled agent, in process and through the real console script."""

from __future__ import annotations

import asyncio
import io
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay import _demo
from spanreplay.api import builtins as _builtins
from spanreplay.cli import EXIT_BAD_INPUT, EXIT_OK, EXIT_REPRODUCED, CliState, cli
from spanreplay.instrumentation.anthropic import AnthropicInstrumentor
from spanreplay.testing import MessagesAPIServer
from spanreplay.testing.messages_api import CLOSED_DESK, OPEN_DESK

SCRIPT = Path(sys.executable).parent / "spanreplay"


def invoke(*args: str, provider: TracerProvider | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), obj=CliState(tracer_provider=provider), prog_name="spanreplay")


def next_commands(output: str) -> list[list[str]]:
    """The commands the demo suggests at the end, as argument lists (without 'spanreplay')."""
    tail = output.split("Next, try:", 1)[1]
    return [shlex.split(line)[1:] for line in tail.splitlines() if line.strip().startswith("spanreplay ")]


def script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert SCRIPT.exists(), f"the spanreplay console script is not installed next to {sys.executable}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANREPLAY_", "ANTHROPIC_"))}
    return subprocess.run([str(SCRIPT), *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


# --- the demo agent -------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def sdk_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No real API for the agent, and the Anthropic SDK uninstrumented after each test."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    yield
    instrumentor = AnthropicInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


RECORDED_AT = datetime(2026, 3, 4, 14, 0, tzinfo=UTC)  # a Wednesday afternoon


def record_demo(
    monkeypatch: pytest.MonkeyPatch, *, failure_rate: float, at: datetime | None = None
) -> tuple[str, str, MessagesAPIServer]:
    """One recorded run of the demo agent against its local server, which is stopped on return.

    Returns the run id, the text the agent streamed, and the stopped server.
    """
    monkeypatch.setattr(_demo, "FAILURE_RATE", failure_rate)
    # The agent's branch follows the clock (office hours or not): a fixed instant unless the test picks one.
    when = at or RECORDED_AT
    monkeypatch.setattr(_builtins, "_utcnow", lambda: when)
    run_id = ""
    streamed = io.StringIO()
    with _demo.local_api() as server:
        try:
            with spanreplay.record(agent=_demo.AGENT) as run:
                run_id = run.run_id
                asyncio.run(_demo.main(streamed))
        except _demo.CarrierTimeout:
            pass
    monkeypatch.undo()
    assert server.stopped
    return run_id, streamed.getvalue(), server


def test_demo_agent_starts_its_own_local_server_outside_any_run() -> None:
    _demo.real_calls.clear()
    try:
        answer = asyncio.run(_demo.main())
    except _demo.CarrierTimeout:
        assert dict(_demo.real_calls) == {"lookup_order": 1, "shipping_policy": 1, "track_shipment": 1}
    else:
        assert answer.startswith("Order A-17 is shipped, last scanned at Lyon hub")
        assert dict(_demo.real_calls) == {"lookup_order": 1, "shipping_policy": 1, "track_shipment": 1}


def test_demo_agent_streams_runs_one_turns_tools_together_and_replays_with_the_server_stopped(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, recorded_text, server = record_demo(monkeypatch, failure_rate=0.0)
    requests = [r.body for r in server.message_requests]
    assert [r["stream"] for r in requests] == [True, True, True]
    # Claude's first reply asked for two tools in one turn; both results went back in one message.
    first_reply = requests[1]["messages"][1]["content"]
    assert [b["name"] for b in first_reply if b["type"] == "tool_use"] == ["lookup_order", "shipping_policy"]
    results = requests[1]["messages"][2]["content"]
    assert [b["tool_use_id"] for b in results] == [b["id"] for b in first_reply if b["type"] == "tool_use"]
    steps = [(e.kind, e.key) for e in spanreplay.load(trace_dir, run_id)]
    assert steps == [
        ("clock", "now"),
        ("model", _demo.MODEL),
        ("tool", "lookup_order"),
        ("tool", "shipping_policy"),
        ("model", _demo.MODEL),
        ("tool", "track_shipment"),
        ("random", "random"),
        ("model", _demo.MODEL),
    ]

    _demo.real_calls.clear()
    replayed_text = io.StringIO()
    with spanreplay.replay(trace_dir, run_id) as run:
        answer = asyncio.run(_demo.main(replayed_text))
    assert run.outcome == "completed"
    assert replayed_text.getvalue() == recorded_text
    assert answer in recorded_text
    assert not _demo.real_calls
    # Nothing reached the stopped server: it still holds only the recorded run's requests.
    assert len(server.requests) == 3
    assert server.stopped


@pytest.mark.parametrize(
    ("at", "follow_up"),
    [
        (datetime(2026, 3, 2, 10, 30, tzinfo=UTC), OPEN_DESK),  # a Monday
        (datetime(2026, 3, 2, 22, 0, tzinfo=UTC), CLOSED_DESK),
        (datetime(2026, 3, 7, 10, 30, tzinfo=UTC), CLOSED_DESK),  # a Saturday
    ],
)
def test_demo_agent_replays_the_branch_its_recorded_clock_chose(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch, at: datetime, follow_up: str
) -> None:
    run_id, _, server = record_demo(monkeypatch, failure_rate=0.0, at=at)
    desk = _demo.DESK_OPEN if follow_up == OPEN_DESK else _demo.DESK_CLOSED
    assert all(r.body["system"].endswith(desk) for r in server.message_requests)
    _demo.real_calls.clear()
    # Replayed now, at whatever hour the test runs: the recorded instant decides.
    with spanreplay.replay(trace_dir, run_id):
        answer = asyncio.run(_demo.main())
    assert answer.endswith(follow_up)
    assert not _demo.real_calls
    assert len(server.requests) == 3


def test_demo_agent_failure_is_recorded_in_the_tool_and_replayed_without_it(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id, _, server = record_demo(monkeypatch, failure_rate=1.0)
    log = spanreplay.load(trace_dir, run_id)
    assert log.run.status == "error"
    [failed] = [e for e in log if e.failed]
    assert (failed.key, failed.error and failed.error.type_name) == ("track_shipment", "CarrierTimeout")
    # The draw that decided the timeout is nested in the tool call that it failed.
    # The tool ran in a task of the agent's gather: a branch of the run.
    assert [e.call_id for e in log if e.kind == "random"] == [
        "branch:track_shipment#0/tool:track_shipment#0/random:random#0"
    ]
    _demo.real_calls.clear()
    run = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(_demo.CarrierTimeout, match="La Poste tracking API timed out"), run:
        asyncio.run(_demo.main())
    assert run.outcome == "reproduced"
    assert not _demo.real_calls
    assert len(server.requests) == 2


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
    # The local server answered every recorded model call, then stopped before the replay.
    calls = sum(r.model_calls for r in found)
    assert f"Stopped the local server after {calls} model calls" in out
    assert out.index("Stopped the local server") < out.index("Replaying")


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
    assert "claude-sonnet-4-6" in show.stdout
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

    # The demo's server is gone with its process: nothing listens on its port for the replay.
    [port] = re.findall(r"Messages API server at http://127\.0\.0\.1:(\d+)", demo.stdout)
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", int(port))) != 0

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

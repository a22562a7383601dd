"""Failure alerts: a recorded run that fails leaves one log record and a note naming the command that replays it."""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.recording import alerts as spanreplay_alerts
from spanreplay.recording.alerts import ALERT_LOGGER, Launch, launched_run


class CardDeclined(RuntimeError):
    pass


def pay_for_order() -> None:
    with spanreplay.record(agent="billing"):
        spanreplay.boundary("tool", "charge", {"card": "4111 1111 1111 1111"}, lambda: {"ok": False})
        raise CardDeclined("card 4111 1111 1111 1111 was declined for alice@example.com")


def _alerts(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == ALERT_LOGGER]


def test_a_failed_run_logs_one_record_with_the_run_id_and_the_replay_command(
    trace_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(trace_dir.parent)
    caplog.set_level(logging.INFO, logger="spanreplay")
    with pytest.raises(CardDeclined) as caught:
        pay_for_order()
    (run,) = spanreplay.runs(trace_dir)
    (record,) = _alerts(caplog)
    command = f"spanreplay replay traces {run.run_id} --entry {__name__}:pay_for_order"
    assert record.levelno == logging.ERROR
    assert getattr(record, "spanreplay.run.id") == run.run_id
    assert getattr(record, "spanreplay.replay.command") == command
    assert record.getMessage() == (
        f"Run {run.run_id} (agent billing) failed with CardDeclined; replay it offline with: {command}"
    )
    # The exception's message may hold what masking keeps out of the spans: the record does not repeat it.
    assert "alice@example.com" not in record.getMessage()
    assert caught.value.__notes__ == [f"spanreplay: run {run.run_id} failed; replay it offline with: {command}"]
    # The note is for people reading the traceback: the recorded error is the one the code raised.
    assert spanreplay.load(trace_dir, run.run_id).run.error is not None
    assert "replay it offline" not in str(spanreplay.load(trace_dir, run.run_id).run.error)
    assert not [r for r in caplog.records if r.name == "spanreplay" and r.levelno >= logging.WARNING]


def test_a_run_that_ends_well_or_is_interrupted_raises_no_alert(
    trace_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="spanreplay")
    with spanreplay.record(agent="quiet"):
        spanreplay.now()
    with pytest.raises(KeyboardInterrupt), spanreplay.record(agent="stopped"):
        raise KeyboardInterrupt
    assert _alerts(caplog) == []
    assert {r.status for r in spanreplay.runs(trace_dir)} == {"ok", "error"}


class Agent:
    def run(self) -> None:
        with spanreplay.record(agent="method"):
            raise ValueError("no")


def needs_a_ticket(ticket: str) -> None:
    with spanreplay.record(agent="args"):
        raise ValueError(ticket)


@pytest.mark.parametrize("call", [Agent().run, lambda: needs_a_ticket("T-1")], ids=["method", "arguments"])
def test_a_block_replay_cannot_call_gets_an_entry_placeholder(
    call: object, trace_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger=ALERT_LOGGER)
    with pytest.raises(ValueError) as caught:
        call()  # type: ignore[operator]
    (record,) = _alerts(caplog)
    assert getattr(record, "spanreplay.replay.command").endswith("--entry MODULE:FUNCTION")
    assert caught.value.__notes__[0].endswith("--entry MODULE:FUNCTION")


async def answer_async() -> None:
    async with spanreplay.record(agent="async"):
        await asyncio.sleep(0)
        raise TimeoutError("slow")


def test_an_async_run_names_its_coroutine_function(trace_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger=ALERT_LOGGER)
    with pytest.raises(TimeoutError):
        asyncio.run(answer_async())
    (record,) = _alerts(caplog)
    assert getattr(record, "spanreplay.replay.command").endswith(f"--entry {__name__}:answer_async")


def test_recording_only_to_postgres_names_the_database_without_its_password(
    tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    try:
        from spanreplay.postgres import PostgresSpanProcessor
    except ImportError:
        if _in_ci():
            raise
        pytest.skip("psycopg is not installed (pip install -e '.[test]')")

    # Nothing listens on port 1: the processor logs its outage; the alert is what this test reads.
    processor = PostgresSpanProcessor("postgresql://agent:s3cret@127.0.0.1:1/agents", timeout=0.2)
    spanreplay.configure(trace_dir=None, tracer_provider=provider, raise_internal_errors=False, postgres=processor)
    caplog.set_level(logging.ERROR, logger=ALERT_LOGGER)
    with pytest.raises(CardDeclined):
        pay_for_order()
    (record,) = _alerts(caplog)
    command = getattr(record, "spanreplay.replay.command")
    assert command.startswith("spanreplay replay postgresql://agent@127.0.0.1:1/agents run_")
    assert "s3cret" not in command
    processor.shutdown()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


SCRIPT = """
import spanreplay

class OutOfStock(Exception):
    pass

def main():
    with spanreplay.record(agent="shop"):
        stock = spanreplay.boundary("tool", "stock", {"sku": "A1"}, lambda: 0)
        if not stock:
            raise OutOfStock("A1 is out of stock")

if __name__ == "__main__":
    spanreplay.configure()
    main()
"""


@pytest.mark.slow
def test_the_command_in_the_alert_of_a_failed_script_replays_it(tmp_path: Path) -> None:
    (tmp_path / "shop.py").write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPANREPLAY_", "OTEL_"))}
    recorded = subprocess.run(
        [sys.executable, "shop.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert recorded.returncode == 1
    # No logging configured: Python's last-resort handler prints the alert on stderr, and the traceback ends
    # with the note.
    alert = next(line for line in recorded.stderr.splitlines() if line.startswith("Run run_"))
    command = alert.split("replay it offline with: ", 1)[1]
    assert command.endswith("--entry shop:main")
    assert recorded.stderr.rstrip().endswith(
        f"spanreplay: run {command.split()[3]} failed; replay it offline with: {command}"
    )
    argv = shlex.split(command)
    replayed = subprocess.run(
        [sys.executable, "-m", "spanreplay.cli", *argv[1:]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert replayed.returncode == 1, replayed.stdout + replayed.stderr  # 1: the recorded failure reproduced
    assert "reproduced" in replayed.stdout
    assert "OutOfStock: A1 is out of stock" in replayed.stdout


# --- zero-code runs: the program's command line is the entry --------------------------------------------

# An interpreter PATH does not find: the command keeps it as the full path it ran as.
PYTHON = "/opt/agent env/bin/python3-agent"


@settings(max_examples=60)
@given(
    args=st.lists(st.text(), max_size=4),
    source=st.text(min_size=1),
    run_id=st.from_regex(r"[A-Za-z0-9_.-]{1,24}", fullmatch=True),
    instrumented=st.booleans(),
    trace_scope=st.booleans(),
)
def test_a_zero_code_runs_command_gives_a_shell_back_the_replay_variables_and_the_same_argv(
    args: list[str], source: str, run_id: str, instrumented: bool, trace_scope: bool
) -> None:
    launch = Launch((PYTHON, "-X", "utf8", "agent.py", *args), os.getcwd(), instrumented, trace_scope)
    words = shlex.split(launch.replay_command(run_id, source))
    variables = ["SPANREPLAY_MODE=replay", f"SPANREPLAY_SOURCE={source}", f"SPANREPLAY_RUN_ID={run_id}"]
    if trace_scope:
        variables.append("SPANREPLAY_RUN_SCOPE=trace")
    assert words[: len(variables)] == variables
    program = words[len(variables) :]
    if instrumented:
        assert Path(program.pop(0)).name == "opentelemetry-instrument"
    assert program == [PYTHON, "-X", "utf8", "agent.py", *args]


def _fail_in_a_run_opened_by(launch: Launch) -> None:
    """A run as zero-code mode opens one, failing with its run id as the message."""
    with spanreplay.record(agent="billing") as run:
        launched_run(run.run_id, launch)
        raise CardDeclined(run.run_id)


def test_a_zero_code_runs_alert_names_its_command_from_where_the_program_started(
    trace_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    started_in = trace_dir.parent
    (started_in / "jobs").mkdir()
    monkeypatch.chdir(started_in / "jobs")  # the program moved on after it started
    caplog.set_level(logging.ERROR, logger=ALERT_LOGGER)
    launch = Launch((PYTHON, "agent.py", "--queue", "night shift"), str(started_in), False, False)
    with pytest.raises(CardDeclined) as caught:
        _fail_in_a_run_opened_by(launch)
    run_id = str(caught.value)
    (record,) = _alerts(caplog)
    command = getattr(record, "spanreplay.replay.command")
    assert command == (
        f"cd {shlex.quote(str(started_in))} && SPANREPLAY_MODE=replay SPANREPLAY_SOURCE=traces "
        f"SPANREPLAY_RUN_ID={run_id} {shlex.quote(PYTHON)} agent.py --queue 'night shift'"
    )
    # Once the run has ended zero-code mode forgets it: another run with that id gets the usual command.
    launched_run(run_id, None)
    assert spanreplay_alerts.replay_command(run_id, None) == (
        f"spanreplay replay {shlex.quote(str(trace_dir))} {run_id} --entry MODULE:FUNCTION"
    )


def test_a_trace_scoped_runs_alert_says_to_send_the_request_again(
    trace_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger=ALERT_LOGGER)
    launch = Launch((PYTHON, "server.py"), os.getcwd(), True, True)
    with pytest.raises(CardDeclined) as caught:
        _fail_in_a_run_opened_by(launch)
    launched_run(str(caught.value), None)
    (record,) = _alerts(caplog)
    command = getattr(record, "spanreplay.replay.command")
    assert "SPANREPLAY_RUN_SCOPE=trace" in shlex.split(command)
    assert record.getMessage().endswith(f"with: {command} (then send it the request that started the run)")
    assert caught.value.__notes__[-1].endswith("(then send it the request that started the run)")

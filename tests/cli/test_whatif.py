"""``spanreplay replay --set/--raise`` and ``spanreplay fork``: what-if edits and forks from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.demo_runs import TRACKED, demo_sdk_restored, final_message, record_demo
from helpers.messages_api_server import MessagesAPIServer, reply, serve, text, tool_use
from helpers.zero_code import instrument_command, instrument_env
from spanreplay import _demo
from spanreplay.cli import EXIT_BAD_INPUT, EXIT_DIVERGED, EXIT_OK, CliState, cli

server = pytest.fixture(serve, name="server")

ENTRY = "spanreplay._demo:main"
NEXT_MODEL_CALL = f"model:{_demo.MODEL}#2"


@pytest.fixture(autouse=True)
def sdk_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from demo_sdk_restored(monkeypatch)


def invoke(*args: str, provider: TracerProvider | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), obj=CliState(tracer_provider=provider), prog_name="spanreplay")


# --- replay --set / --raise ----------------------------------------------------------------------


def test_set_turns_the_demos_failed_run_into_a_completed_replay(
    trace_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = record_demo(monkeypatch, failure_rate=1.0)
    tracked = tmp_path / "tracked.json"
    tracked.write_text(json.dumps(TRACKED))
    answer = final_message("A-17 arrives in 2 days.")
    result = invoke(
        "replay", str(trace_dir), run_id, "--entry", ENTRY,
        "--set", f"6=@{tracked}", "--set", f"{NEXT_MODEL_CALL}={json.dumps(answer)}",
    )  # fmt: skip
    assert result.exit_code == EXIT_OK, result.output
    assert "completed: the edited replay ran to the end (2 step(s) edited)" in result.output
    assert "A-17 arrives in 2 days." in result.output
    assert not _demo.real_calls


def test_raise_makes_a_step_fail_and_the_edited_run_fails_its_own_way(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = record_demo(monkeypatch, failure_rate=0.0)
    result = invoke(
        "replay", str(trace_dir), run_id, "--entry", ENTRY, "--raise", "6=spanreplay._demo.CarrierTimeout:no answer"
    )
    assert result.exit_code == EXIT_DIVERGED, result.output
    assert "failed: the replay ended with CarrierTimeout: no answer" in result.output
    assert not _demo.real_calls


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (("--set", "6=not json"), "is not JSON"),
        (("--set", "=1"), "names no step"),
        (("--set", "6=@/nonexistent/edit.json"), "cannot read /nonexistent/edit.json"),
        (("--raise", "6=NoSuchError:x"), "NoSuchError is not an exception type"),
        (("--set", "9=1"), "has no step at seq 9"),
    ],
)
def test_bad_edits_exit_2_with_the_fix(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch, option: tuple[str, str], message: str
) -> None:
    run_id = record_demo(monkeypatch, failure_rate=1.0)
    result = invoke("replay", str(trace_dir), run_id, "--entry", ENTRY, *option)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert message in " ".join(result.output.split())


# --- fork --entry ----------------------------------------------------------------------------------


def test_fork_at_a_step_with_an_entry_records_a_new_run_that_replays_on_its_own(
    trace_dir: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = record_demo(monkeypatch, failure_rate=1.0)
    monkeypatch.setattr(_demo, "FAILURE_RATE", 0.0)
    result = invoke("fork", str(trace_dir), parent, "--at", "6", "--entry", ENTRY, provider=provider)
    assert result.exit_code == EXIT_OK, result.output
    assert "served up to seq 5, live from seq 6" in result.output
    assert dict(_demo.real_calls) == {"track_shipment": 1}
    (forked,) = [r for r in spanreplay.runs(trace_dir) if r.run_id != parent]
    log = spanreplay.load(trace_dir, forked.run_id)
    assert (log.run.forked_from, log.run.forked_at, log.run.status) == (parent, 6, "ok")
    assert f"spanreplay replay {trace_dir} {forked.run_id} --entry {ENTRY}" in " ".join(result.output.split())

    _demo.real_calls.clear()
    replayed = invoke("replay", str(trace_dir), forked.run_id, "--entry", ENTRY)
    assert replayed.exit_code == EXIT_OK, replayed.output
    assert not _demo.real_calls


def test_fork_needs_an_entry_or_a_command(trace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = record_demo(monkeypatch, failure_rate=1.0)
    result = invoke("fork", str(trace_dir), parent, "--at", "6")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "--entry MODULE:FUNCTION, or the program after '--'" in " ".join(result.output.split())


def test_a_fork_point_past_the_run_exits_2(trace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = record_demo(monkeypatch, failure_rate=1.0)
    result = invoke("fork", str(trace_dir), parent, "--at", "99", "--entry", ENTRY)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "fork(at=99) is not a step" in " ".join(result.output.split())


# --- fork -- COMMAND: a script run zero-code ----------------------------------------------------------

AGENT = """
import json, os
import anthropic
import spanreplay

@spanreplay.tool
def lookup_order(order_id: str) -> dict:
    with open(os.environ["AGENT_TOOL_LOG"], "a") as log:
        log.write(order_id + "\\n")
    return {"order_id": order_id, "status": "shipped"}

client = anthropic.Anthropic(base_url=os.environ["AGENT_BASE_URL"], api_key="test-key")
messages = [{"role": "user", "content": "Where is order A-17?"}]
first = client.messages.create(model="claude-sonnet-4-6", max_tokens=200, messages=messages)
call = first.content[0]
result = lookup_order(call.input["order_id"])
messages += [
    {"role": "assistant", "content": [block.model_dump() for block in first.content]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": json.dumps(result)}]},
]
final = client.messages.create(model="claude-sonnet-4-6", max_tokens=200, messages=messages)
print(final.content[0].text)
"""


@pytest.mark.slow
def test_fork_a_script_run_zero_code_at_a_step(server: MessagesAPIServer, tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    traces = tmp_path / "traces"
    env = {**instrument_env(tmp_path, server), "SPANREPLAY_TRACE_DIR": str(traces), "SPANREPLAY_MODE": "record"}
    server.script(reply(tool_use("lookup_order", {"order_id": "A-17"}, "toolu_01")), reply(text("It shipped.")))
    recorded = subprocess.run(
        [*instrument_command(), "agent.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert recorded.returncode == 0, recorded.stderr
    (parent,) = spanreplay.runs(traces)

    server.script(reply(text("It shipped yesterday.")))
    env.pop("SPANREPLAY_MODE")
    spanreplay_cli = [sys.executable, "-c", "from spanreplay.cli import main; main()"]
    forked = subprocess.run(
        [*spanreplay_cli, "fork", "traces", parent.run_id, "--at", "3", "--set", '2={"status": "lost"}',
         "--", sys.executable, "agent.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert forked.returncode == 0, forked.stderr
    assert forked.stdout.strip() == "It shipped yesterday."
    # Seq 1 and 2 were served: the tool did not run again, and one model call (the third step) was sent.
    assert (tmp_path / "tools.log").read_text() == "A-17\n"
    assert len(server.message_requests) == 3
    # The edited tool result (seq 2) went to the live model call.
    sent = server.message_requests[-1].body["messages"][-1]["content"][0]["content"]
    assert json.loads(sent) == {"status": "lost"}
    (new,) = [r for r in spanreplay.runs(traces) if r.run_id != parent.run_id]
    log = spanreplay.load(traces, new.run_id)
    assert (log.run.forked_from, log.run.forked_at, log.run.status) == (parent.run_id, 3, "ok")
    assert [e.attributes.get("spanreplay.served_from") for e in log] == [parent.run_id, parent.run_id, None]

"""Zero-code mode: ``opentelemetry-instrument`` with SPANREPLAY_* variables, an agent left unchanged."""

from __future__ import annotations

import os
import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest

import spanreplay
from helpers.messages_api_server import MessagesAPIServer, reply, serve, text, tool_use
from helpers.zero_code import instrument_command, instrument_env

server = pytest.fixture(serve, name="server")

AGENT = textwrap.dedent(
    """
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
    with client.messages.stream(model="claude-sonnet-4-6", max_tokens=200, messages=messages) as stream:
        chunks = list(stream.text_stream)
        final = stream.get_final_message()
    print(json.dumps({"tool_use": call.id, "chunks": chunks, "final": final.model_dump(mode="json"),
                      "request_id": first._request_id}))
    """
)


@pytest.mark.slow
def test_opentelemetry_instrument_records_the_process_and_replays_it_offline(
    server: MessagesAPIServer, tmp_path: Path
) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    tool_log = tmp_path / "tools.log"
    traces = tmp_path / "traces"
    env = {**instrument_env(tmp_path, server), "SPANREPLAY_TRACE_DIR": str(traces), "SPANREPLAY_MODE": "record"}
    server.script(reply(tool_use("lookup_order", {"order_id": "A-17"}, "toolu_01")), reply(text("It shipped.")))
    recorded = subprocess.run(
        [*instrument_command(), "agent.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert recorded.returncode == 0, recorded.stderr

    (run,) = spanreplay.runs(traces)
    assert run.status == "ok"
    # The run says its id once, at the end, with where its trace is.
    assert [line for line in recorded.stderr.splitlines() if run.run_id in line] == [
        f"spanreplay: run {run.run_id} ended ok; trace in traces/{run.run_id}.jsonl"
    ]
    assert run.agent == "agent"
    kinds = [(e.kind, e.key) for e in spanreplay.load(traces, run.run_id)]
    assert kinds == [("model", "claude-sonnet-4-6"), ("tool", "lookup_order"), ("model", "claude-sonnet-4-6")]
    assert tool_log.read_text() == "A-17\n"

    server.stop()
    replay_env = {**env, "SPANREPLAY_MODE": "replay", "SPANREPLAY_SOURCE": str(traces), "SPANREPLAY_RUN_ID": run.run_id}
    replayed = subprocess.run(
        [*instrument_command(), "agent.py"], cwd=tmp_path, env=replay_env, capture_output=True, text=True, timeout=120
    )
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert f"replay of run {run.run_id} completed (3 of 3 recorded steps served)" in replayed.stderr
    assert tool_log.read_text() == "A-17\n", "the tool ran again on replay"
    assert [p.name for p in traces.iterdir()] == [f"{run.run_id}.jsonl"], "replay wrote a trace"


def test_replay_mode_without_a_source_refuses_to_run_live(server: MessagesAPIServer, tmp_path: Path) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    env = {**instrument_env(tmp_path, server), "SPANREPLAY_MODE": "replay"}
    done = subprocess.run(
        [*instrument_command(), "agent.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    assert "SPANREPLAY_MODE=replay needs SPANREPLAY_SOURCE" in done.stderr
    assert server.requests == [], "the agent reached the API although replay was asked for"


FAILING_AGENT = textwrap.dedent(
    """
    import os
    import spanreplay

    @spanreplay.tool
    def stock(sku: str) -> int:
        with open(os.environ["AGENT_TOOL_LOG"], "a") as log:
            log.write(sku + "\\n")
        return 0

    if not stock("A1"):
        raise LookupError(f"A1 is out of stock at {spanreplay.now():%H:%M:%S.%f}")
    """
)


def _alerted_command(stderr: str) -> str:
    """The command in the failure alert, which Python's last-resort handler prints when logging is not set up."""
    alert = next(line for line in stderr.splitlines() if line.startswith("Run run_"))
    return alert.split("replay it offline with: ", 1)[1]


@pytest.mark.slow
def test_the_alert_of_a_failed_zero_code_run_prints_the_command_that_replays_it(
    server: MessagesAPIServer, tmp_path: Path
) -> None:
    (tmp_path / "agent.py").write_text(FAILING_AGENT)
    tool_log = tmp_path / "tools.log"
    instrument, python = instrument_command()
    # As from a shell with the environment activated: the command names both programs as typed there.
    env = {**instrument_env(tmp_path, server), "PATH": os.pathsep.join([str(Path(python).parent), os.environ["PATH"]])}
    recorded = subprocess.run(
        [instrument, python, "-X", "utf8", "agent.py"],
        cwd=tmp_path,
        env={**env, "SPANREPLAY_MODE": "record"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert recorded.returncode == 1, recorded.stderr
    (run,) = spanreplay.runs(tmp_path / "traces")
    assert run.status == "error"
    command = _alerted_command(recorded.stderr)
    # This program's own command line (with the interpreter's options) in replay mode: no --entry placeholder.
    assert shlex.split(command) == [
        "SPANREPLAY_MODE=replay",
        "SPANREPLAY_SOURCE=traces",
        f"SPANREPLAY_RUN_ID={run.run_id}",
        "opentelemetry-instrument",
        Path(python).name,
        "-X",
        "utf8",
        "agent.py",
    ]
    assert [line for line in recorded.stderr.splitlines() if line.startswith("spanreplay: run")] == [
        f"spanreplay: run {run.run_id} failed with LookupError; trace in traces/{run.run_id}.jsonl"
    ]
    failure = next(line for line in recorded.stderr.splitlines() if line.startswith("LookupError: "))
    assert failure.startswith("LookupError: A1 is out of stock at ")

    # Run as printed, from a shell, with none of the recording's variables: the recorded failure comes back.
    server.stop()
    replayed = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert replayed.returncode == 1, replayed.stderr
    assert failure in replayed.stderr.splitlines(), "the replayed clock read differs from the recorded one"
    assert f"spanreplay: replay of run {run.run_id} reproduced (2 of 2 recorded steps served)." in replayed.stderr
    assert tool_log.read_text() == "A1\n", "the tool ran again on replay"
    assert [p.name for p in (tmp_path / "traces").iterdir()] == [f"{run.run_id}.jsonl"], "replay wrote a trace"


OWN_RUNS_AGENT = textwrap.dedent(
    """
    import spanreplay

    def main():
        with spanreplay.record(agent="shop"):
            if not spanreplay.boundary("tool", "stock", {"sku": "A1"}, lambda: 0):
                raise LookupError("A1 is out of stock")

    main()
    """
)


@pytest.mark.slow
def test_code_that_opens_its_own_runs_under_zero_code_keeps_the_entry_in_its_alert(
    server: MessagesAPIServer, tmp_path: Path
) -> None:
    (tmp_path / "agent.py").write_text(OWN_RUNS_AGENT)
    env = {**instrument_env(tmp_path, server), "SPANREPLAY_MODE": "record"}
    recorded = subprocess.run(
        [*instrument_command(), "agent.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert recorded.returncode == 1, recorded.stderr
    (run,) = spanreplay.runs(tmp_path / "traces")
    assert _alerted_command(recorded.stderr) == f"spanreplay replay traces {run.run_id} --entry agent:main"
    assert "; trace in " not in recorded.stderr  # no process run was opened, so none ended

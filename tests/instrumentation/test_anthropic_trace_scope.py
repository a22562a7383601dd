"""``SPANREPLAY_RUN_SCOPE=trace``: under ``opentelemetry-instrument``, each trace the application starts is a run."""

from __future__ import annotations

import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest

import spanreplay
from helpers.messages_api_server import MessagesAPIServer, reply, serve, text
from helpers.zero_code import instrument_command, instrument_env

server = pytest.fixture(serve, name="server")

# A stand-in for a server: each "request" is a root span, as a web framework's
# instrumentation would start it; the requests to handle come from the command line.
SERVER = textwrap.dedent(
    """
    import json, os, sys
    import anthropic
    import spanreplay
    from opentelemetry import trace

    @spanreplay.tool
    def lookup_order(order_id: str) -> dict:
        with open(os.environ["AGENT_TOOL_LOG"], "a") as log:
            log.write(order_id + "\\n")
        return {"order_id": order_id, "status": "lost" if order_id == "B-2" else "shipped"}

    client = anthropic.Anthropic(base_url=os.environ["AGENT_BASE_URL"], api_key="test-key")
    tracer = trace.get_tracer("support-server")

    def handle(order_id):
        answer = client.messages.create(
            model="claude-sonnet-4-6", max_tokens=100, messages=[{"role": "user", "content": f"Where is {order_id}?"}]
        )
        found = lookup_order(order_id)
        if found["status"] == "lost":
            raise LookupError(f"order {order_id} is lost")
        return answer.content[0].text

    for order_id in sys.argv[1:]:
        try:
            with tracer.start_as_current_span(f"POST /orders/{order_id}"):
                print(order_id, handle(order_id), flush=True)
        except LookupError as exc:
            print(order_id, "failed:", exc, flush=True)
    """
)


def _env(tmp_path: Path, server: MessagesAPIServer, **extra: str) -> dict[str, str]:
    return {
        **instrument_env(tmp_path, server),
        "SPANREPLAY_TRACE_DIR": str(tmp_path / "traces"),
        "SPANREPLAY_RUN_SCOPE": "trace",
        **extra,
    }


def _replay_env(tmp_path: Path, server: MessagesAPIServer, run_id: str) -> dict[str, str]:
    return _env(
        tmp_path, server, SPANREPLAY_MODE="replay", SPANREPLAY_SOURCE=str(tmp_path / "traces"), SPANREPLAY_RUN_ID=run_id
    )


def _run(tmp_path: Path, env: dict[str, str], *orders: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*instrument_command(), "server.py", *orders],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _record_two_requests(
    tmp_path: Path, server: MessagesAPIServer, stderr: list[str] | None = None
) -> dict[str, spanreplay.RunSummary]:
    """The runs of requests A-1 and B-2 (which fails), by order; the process's stderr lines go to ``stderr``."""
    (tmp_path / "server.py").write_text(SERVER)
    server.script(reply(text("On its way.")), reply(text("Let me check.")))
    recorded = _run(tmp_path, _env(tmp_path, server, SPANREPLAY_MODE="record"), "A-1", "B-2")
    assert recorded.returncode == 0, recorded.stderr
    if stderr is not None:
        stderr.extend(recorded.stderr.splitlines())
    assert recorded.stdout.splitlines() == ["A-1 On its way.", "B-2 failed: order B-2 is lost"]
    runs = spanreplay.runs(tmp_path / "traces")
    by_order = {}
    for run in runs:
        (tool,) = [e for e in spanreplay.load(tmp_path / "traces", run.run_id) if e.kind == "tool"]
        by_order[tool.input["order_id"]] = run
    return by_order


@pytest.mark.slow
def test_each_trace_is_a_run_that_ends_with_its_root_span(server: MessagesAPIServer, tmp_path: Path) -> None:
    stderr: list[str] = []
    runs = _record_two_requests(tmp_path, server, stderr)

    assert set(runs) == {"A-1", "B-2"}, "two requests, two runs"
    assert runs["A-1"].status == "ok"
    assert runs["B-2"].status == "error"
    assert runs["B-2"].error == "spanreplay.errors.TraceFailedError: LookupError: order B-2 is lost"
    for order, run in runs.items():
        events = spanreplay.load(tmp_path / "traces", run.run_id)
        assert [(e.kind, e.key) for e in events] == [("model", "claude-sonnet-4-6"), ("tool", "lookup_order")]
        assert f"Where is {order}?" in events.events[0].input_json.decode()
    assert runs["A-1"].trace_id != runs["B-2"].trace_id
    # Each run says once that it ended; the failed one's alert names the server's command in replay mode.
    a, b = runs["A-1"].run_id, runs["B-2"].run_id
    assert [line for line in stderr if line.startswith("spanreplay: run ")] == [
        f"spanreplay: run {a} ended ok; trace in traces/{a}.jsonl",
        f"spanreplay: run {b} failed with TraceFailedError; trace in traces/{b}.jsonl",
    ]
    (alert,) = [line for line in stderr if line.startswith(f"Run {b} ")]
    command, hint = alert.split("replay it offline with: ", 1)[1].split(" (", 1)
    assert shlex.split(command)[:4] == [
        "SPANREPLAY_MODE=replay",
        "SPANREPLAY_SOURCE=traces",
        f"SPANREPLAY_RUN_ID={b}",
        "SPANREPLAY_RUN_SCOPE=trace",
    ]
    assert shlex.split(command)[-3:] == ["server.py", "A-1", "B-2"]
    assert hint == "then send it the request that started the run)"


@pytest.mark.slow
def test_replay_serves_the_named_run_to_the_trace_that_reaches_it(server: MessagesAPIServer, tmp_path: Path) -> None:
    runs = _record_two_requests(tmp_path, server)
    failed = runs["B-2"]
    server.stop()

    replayed = _run(tmp_path, _replay_env(tmp_path, server, failed.run_id), "B-2")

    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.splitlines() == ["B-2 failed: order B-2 is lost"]
    assert f"replay of run {failed.run_id} reproduced (2 of 2 recorded steps served)" in replayed.stderr
    assert (tmp_path / "tools.log").read_text() == "A-1\nB-2\n", "a tool ran again on replay"


@pytest.mark.slow
def test_replay_refuses_a_second_trace_rather_than_run_it_live(server: MessagesAPIServer, tmp_path: Path) -> None:
    runs = _record_two_requests(tmp_path, server)
    served = runs["A-1"]
    server.stop()

    replayed = _run(tmp_path, _replay_env(tmp_path, server, served.run_id), "A-1", "B-2")

    assert replayed.returncode != 0
    assert replayed.stdout.splitlines() == ["A-1 On its way."]
    assert "SPANREPLAY_RUN_SCOPE=trace replays one run per process, and trace " in replayed.stderr
    assert "Send the process only the request that started the recorded run" in replayed.stderr
    assert f"replay of run {served.run_id} completed (2 of 2 recorded steps served)" in replayed.stderr
    assert (tmp_path / "tools.log").read_text() == "A-1\nB-2\n", "a tool ran again on replay"


def test_an_unknown_run_scope_refuses_every_call(server: MessagesAPIServer, tmp_path: Path) -> None:
    (tmp_path / "server.py").write_text(SERVER)
    env = _env(tmp_path, server, SPANREPLAY_MODE="record", SPANREPLAY_RUN_SCOPE="request")

    done = _run(tmp_path, env, "A-1")

    assert done.returncode != 0
    assert "SPANREPLAY_RUN_SCOPE='request' is not a run scope" in done.stderr
    assert server.requests == [], "the agent reached the API although its configuration was refused"

"""The framework adapters under ``opentelemetry-instrument``: found by their entry points, no code change.

A script that calls a LangChain tool, run under ``opentelemetry-instrument`` with
``SPANREPLAY_MODE=record``, records the tool call; run again with
``SPANREPLAY_MODE=replay``, it gets the recorded result and the tool never runs.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path

import pytest

import spanreplay
from helpers.messages_api_server import MessagesAPIServer, serve
from helpers.zero_code import instrument_command, instrument_env
from spanreplay.instrumentation._framework import FrameworkInstrumentor
from spanreplay.instrumentation.everything import ADAPTERS

pytest.importorskip("langchain_core")

server = pytest.fixture(serve, name="server")

AGENT = """\
import os

from langchain_core.tools import tool


@tool
def lookup_order(order_id: str) -> str:
    \"\"\"The status of an order.\"\"\"
    with open(os.environ["AGENT_TOOL_LOG"], "a") as log:
        log.write(order_id + "\\n")
    return f"order {order_id}: shipped"


print(lookup_order.invoke({"order_id": "A-17"}))
"""


def test_every_adapter_is_an_entry_point_opentelemetry_instrument_finds() -> None:
    registered = {ep.value for ep in importlib.metadata.entry_points(group="opentelemetry_instrumentor")}
    for _, module, class_name in ADAPTERS:
        assert f"{module}:{class_name}" in registered, f"{module}:{class_name} has no entry point"
        instrumentor = importlib.import_module(module).__dict__[class_name]
        assert issubclass(instrumentor, FrameworkInstrumentor)


def test_a_langchain_tool_is_recorded_and_replayed_with_no_code_change(
    server: MessagesAPIServer, tmp_path: Path
) -> None:
    (tmp_path / "agent.py").write_text(AGENT)
    tool_log = tmp_path / "tools.log"
    traces = tmp_path / "traces"
    env = {**instrument_env(tmp_path, server), "SPANREPLAY_TRACE_DIR": str(traces), "SPANREPLAY_MODE": "record"}
    recorded = subprocess.run(
        [*instrument_command(), "agent.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert recorded.returncode == 0, recorded.stderr
    assert recorded.stdout == "order A-17: shipped\n"
    (run,) = spanreplay.runs(traces)
    assert [(e.kind, e.key, e.input) for e in spanreplay.load(traces, run.run_id)] == [
        ("tool", "lookup_order", {"order_id": "A-17"})
    ]
    assert tool_log.read_text() == "A-17\n"

    replay_env = {**env, "SPANREPLAY_MODE": "replay", "SPANREPLAY_SOURCE": str(traces), "SPANREPLAY_RUN_ID": run.run_id}
    replayed = subprocess.run(
        [*instrument_command(), "agent.py"], cwd=tmp_path, env=replay_env, capture_output=True, text=True, timeout=120
    )
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == recorded.stdout
    assert f"replay of run {run.run_id} completed (1 of 1 recorded steps served)" in replayed.stderr
    assert tool_log.read_text() == "A-17\n", "the tool ran again on replay"

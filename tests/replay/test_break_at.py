"""``replay(break_at=...)`` and ``--break-at``: the debugger stops before a step is served, or at a divergence.

The stop goes through ``sys.breakpointhook()``: in process the tests put their own hook
there; through the command line they name one with PYTHONBREAKPOINT, the way a user
names an IDE's, and drive plain pdb over stdin.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

import anthropic
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanreplay
from helpers.messages_api_server import MessagesAPIServer, instrument, reply, serve, text
from helpers.paths import REPO
from spanreplay import Event, EventLog, RunInfo

AGENT_SOURCE = """
import os

import spanreplay

SETTINGS = {"item": os.environ.get("SHOP_ITEM", "apple"), "extra": False}
SEEN = []


@spanreplay.tool
def fetch(item):
    return {"item": item, "price": 3}


@spanreplay.tool
def store(record):
    return "stored " + record["item"]


def main():
    got = fetch(SETTINGS["item"])
    SEEN.append(got)
    done = store({"item": got["item"]})
    SEEN.append(done)
    if SETTINGS["extra"]:
        fetch("pear")
    return done
"""

# A PYTHONBREAKPOINT hook as an IDE's would be: it looks at the frame that called it.
HOOK_SOURCE = """
import json
import os
import sys


def hook(*args, **kwargs):
    frame = sys._getframe(1)
    names = frame.f_locals
    step = names.get("step")
    attempted = names.get("attempted")
    agent = sys.modules.get(os.environ["SHOP_AGENT"])
    seen = {
        "function": frame.f_code.co_name,
        "locals": sorted(names),
        "seq": step.seq if step is not None else None,
        "call_id": step.call_id if step is not None else None,
        "output": step.output if step is not None else None,
        "served_so_far": len(agent.SEEN) if agent is not None else None,
        "attempted_input": attempted.input if attempted is not None else None,
    }
    with open(os.environ["BREAKHOOK_OUT"], "a") as out:
        out.write(json.dumps(seen) + "\\n")
"""


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace_dir: Path) -> Iterator[ModuleType]:
    name = f"shop_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(AGENT_SOURCE)
    (tmp_path / "breakhook.py").write_text(HOOK_SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib

    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)


def record(agent: ModuleType) -> str:
    with spanreplay.record(agent="shop") as run:
        agent.main()
    agent.SEEN.clear()
    return run.run_id


class Stops:
    """A breakpoint hook for this process: keeps each stop's frame locals and what the code had by then."""

    def __init__(self, agent: ModuleType) -> None:
        self.agent = agent
        self.frames: list[dict[str, Any]] = []
        self.functions: list[str] = []
        self.served_so_far: list[int] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        frame: FrameType = sys._getframe(1)
        self.frames.append(dict(frame.f_locals))
        self.functions.append(frame.f_code.co_name)
        self.served_so_far.append(len(self.agent.SEEN))


@pytest.fixture
def stops(agent: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Stops:
    hook = Stops(agent)
    monkeypatch.setattr(sys, "breakpointhook", hook)
    return hook


def seq_of(run_id: str, key: str) -> int:
    (event,) = [e for e in spanreplay.load("traces", run_id) if e.key == key]
    return event.seq


# --- from code ---------------------------------------------------------------------------


def test_break_at_a_seq_stops_before_that_step_is_served_with_only_step_in_scope(
    agent: ModuleType, stops: Stops
) -> None:
    run_id = record(agent)
    store_seq = seq_of(run_id, "store")
    with spanreplay.replay("traces", run_id, break_at=store_seq):
        assert agent.main() == "stored apple"
    assert len(stops.frames) == 1
    (frame,) = stops.frames
    assert set(frame) == {"step"}
    step = frame["step"]
    assert isinstance(step, spanreplay.Event)
    assert (step.seq, step.kind, step.key, step.output) == (store_seq, "tool", "store", "stored apple")
    assert "apple" in json.dumps(step.input)
    # The fetch result had reached the code; the store result had not yet.
    assert stops.served_so_far == [1]


def test_break_at_a_list_stops_at_each_listed_step_in_order(agent: ModuleType, stops: Stops) -> None:
    run_id = record(agent)
    fetch_seq, store_seq = seq_of(run_id, "fetch"), seq_of(run_id, "store")
    with spanreplay.replay("traces", run_id, break_at=[store_seq, fetch_seq]):
        agent.main()
    assert [f["step"].seq for f in stops.frames] == [fetch_seq, store_seq]
    assert stops.served_so_far == [0, 1]


def test_no_break_at_never_calls_the_hook(agent: ModuleType, stops: Stops) -> None:
    run_id = record(agent)
    with spanreplay.replay("traces", run_id):
        agent.main()
    assert stops.frames == []


def test_break_at_divergence_stops_with_recorded_and_attempted_then_raises(agent: ModuleType, stops: Stops) -> None:
    run_id = record(agent)
    fetch_seq = seq_of(run_id, "fetch")
    agent.SETTINGS["item"] = "banana"
    with pytest.raises(spanreplay.InputChangedError), spanreplay.replay("traces", run_id, break_at="divergence"):
        agent.main()
    (frame,) = stops.frames
    assert stops.functions == ["_break_at_divergence"]
    assert set(frame) == {"step", "recorded", "attempted", "error"}
    assert frame["recorded"] is frame["step"]
    assert frame["recorded"].seq == fetch_seq
    assert "apple" in json.dumps(frame["recorded"].input)
    assert "banana" in json.dumps(frame["attempted"].input)
    assert frame["attempted"].key == "fetch"
    assert isinstance(frame["error"], spanreplay.InputChangedError)
    assert stops.served_so_far == [0]


def test_break_at_divergence_on_a_call_the_recording_lacks_has_no_recorded_step(
    agent: ModuleType, stops: Stops
) -> None:
    run_id = record(agent)
    agent.SETTINGS["extra"] = True
    with pytest.raises(spanreplay.UnexpectedCallError), spanreplay.replay("traces", run_id, break_at=["divergence"]):
        agent.main()
    (frame,) = stops.frames
    assert frame["step"] is None
    assert frame["recorded"] is None
    assert "pear" in json.dumps(frame["attempted"].input)


def test_break_at_divergence_stops_once_even_when_the_code_catches_it_and_goes_on(
    agent: ModuleType, stops: Stops
) -> None:
    run_id = record(agent)

    def stubborn() -> None:
        for item in ("kiwi", "plum"):
            with contextlib.suppress(spanreplay.ReplayDivergenceError):
                agent.fetch(item)

    with pytest.raises(spanreplay.ReplayDivergenceError), spanreplay.replay("traces", run_id, break_at="divergence"):
        stubborn()
    assert len(stops.frames) == 1
    assert "kiwi" in json.dumps(stops.frames[0]["attempted"].input)


def test_break_at_a_seq_and_divergence_together(agent: ModuleType, stops: Stops) -> None:
    run_id = record(agent)
    fetch_seq = seq_of(run_id, "fetch")
    agent.SETTINGS["extra"] = True
    with (
        pytest.raises(spanreplay.UnexpectedCallError),
        spanreplay.replay("traces", run_id, break_at=[fetch_seq, "divergence"]),
    ):
        agent.main()
    assert stops.functions == ["_break_before_step", "_break_at_divergence"]


@pytest.mark.parametrize("bad", [99, 0, -1])
def test_break_at_a_seq_the_run_lacks_is_refused_naming_the_run_and_its_steps(agent: ModuleType, bad: int) -> None:
    run_id = record(agent)
    with pytest.raises(spanreplay.ConfigurationError) as caught:
        spanreplay.replay("traces", run_id, break_at=bad)
    assert run_id in str(caught.value)
    assert f"no step at seq {bad}" in str(caught.value)
    assert "from seq 1 to" in str(caught.value)


@pytest.mark.parametrize("bad", [True, "diverge", 1.0, [1, "x"]])
def test_break_at_a_value_that_is_no_seq_is_refused(agent: ModuleType, bad: Any) -> None:
    run_id = record(agent)
    with pytest.raises(spanreplay.ConfigurationError, match="neither a step's seq"):
        spanreplay.replay("traces", run_id, break_at=bad)


def test_break_at_a_step_nested_in_another_is_refused_naming_the_enclosing_step(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def outer() -> str:
        return str(spanreplay.boundary("tool", "inner", {}, lambda: "x"))

    with spanreplay.record(agent="nest") as run:
        spanreplay.boundary("tool", "outer", {}, outer)
    log = spanreplay.load(trace_dir, run.run_id)
    inner = next(e for e in log if e.key == "inner")
    outer_event = next(e for e in log if e.key == "outer")
    with pytest.raises(spanreplay.ConfigurationError) as caught:
        spanreplay.replay(log, break_at=inner.seq)
    assert f"inside seq {outer_event.seq}" in str(caught.value)
    assert f"Break at seq {outer_event.seq}" in str(caught.value)


# --- from the command line -----------------------------------------------------------------


def cli_replay(
    agent: ModuleType, tmp_path: Path, run_id: str, *options: str, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    # Without a PYTHONBREAKPOINT of the test's own, the default hook (pdb) stops.
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONBREAKPOINT"}
    environment = {
        **environment,
        "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(tmp_path)]),
        "SHOP_AGENT": agent.__name__,
        "BREAKHOOK_OUT": str(tmp_path / "stops.jsonl"),
        **(env or {}),
    }
    command = [sys.executable, "-m", "spanreplay.cli", "replay", "traces", run_id, "--entry", f"{agent.__name__}:main"]
    return subprocess.run(
        [*command, *options], cwd=tmp_path, env=environment, input=stdin, capture_output=True, text=True, timeout=60
    )


def hook_stops(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "stops.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_cli_break_at_stops_under_a_custom_pythonbreakpoint_hook_with_step_in_scope(
    agent: ModuleType, tmp_path: Path
) -> None:
    run_id = record(agent)
    store_seq = seq_of(run_id, "store")
    proc = cli_replay(agent, tmp_path, run_id, "--break-at", str(store_seq), env={"PYTHONBREAKPOINT": "breakhook.hook"})
    assert proc.returncode == 0, proc.stderr
    assert "completed" in proc.stdout
    (stop,) = hook_stops(tmp_path)
    assert stop["function"] == "_break_before_step"
    assert stop["locals"] == ["step"]
    assert (stop["seq"], stop["output"], stop["served_so_far"]) == (store_seq, "stored apple", 1)


def test_cli_break_at_divergence_and_a_seq_repeated(agent: ModuleType, tmp_path: Path) -> None:
    run_id = record(agent)
    fetch_seq = seq_of(run_id, "fetch")
    proc = cli_replay(
        agent,
        tmp_path,
        run_id,
        "--break-at",
        str(fetch_seq),
        "--break-at",
        "divergence",
        env={"PYTHONBREAKPOINT": "breakhook.hook", "SHOP_ITEM": "banana"},
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr  # diverged
    (stop,) = hook_stops(tmp_path)  # the changed fetch never reaches its seq: it diverges first
    assert stop["function"] == "_break_at_divergence"
    assert stop["locals"] == ["attempted", "error", "recorded", "step"]
    assert stop["seq"] == fetch_seq
    assert "banana" in json.dumps(stop["attempted_input"])


def test_cli_break_at_drops_into_pdb_with_step_in_scope(agent: ModuleType, tmp_path: Path) -> None:
    run_id = record(agent)
    store_seq = seq_of(run_id, "store")
    proc = cli_replay(agent, tmp_path, run_id, "--break-at", str(store_seq), stdin="p step.key, step.seq\nc\n")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"('store', {store_seq})" in proc.stdout


@pytest.mark.parametrize("bad", ["next", "-3", "1.5"])
def test_cli_break_at_a_bad_value_exits_2_naming_it(agent: ModuleType, tmp_path: Path, bad: str) -> None:
    run_id = record(agent)
    proc = cli_replay(agent, tmp_path, run_id, "--break-at", bad)
    assert proc.returncode == 2
    assert f"--break-at {bad!r}" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_break_at_a_missing_seq_exits_2_naming_the_run(agent: ModuleType, tmp_path: Path) -> None:
    run_id = record(agent)
    proc = cli_replay(agent, tmp_path, run_id, "--break-at", "42")
    assert proc.returncode == 2
    assert f"run {run_id} has no step at seq 42" in proc.stderr


# --- a model call through the real SDK -------------------------------------------------------

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")


def test_break_at_a_model_call_holds_its_recorded_response_and_tokens(
    trace_dir: Path, server: MessagesAPIServer, instrumented: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def ask(client: anthropic.Anthropic) -> str:
        answer = client.messages.create(
            model="claude-sonnet-4-6", max_tokens=32, messages=[{"role": "user", "content": "hi"}]
        )
        return str(answer.content[0].text)

    server.script(reply(text("hello there"), input_tokens=120, output_tokens=7))
    with anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0) as client:
        with spanreplay.record(agent="chat") as run:
            ask(client)
        (model_step,) = spanreplay.load(trace_dir, run.run_id)
        seen: list[dict[str, Any]] = []
        monkeypatch.setattr(sys, "breakpointhook", lambda *a, **k: seen.append(dict(sys._getframe(1).f_locals)))
        server.stop()  # replay makes no request: the server is gone
        with spanreplay.replay(trace_dir, run.run_id, break_at=model_step.seq):
            assert ask(client) == "hello there"
    (frame,) = seen
    step = frame["step"]
    assert (step.kind, step.key, step.call_id) == ("model", "claude-sonnet-4-6", model_step.call_id)
    assert step.tokens is not None
    assert (step.tokens.input, step.tokens.output) == (120, 7)
    assert step.output["attempts"][-1]["body"]["content"] == [{"type": "text", "text": "hello there"}]
    assert step.input["body"]["messages"] == [{"content": "hi", "role": "user"}]


# --- any choice of steps ----------------------------------------------------------------------

STEPS = 8


def _flat_log() -> EventLog:
    events = tuple(
        Event("flat", seq, f"tool:t#{seq - 1}", "tool", "t", orjson.dumps({"i": seq}), orjson.dumps(seq * 10))
        for seq in range(1, STEPS + 1)
    )
    return EventLog(RunInfo("flat", agent="flat", status="ok"), events)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, STEPS), max_size=STEPS), st.booleans())
def test_the_replay_stops_exactly_at_the_chosen_steps_in_order(
    monkeypatch: pytest.MonkeyPatch, chosen: list[int], as_int: bool
) -> None:
    seen: list[tuple[int, int]] = []
    handed: list[int] = []

    def hook(*args: Any, **kwargs: Any) -> None:
        seen.append((sys._getframe(1).f_locals["step"].seq, len(handed)))

    monkeypatch.setattr(sys, "breakpointhook", hook)
    break_at: Any = chosen[0] if as_int and len(chosen) == 1 else chosen
    with spanreplay.replay(_flat_log(), break_at=break_at):
        for seq in range(1, STEPS + 1):
            handed.append(spanreplay.boundary("tool", "t", {"i": seq}, lambda: pytest.fail("real work ran")))
    # Each chosen step once, in the order the code reached them, before its value was handed over.
    assert seen == [(seq, seq - 1) for seq in sorted(set(chosen))]
    assert handed == [seq * 10 for seq in range(1, STEPS + 1)]

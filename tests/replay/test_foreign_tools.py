"""Tool steps of a foreign trace: served from a recorded result, run for real where the trace has none.

The traces are written here with the OpenTelemetry SDK, span by span as a
GenAI-conventions instrumentation writes them (``chat`` spans with
``gen_ai.input.messages``/``gen_ai.output.messages``, ``execute_tool`` spans
with ``gen_ai.tool.call.arguments``/``result``), and the agent's tool is a
``@spanreplay.tool``.
"""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from helpers.messages_api_server import instrument
from spanreplay.cli import cli
from spanreplay.recording.exporters._otlp_json import LineEncoder

instrumented = pytest.fixture(instrument, name="instrumented")
MODEL = "claude-haiku-4-5"
QUESTION = "Where is order A-17?"
CALLS: list[str] = []


@spanreplay.tool
def lookup_order(order_id: str) -> dict[str, Any]:
    CALLS.append(order_id)
    return {"order_id": order_id, "status": "shipped"}


def agent(client: anthropic.Anthropic) -> str:
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
    while True:
        reply = client.messages.create(model=MODEL, max_tokens=100, messages=messages)  # type: ignore[arg-type]
        calls = [b for b in reply.content if b.type == "tool_use"]
        if not calls:
            return "".join(b.text for b in reply.content if b.type == "text")
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        results = [
            {"type": "tool_result", "tool_use_id": c.id, "content": json.dumps(lookup_order(**dict(c.input)))}
            for c in calls
        ]
        messages.append({"role": "user", "content": results})


def _chat(inputs: list[dict[str, Any]], output: list[dict[str, Any]], finish: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": MODEL,
        "gen_ai.request.max_tokens": 100,
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": output, "finish_reason": finish}]),
        "gen_ai.usage.input_tokens": 50,
        "gen_ai.usage.output_tokens": 10,
    }


def write_trace(path: Path, *, tool_result: bool | None, answered: bool = True) -> str:
    """A GenAI trace of ``agent``; ``tool_result`` None: no tool span, False: one without its result."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("some.genai.instrumentation")
    question = {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    call = {"type": "tool_call", "id": "toolu_1", "name": "lookup_order", "arguments": {"order_id": "A-17"}}
    recorded = {"order_id": "A-17", "status": "in the depot"}  # not what lookup_order returns today
    answer = {"type": "tool_call_response", "id": "toolu_1", "response": json.dumps(recorded)}
    with tracer.start_as_current_span("agent") as root:
        with tracer.start_as_current_span(f"chat {MODEL}", attributes=_chat([question], [call], "tool_call")):
            pass
        if tool_result is not None:
            attributes = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup_order",
                "gen_ai.tool.call.id": "toolu_1",
                "gen_ai.tool.call.arguments": json.dumps({"order_id": "A-17"}),
            }
            if tool_result:
                attributes["gen_ai.tool.call.result"] = json.dumps(recorded)
            with tracer.start_as_current_span("execute_tool lookup_order", attributes=attributes):
                pass
        said = [{"type": "text", "content": "It is in the depot."}]
        history = [question, {"role": "assistant", "parts": [call]}, {"role": "user", "parts": [answer]}]
        last = _chat(history, said, "stop")
        if not answered:
            del last["gen_ai.output.messages"]  # content capture cut, or the call failed
        with tracer.start_as_current_span(f"chat {MODEL}", attributes=last):
            pass
    provider.shutdown()
    encoder = LineEncoder()
    path.write_bytes(b"".join(encoder.encode(span) for span in exporter.get_finished_spans()))
    return f"{root.get_span_context().trace_id:032x}"


@pytest.fixture(name="client")
def offline_client() -> Iterator[anthropic.Anthropic]:
    CALLS.clear()
    with anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key="offline", max_retries=0) as client:
        yield client


def test_a_recorded_tool_result_is_served_and_the_tool_does_not_run(
    instrumented: None, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    trace_id = write_trace(tmp_path / "t.jsonl", tool_result=True)
    log = spanreplay.load(tmp_path / "t.jsonl", trace_id)
    assert [e.call_id for e in log] == [f"model:{MODEL}#0", "tool:lookup_order#0", f"model:{MODEL}#1"]
    assert log.events[1].attributes["gen_ai.tool.call.id"] == "toolu_1"
    with spanreplay.replay(tmp_path / "t.jsonl", trace_id) as run:
        assert agent(client) == "It is in the depot."
    assert run.outcome == "completed"
    assert CALLS == []


@pytest.mark.parametrize("tool_result", [None, False], ids=["no tool span", "tool span without result"])
def test_a_tool_the_trace_lacks_runs_for_real(
    instrumented: None, client: anthropic.Anthropic, tmp_path: Path, tool_result: bool | None
) -> None:
    trace_id = write_trace(tmp_path / "t.jsonl", tool_result=tool_result)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(spanreplay.InputChangedError) as diverged, spanreplay.replay(tmp_path / "t.jsonl", trace_id):
            agent(client)
    assert CALLS == ["A-17"]
    # It ran for real, and today's result is not the one the model was given: the next request says so.
    assert '-              "status": "in the depot"' in diverged.value.diff
    assert '+              "status": "shipped"' in diverged.value.diff
    # Said before the replay started, not discovered at the divergence.
    said = [str(w.message) for w in caught]
    assert any("cannot be replayed exactly: tool lookup_order: no recorded result" in m for m in said) == (
        tool_result is False
    )


def test_live_false_refuses_a_tool_the_trace_lacks(
    instrumented: None, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    trace_id = write_trace(tmp_path / "t.jsonl", tool_result=None)
    with (
        pytest.raises(spanreplay.UnexpectedCallError, match=r"tool 'lookup_order'.*live=False"),
        spanreplay.replay(tmp_path / "t.jsonl", trace_id, live=False),
    ):
        agent(client)
    assert CALLS == []


def test_show_marks_each_step_with_its_instrumentation_and_what_it_can_replay(tmp_path: Path) -> None:
    trace_id = write_trace(tmp_path / "t.jsonl", tool_result=False)
    result = CliRunner().invoke(cli, ["show", str(tmp_path / "t.jsonl"), trace_id, "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["run"]["recorded_by"] == "genai"
    assert shown["run"]["compared"] == ["max_tokens", "messages", "model"]
    assert shown["run"]["cannot_reproduce"] == ["tool lookup_order: no recorded result, will run live"]
    assert [s["replay"] for s in shown["steps"]] == ["model call: replayable", "model call: replayable"]
    text = CliRunner().invoke(cli, ["show", str(tmp_path / "t.jsonl"), trace_id], env={"COLUMNS": "200"})
    assert re.search(r"cannot replay\s+tool lookup_order: no recorded result, will run live", text.output)
    assert "genai  model call: replayable" in text.output


def test_a_model_call_without_a_recorded_response_is_said_up_front_and_never_served(
    instrumented: None, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    trace_id = write_trace(tmp_path / "t.jsonl", tool_result=True, answered=False)
    with (
        pytest.warns(spanreplay.SpanReplayWarning, match=f"model {MODEL}: no recorded response"),
        pytest.raises(spanreplay.ReplayDivergenceError, match="recorded no response, so it cannot be served"),
        spanreplay.replay(tmp_path / "t.jsonl", trace_id) as run,
    ):
        agent(client)
    assert run.outcome == "diverged"
    shown = json.loads(CliRunner().invoke(cli, ["show", str(tmp_path / "t.jsonl"), trace_id, "--json"]).stdout)
    assert shown["steps"][-1]["replay"].startswith("model call: no recorded response, cannot replay")


@spanreplay.tool(name="lookup_order", effect=True)
def charge_order(order_id: str) -> dict[str, Any]:
    CALLS.append(f"charged {order_id}")
    return {"order_id": order_id, "status": "charged"}


def test_a_side_effect_the_trace_lacks_is_refused_never_run(
    instrumented: None, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    trace_id = write_trace(tmp_path / "t.jsonl", tool_result=None)
    with (
        pytest.raises(spanreplay.UnexpectedCallError, match=r"tool 'lookup_order'.*side effect"),
        spanreplay.replay(tmp_path / "t.jsonl", trace_id) as run,
    ):
        charge_order("A-17")
    assert CALLS == []
    assert run.outcome == "diverged"


def test_a_refused_tool_the_agent_catches_still_ends_the_replay_diverged(
    instrumented: None, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    trace_id = write_trace(tmp_path / "t.jsonl", tool_result=None)
    replaying = spanreplay.replay(tmp_path / "t.jsonl", trace_id, live=False)
    # The agent swallows the error: the replay must not end as if nothing happened.
    with pytest.raises(spanreplay.UnexpectedCallError, match=r"live=False"), replaying:  # noqa: SIM117
        with contextlib.suppress(spanreplay.UnexpectedCallError):
            lookup_order("A-17")
    assert CALLS == []
    assert replaying.outcome == "diverged"

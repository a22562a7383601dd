"""Traces other instrumentations recorded, read as runs: listed, loaded, costed.

The files are what OpenInference's and OpenLLMetry's Anthropic instrumentors
wrote of one agent (tests/fixtures/foreign/SOURCES.md); these tests need neither installed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import spanreplay
from helpers.foreign_fixtures import ANSWER, FILES, FOREIGN, total_tokens, trace_id
from spanreplay.cli import cli
from spanreplay.readers import iter_spans
from spanreplay.sources.foreign import COMPARED, GAPS, INSTRUMENTATION

ALL = sorted(FILES)


@pytest.mark.parametrize("name", ALL)
def test_a_foreign_trace_is_one_run_named_by_its_trace_id(name: str) -> None:
    path = FOREIGN / name
    (run,) = spanreplay.runs(path)
    assert re.fullmatch(r"[0-9a-f]{32}", run.run_id)
    assert run.run_id == run.trace_id == trace_id(path)
    assert run.agent == FILES[name]
    assert run.status == "ok"
    assert run.steps == 3
    assert run.service_name == "support-agent"
    # Calls and tokens come from the foreign usage attributes.
    assert run.model_calls == 3
    assert run.tokens == total_tokens(path)
    assert run.usd > 0
    assert run.calls_without_usage == 0


@pytest.mark.parametrize("name", ALL)
def test_loading_gives_model_events_shaped_as_spanreplay_records_them(name: str) -> None:
    path = FOREIGN / name
    log = spanreplay.load(path, trace_id(path))
    assert [e.call_id for e in log] == [f"model:claude-sonnet-4-6#{n}" for n in range(3)]
    assert [e.seq for e in log] == [1, 2, 3]
    assert all(e.kind == "model" and e.attributes[INSTRUMENTATION] == FILES[name] for e in log)
    if FILES[name] == "anthropic-sdk":
        # The SDK's own spans keep no tool definitions: said on each call, and tools are not compared.
        gap = "no tool definitions (the SDK's spans leave them out): tools are not compared"
        assert all(e.attributes[GAPS] == (gap,) for e in log)
        assert log.run.gaps == (f"model claude-sonnet-4-6: {gap}",)
        assert log.run.compared == ("max_tokens", "messages", "model", "system")
    else:
        assert all(e.attributes[GAPS] == () for e in log)  # the request and the response recorded whole
        assert log.run.gaps == ()
        assert log.run.compared == ("max_tokens", "messages", "model", "system", "tools")
    first, _, last = (e.output["attempts"] for e in log)
    assert [b["name"] for b in first[0]["body"]["content"] if b["type"] == "tool_use"] == [
        "lookup_order",
        "shipping_policy",
    ]
    assert first[0]["body"]["stop_reason"] == "tool_use"
    assert last[0]["body"]["content"][0]["text"] == ANSWER
    assert last[0]["body"]["stop_reason"] == "end_turn"


def test_every_instrumentation_gives_the_same_compared_request() -> None:
    """One agent, recorded six ways: the requests, brought to one form, are equal step by step
    (but for the tools, which the SDK's own spans do not keep)."""
    inputs = {name: [e.input for e in spanreplay.load(FOREIGN / name, trace_id(FOREIGN / name))] for name in ALL}
    first = inputs["openinference-create.binpb"]
    for name, found in inputs.items():
        if FILES[name] == "anthropic-sdk":
            assert found == [{**i, "body": {k: v for k, v in i["body"].items() if k != "tools"}} for i in first]
        else:
            assert found == first
    # The last request holds the whole conversation: the tool results as the values the tools returned.
    messages = first[2]["body"]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert messages[2]["content"][0]["content"]["carrier"] == "La Poste"
    assert COMPARED not in first[2]


def test_a_trace_id_not_in_the_file_is_not_found_and_the_message_lists_the_runs() -> None:
    path = FOREIGN / "openllmetry-create.binpb"
    with pytest.raises(spanreplay.RunNotFoundError) as caught:
        spanreplay.load(path, "0" * 32)
    assert trace_id(path) in str(caught.value)


def test_runs_and_cost_on_the_command_line(tmp_path: Path) -> None:
    path = FOREIGN / "openinference-create.binpb"
    listed = CliRunner().invoke(cli, ["runs", str(path), "--json"])
    assert listed.exit_code == 0, listed.output
    (row,) = json.loads(listed.stdout)
    assert row["run_id"] == trace_id(path)
    assert row["model_calls"] == 3
    costed = CliRunner().invoke(cli, ["cost", str(path), "--by", "run", "--json"])
    assert costed.exit_code == 0, costed.output
    (group,) = json.loads(costed.stdout)["groups"]
    assert group["run"] == trace_id(path)
    assert group["calls"] == 3
    assert group["total_tokens"] == total_tokens(path)


def test_stdin_lists_and_shows_a_foreign_run() -> None:
    path = FOREIGN / "openllmetry-create.binpb"
    listed = CliRunner().invoke(cli, ["runs", "-", "--json"], input=path.read_bytes())
    assert listed.exit_code == 0, listed.output
    assert [row["run_id"] for row in json.loads(listed.stdout)] == [trace_id(path)]
    shown = CliRunner().invoke(cli, ["show", "-", trace_id(path), "--json"], input=path.read_bytes())
    assert shown.exit_code == 0, shown.output
    assert [s["replay"] for s in json.loads(shown.stdout)["steps"]] == ["model call: replayable"] * 3


@pytest.mark.parametrize("kind", ["jaeger", "tempo"])
def test_a_backend_gives_the_foreign_run_of_a_trace_id(kind: str) -> None:
    from fixtures.backends import BackendServer, serving

    path = FOREIGN / "openinference-create.binpb"
    server = BackendServer(kind)
    server.add(iter_spans(path))
    with serving(server):
        log = spanreplay.load(f"{kind}+{server.url}", trace_id(path))
    from_file = spanreplay.load(path, trace_id(path))
    assert log.run_id == trace_id(path)
    assert [(e.call_id, e.input, e.output) for e in log] == [(e.call_id, e.input, e.output) for e in from_file]


@pytest.mark.parametrize("name", ["openinference-create.binpb", "anthropic-sdk-stream.binpb"])
def test_the_report_prices_each_foreign_step_as_runs_does(name: str, tmp_path: Path) -> None:
    path = FOREIGN / name
    (run,) = spanreplay.runs(path)
    result = CliRunner().invoke(cli, ["report", str(path), run.run_id, "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 0, result.output
    assert f"(3 steps, 3 model calls, ${run.usd:.6f})" in result.output


def test_redacted_values_and_images_are_said_up_front_and_images_are_compared_as_media() -> None:
    from spanreplay.model.spans import SpanRecord
    from spanreplay.sources.foreign import foreign_log, model_input

    inputs = [
        {
            "role": "user",
            "parts": [
                {"type": "blob", "modality": "image", "content": ""},
                {"type": "text", "content": "What is this?"},
            ],
        },
        {"role": "assistant", "parts": [{"type": "text", "content": "__REDACTED__"}]},
    ]
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "claude-haiku-4-5",
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": "A cat."}]}]),
    }
    span = SpanRecord(trace_id="1" * 32, span_id="2" * 16, name="chat", attributes=attributes)
    log = foreign_log("1" * 32, [span])
    assert log is not None
    assert log.run.gaps == (
        "model claude-haiku-4-5: blob blocks: the span did not keep their data, so they are not compared",
        "model claude-haiku-4-5: values redacted by the instrumentation (__REDACTED__): "
        "compared and served as recorded",
    )
    # The image the code sends today, with its data, matches the recorded blob part.
    sent = {
        "model": "claude-haiku-4-5",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}},
                    {"type": "text", "text": "What is this?"},
                ],
            },
            {"role": "assistant", "content": "__REDACTED__"},
        ],
    }
    assert model_input(sent, log.run.compared) == log.events[0].input


def test_openinference_flattened_attributes_alone_give_the_same_steps() -> None:
    """A backend that dropped input.value and output.value (long values) leaves the flattened
    llm.* attributes: the same request is compared and the same content served, with gaps said."""
    import msgspec

    from spanreplay.sources.foreign import foreign_log

    path = FOREIGN / "openinference-create.binpb"
    whole = spanreplay.load(path, trace_id(path))
    cut = [
        msgspec.structs.replace(
            span, attributes={k: v for k, v in span.attributes.items() if k not in ("input.value", "output.value")}
        )
        for span in iter_spans(path)
    ]
    flattened = foreign_log(trace_id(path), cut)
    assert flattened is not None
    assert [e.input for e in flattened] == [e.input for e in whole]
    for short, full in zip(flattened, whole, strict=True):
        served, recorded = short.output["attempts"][0]["body"], full.output["attempts"][0]["body"]
        assert [{k: v for k, v in b.items() if v is not None} for b in served["content"]] == [
            {k: v for k, v in b.items() if v is not None and k in ("type", "text", "id", "name", "input")}
            for b in recorded["content"]
        ]
        assert served["stop_reason"] == recorded["stop_reason"]
        assert served["usage"]["output_tokens"] == recorded["usage"]["output_tokens"]
    assert any("no output.value" in gap for gap in flattened.run.gaps)


def test_the_older_flattened_conventions_read_as_the_current_ones() -> None:
    """``gen_ai.prompt.N.*``/``gen_ai.completion.N.*`` (OpenLLMetry before the message attributes)."""
    from spanreplay.model.spans import SpanRecord
    from spanreplay.sources.foreign import foreign_log

    current = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "claude-haiku-4-5",
        "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Order A-17?"}]}]),
        "gen_ai.output.messages": json.dumps(
            [
                {
                    "role": "assistant",
                    "parts": [
                        {"type": "text", "content": "Looking."},
                        {"type": "tool_call", "id": "toolu_1", "name": "lookup", "arguments": {"id": "A-17"}},
                    ],
                    "finish_reason": "tool_call",
                }
            ]
        ),
    }
    older = {
        "gen_ai.system": "Anthropic",
        "gen_ai.request.model": "claude-haiku-4-5",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "Order A-17?",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "Looking.",
        "gen_ai.completion.0.finish_reason": "tool_use",
        "gen_ai.completion.0.tool_calls.0.id": "toolu_1",
        "gen_ai.completion.0.tool_calls.0.name": "lookup",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"id": "A-17"}',
    }
    logs = [
        foreign_log("3" * 32, [SpanRecord(trace_id="3" * 32, span_id="4" * 16, name="chat", attributes=a)])
        for a in (current, older)
    ]
    assert logs[0] is not None
    assert logs[1] is not None
    (new,), (old,) = logs[0].events, logs[1].events
    assert old.input == new.input
    assert old.output == new.output
    assert old.output["attempts"][0]["body"]["stop_reason"] == "tool_use"

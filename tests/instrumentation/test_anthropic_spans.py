"""What a recorded Messages call leaves in the trace: one span, GenAI attributes, no credentials.

Also: a stream's span ends on every exit path, and each of those runs replays.
"""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, reply, serve, text, tool_use
from spanreplay.instrumentation.anthropic import AnthropicInstrumentor, ModelPrice, cost_usd, set_prices

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

USER = [{"role": "user", "content": "Where is my order A-17?"}]
ARGS: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": USER}
CHAT = f"chat {MODEL}"


def _chat_spans(exporter: InMemorySpanExporter) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(("chat ", "count_tokens "))]


def test_a_call_is_one_client_span_with_the_genai_attributes(
    server: MessagesAPIServer, trace_dir: Path, memory_exporter: InMemorySpanExporter, instrumented: None
) -> None:
    answer = reply(text("Shipped."), id="msg_abc", input_tokens=25, output_tokens=12, cache_read=40, cache_write=8)
    server.script(answer)
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client, spanreplay.record():
        client.messages.create(**ARGS)

    (span,) = _chat_spans(memory_exporter)
    attributes = dict(span.attributes or {})
    assert span.name == CHAT
    assert span.kind is SpanKind.CLIENT
    assert not [s for s in memory_exporter.get_finished_spans() if s.name.startswith("anthropic.")]
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["gen_ai.request.model"] == MODEL
    assert attributes["gen_ai.request.max_tokens"] == 256
    assert attributes["gen_ai.response.id"] == "msg_abc"
    assert attributes["gen_ai.response.model"] == MODEL
    assert attributes["gen_ai.response.finish_reasons"] == ("stop",)
    # The conventions count cached input too: 25 uncached + 40 read + 8 written.
    assert attributes["gen_ai.usage.input_tokens"] == 73
    assert attributes["gen_ai.usage.output_tokens"] == 12
    assert attributes["gen_ai.usage.cache_read.input_tokens"] == 40
    assert attributes["gen_ai.usage.cache_write.input_tokens"] == 8
    assert attributes["gen_ai.usage.cache_creation.input_tokens"] == 8
    expected_cost = (25 * 3 + 8 * 3.75 + 40 * 0.3 + 12 * 15) / 1_000_000
    assert attributes["gen_ai.usage.cost"] == pytest.approx(expected_cost)
    assert attributes["server.address"] == "127.0.0.1"
    assert attributes["anthropic.request.id"] == "req_000001"
    assert "gen_ai.input.messages" not in attributes


@pytest.mark.parametrize(
    ("stop_reason", "finish_reason"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("tool_use", "tool_call"), ("refusal", "content_filter")],
)
def test_stop_reasons_map_to_the_conventions_finish_reasons(
    stop_reason: str,
    finish_reason: str,
    server: MessagesAPIServer,
    trace_dir: Path,
    memory_exporter: InMemorySpanExporter,
    instrumented: None,
) -> None:
    server.script(reply(tool_use("lookup", {"id": 1}, "toolu_1"), stop_reason=stop_reason))
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client, spanreplay.record():
        client.messages.create(**ARGS)
    (span,) = _chat_spans(memory_exporter)
    assert (span.attributes or {})["gen_ai.response.finish_reasons"] == (finish_reason,)


def test_a_stream_records_its_events_and_time_to_first_chunk(
    server: MessagesAPIServer, trace_dir: Path, memory_exporter: InMemorySpanExporter, instrumented: None
) -> None:
    server.script(reply(text("A fairly long streamed answer."), event_gap=0.01))
    with (
        anthropic.Anthropic(base_url=server.url, api_key="test-key") as client,
        spanreplay.record() as run,
        client.messages.stream(**ARGS) as stream,
    ):
        final = stream.get_final_message()

    (span,) = _chat_spans(memory_exporter)
    attributes = dict(span.attributes or {})
    duration = ((span.end_time or 0) - (span.start_time or 0)) / 1e9
    assert 0 < attributes["gen_ai.response.time_to_first_chunk"] < duration
    assert attributes["gen_ai.response.id"] == final.id
    assert attributes["gen_ai.usage.output_tokens"] == final.usage.output_tokens
    (event,) = spanreplay.load(trace_dir, run.run_id).events
    events = event.output["attempts"][0]["events"]
    assert [e["event"] for e in events][:2] == ["message_start", "ping"]
    assert events[-1]["event"] == "message_stop"


def test_no_credential_reaches_the_trace(
    server: MessagesAPIServer, trace_dir: Path, memory_exporter: InMemorySpanExporter, instrumented: None
) -> None:
    secret = "sk-ant-api03-very-secret-key"
    with anthropic.Anthropic(base_url=server.url, api_key=secret) as client, spanreplay.record() as run:
        client.messages.create(**ARGS)
        with client.messages.stream(**ARGS) as stream:
            stream.until_done()

    assert server.requests[0].headers["authorization"] == f"Bearer {secret}"  # the key was really sent
    written = (trace_dir / f"{run.run_id}.jsonl").read_text()
    assert secret not in written
    assert "bearer" not in written.lower()
    for span in memory_exporter.get_finished_spans():
        assert secret not in json.dumps(dict(span.attributes or {}), default=str)


def test_message_content_attributes_only_with_the_conventions_switch(
    server: MessagesAPIServer,
    trace_dir: Path,
    memory_exporter: InMemorySpanExporter,
    instrumented: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    server.script(reply(text("Shipped."), tool_use("track", {"order": "A-17"}, "toolu_9")))
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client, spanreplay.record():
        client.messages.create(**ARGS, system="You are a support agent.")

    (span,) = _chat_spans(memory_exporter)
    attributes = dict(span.attributes or {})
    assert json.loads(attributes["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "Where is my order A-17?"}]}
    ]
    system = [{"type": "text", "content": "You are a support agent."}]
    assert json.loads(attributes["gen_ai.system_instructions"]) == system
    assert json.loads(attributes["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Shipped."},
                {"type": "tool_call", "id": "toolu_9", "name": "track", "arguments": {"order": "A-17"}},
            ],
            "finish_reason": "tool_call",
        }
    ]


def test_sdk_spans_switch_keeps_the_sdk_span_inside_ours(
    server: MessagesAPIServer, trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(zero_code=False, sdk_spans=True)
    try:
        with (
            anthropic.Anthropic(
                base_url=server.url,
                api_key="test-key",
                open_telemetry={"tracer_provider": spanreplay.settings().provider},
            ) as client,
            spanreplay.record(),
        ):
            client.messages.create(**ARGS)
    finally:
        instrumentor.uninstrument()
    (ours,) = _chat_spans(memory_exporter)
    (sdk,) = [s for s in memory_exporter.get_finished_spans() if s.name == "anthropic.messages.create"]
    assert sdk.parent is not None
    assert sdk.parent.span_id == ours.context.span_id


def test_calls_outside_a_run_keep_the_sdk_span_and_record_nothing(
    server: MessagesAPIServer, trace_dir: Path, memory_exporter: InMemorySpanExporter, instrumented: None
) -> None:
    provider = spanreplay.settings().provider
    with anthropic.Anthropic(
        base_url=server.url, api_key="test-key", open_telemetry={"tracer_provider": provider}
    ) as client:
        client.messages.create(**ARGS)
    names = [s.name for s in memory_exporter.get_finished_spans()]
    assert names == ["anthropic.messages.create"]
    assert not trace_dir.exists() or not list(trace_dir.iterdir())


def test_cost_uses_an_overridden_price_table() -> None:
    usage = {"input_tokens": 1_000_000, "output_tokens": 1_000_000}
    assert cost_usd("claude-unknown-9", usage) is None
    set_prices({"claude-unknown-9": ModelPrice(input=2.0, output=10.0, cache_read=0.5)})
    assert cost_usd("claude-unknown-9-20990101", usage) == pytest.approx(12.0)
    assert cost_usd("claude-unknown-9", {"cache_read_input_tokens": 2_000_000}) == pytest.approx(1.0)
    assert cost_usd("claude-haiku-4-5-20251001", usage) == pytest.approx(6.0)


# --- a stream's span ends on every exit path, and the run replays --------------------------------


def consumed(client: anthropic.Anthropic) -> list[Any]:
    with client.messages.stream(**ARGS) as stream:
        return list(stream)


def closed_early(client: anthropic.Anthropic) -> list[Any]:
    seen = []
    with client.messages.stream(**ARGS) as stream:
        for event in stream:
            seen.append(event)
            if len(seen) == 2:
                break
    return seen


def broken_by_an_exception(client: anthropic.Anthropic) -> list[Any]:
    seen: list[Any] = []
    try:
        with client.messages.stream(**ARGS) as stream:
            for event in stream:
                seen.append(event)
                raise LookupError("the agent's own bug")
    except LookupError as exc:
        seen.append(str(exc))
    return seen


def exited_unread(client: anthropic.Anthropic) -> list[Any]:
    with client.messages.stream(**ARGS):
        pass
    return []


def dropped_unread(client: anthropic.Anthropic) -> list[Any]:
    stream = client.messages.create(**ARGS, stream=True)
    del stream
    gc.collect()
    return []


@pytest.mark.parametrize("agent", [consumed, closed_early, broken_by_an_exception, exited_unread, dropped_unread])
def test_a_stream_span_ends_on_every_exit_path(
    agent: Any, server: MessagesAPIServer, trace_dir: Path, memory_exporter: InMemorySpanExporter, instrumented: None
) -> None:
    server.script(reply(text("A long answer that streams in many small pieces."), event_gap=0.005))
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client:
        with spanreplay.record() as run:
            recorded = agent(client)
            # Ended while the run is still open: not by the run's end.
            assert len(_chat_spans(memory_exporter)) == 1
        server.stop()
        with spanreplay.replay(trace_dir, run.run_id):
            assert agent(client) == recorded

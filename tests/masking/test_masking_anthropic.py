"""Masking of Claude calls: the real Anthropic SDK against a local Messages API server.

A support conversation about a customer (email, phone, card) is recorded with
the GenAI message-content attributes switched on; none of it may reach the
trace file or an exporter, and the run replays offline with the same answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, reply, serve, text, tool_use

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

EMAIL = "jane.roe@example.com"
PHONE = "+44 20 7946 0958"
CARD = "4111 1111 1111 1111"
SECRETS = (EMAIL, PHONE, CARD, "4111111111111111", "sk-ant-api03-test-key-0123456789")


def support_turn(client: anthropic.Anthropic) -> str:
    first = client.messages.create(
        model=MODEL,
        max_tokens=256,
        system=f"The customer is {EMAIL}, phone {PHONE}.",
        messages=[{"role": "user", "content": f"My card {CARD} was charged twice."}],
    )
    (call,) = [block for block in first.content if block.type == "tool_use"]
    second = client.messages.create(
        model=MODEL,
        max_tokens=256,
        messages=[
            {"role": "user", "content": f"My card {CARD} was charged twice."},
            {"role": "assistant", "content": first.content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "refunded"}]},
        ],
    )
    return "".join(block.text for block in second.content if block.type == "text")


def test_a_claude_conversation_about_a_customer_leaves_no_personal_data_behind(
    server: MessagesAPIServer,
    trace_dir: Path,
    memory_exporter: InMemorySpanExporter,
    instrumented: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    server.script(
        reply(text("Let me look."), tool_use("refund", {"email": EMAIL, "card": CARD}, "toolu_1")),
        reply(text(f"Refunded; a receipt goes to {EMAIL}.")),
    )
    with anthropic.Anthropic(base_url=server.url, api_key=SECRETS[-1]) as client, spanreplay.record() as run:
        answer = support_turn(client)
    assert answer == f"Refunded; a receipt goes to {EMAIL}."  # the agent itself saw the real values

    written = (trace_dir / f"{run.run_id}.jsonl").read_text()
    exported = json.dumps([dict(s.attributes or {}) for s in memory_exporter.get_finished_spans()], default=str)
    for secret in SECRETS:
        assert secret not in written
        assert secret not in exported
    assert "gen_ai.input.messages" in exported  # the content attributes were written, masked
    for placeholder in ("<email>", "<phone>", "<payment_card>"):
        assert placeholder in exported

    server.stop()  # replay needs no network
    log = spanreplay.load(trace_dir, run.run_id)
    with anthropic.Anthropic(base_url=server.url, api_key="unused") as client, spanreplay.replay(log) as replaying:
        # Replay answers with what was recorded: the receipt address is masked.
        assert support_turn(client) == "Refunded; a receipt goes to <email>."
    assert replaying.outcome == "completed"

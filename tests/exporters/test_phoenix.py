"""OTLP export proven end to end against a real receiver: Arize Phoenix, over HTTP/protobuf and gRPC.

A Claude agent (the real Anthropic SDK against a local Messages API server)
records a run through ``configure(otlp=True)``; Phoenix receives the spans, and
the event log rebuilt from what its REST API hands back equals the one loaded
from the local trace file: same steps, same order, same payload digests.

Phoenix is installed into its own virtualenv on first use (see
``phoenix_receiver``). Where that or its start fails, the tests skip, except
under ``CI=true``, where they fail.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, reply, serve, text, tool_use
from helpers.phoenix_receiver import Phoenix, assert_same_run, phoenix_for_tests
from spanreplay.recording.exporters._otlp import OtlpExportStats
from spanreplay.sources import build_log

pytestmark = pytest.mark.slow

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")


phoenix = pytest.fixture(phoenix_for_tests, name="phoenix", scope="module")


# --- the agent ---------------------------------------------------------------------------

NOTES = "Left the Leipzig hub on Monday; the carrier expects a delay of one day. " * 400  # ~30 KB: chunked


@spanreplay.tool
def lookup_order(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped", "tracking": "PC-88412-X", "notes": NOTES}


@spanreplay.tool
def track_shipment(tracking: str) -> dict[str, Any]:
    raise TimeoutError(f"ParcelCo tracking API timed out after 10s for {tracking}")


TOOLS = {"lookup_order": lookup_order, "track_shipment": track_shipment}
TOOL_SPECS = [
    {"name": name, "description": name, "input_schema": {"type": "object"}}
    for name in ("lookup_order", "track_shipment")
]


def support_agent(client: anthropic.Anthropic) -> str:
    """Answer one question: the model asks for tools until it answers in text."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Where is my order 1042?"}]
    opened_at = spanreplay.now().isoformat()
    while True:
        response = client.messages.create(model=MODEL, max_tokens=512, messages=messages, tools=TOOL_SPECS)  # type: ignore[arg-type]
        if response.stop_reason != "tool_use":
            return f"{response.content[0].text} (opened {opened_at})"  # type: ignore[union-attr]
        results = []
        for block in response.content:
            if block.type != "tool_use":
                continue
            try:
                content = json.dumps(TOOLS[block.name](**block.input))  # type: ignore[arg-type]
            except TimeoutError as exc:
                content = f"error: {exc}"
            results.append({"type": "tool_result", "tool_use_id": block.id, "content": content})
        messages += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in response.content]},
            {"role": "user", "content": results},
        ]


def script(server: MessagesAPIServer) -> None:
    server.script(
        reply(tool_use("lookup_order", {"order_id": "1042"}, "toolu_01"), input_tokens=310, output_tokens=41),
        reply(tool_use("track_shipment", {"tracking": "PC-88412-X"}, "toolu_02"), input_tokens=8200, output_tokens=38),
        reply(text("It is on its way, one day late."), input_tokens=8300, output_tokens=17, cache_read=8000),
    )


@pytest.fixture
def record_to(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, server: MessagesAPIServer, instrumented: None
) -> Iterator[Any]:
    providers: list[TracerProvider] = []

    def record(endpoint: str, protocol: str) -> tuple[str, OtlpExportStats]:
        for name in list(os.environ):
            if name.startswith("OTEL_"):
                monkeypatch.delenv(name)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
        provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
        providers.append(provider)
        config = spanreplay.configure(
            trace_dir=tmp_path / "traces", tracer_provider=provider, otlp=True, raise_internal_errors=True
        )
        assert config.otlp_processor is not None
        script(server)
        client = anthropic.Anthropic(base_url=server.url, api_key="test-key")
        with client, spanreplay.record(agent="support") as run:
            answer = support_agent(client)
        assert answer.startswith("It is on its way, one day late.")
        assert config.otlp_processor.force_flush(20_000)
        return run.run_id, config.otlp_processor.stats

    yield record
    for provider in providers:
        provider.shutdown()


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_the_event_log_read_back_from_phoenix_equals_the_trace_files(
    phoenix: Phoenix, record_to: Any, tmp_path: Path, protocol: str
) -> None:
    endpoint = phoenix.url if protocol == "http/protobuf" else phoenix.grpc_url
    run_id, stats = record_to(endpoint, protocol)

    local = spanreplay.load(tmp_path / "traces", run_id)
    assert [e.kind for e in local] == ["clock", "model", "tool", "model", "tool", "model"]
    spans = len(local) + 1  # the boundaries and the run's root span
    assert stats == OtlpExportStats(exported=spans, dropped=0, failed_exports=0)

    records = phoenix.span_records(run_id, spans)
    assert len(records) == spans
    remote = build_log(run_id, records, phoenix.url, damage=lambda: "")

    assert_same_run(remote, local)
    assert remote.run.status == "ok"
    failed = [e for e in remote if e.failed]
    assert [(e.key, e.error.type_name if e.error else "") for e in failed] == [("track_shipment", "TimeoutError")]
    chats = [e for e in remote if e.kind == "model"]
    assert [e.attributes["gen_ai.usage.output_tokens"] for e in chats] == [41, 38, 17]
    assert all(e.attributes["gen_ai.usage.cost"] > 0 for e in chats)


def test_phoenix_adds_openinference_attributes_that_the_reader_leaves_out(phoenix: Phoenix, record_to: Any) -> None:
    run_id, stats = record_to(phoenix.url, "http/protobuf")
    # Every span of the run: Phoenix inserts in batches, and a first batch may hold no model call.
    raw = phoenix.wait_for_spans(run_id, stats.exported)
    assert len(raw) == stats.exported
    added = {kv["key"] for span in raw for kv in span["attributes"] if phoenix.derived_by_phoenix(kv["key"])}
    # What the reader drops is really there in Phoenix's answer, and none of it is spanreplay's.
    assert "openinference.span.kind" in added
    assert not {key for key in added if key.startswith(("spanreplay.", "gen_ai."))}
    kept: set[str] = set()
    for record in phoenix.span_records(run_id, len(raw)):
        kept |= set(record.attributes)
    assert not kept & added

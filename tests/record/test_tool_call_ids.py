"""spanreplay's own tool spans name the tool_use block they answer (``gen_ai.tool.call.id``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, reply, serve, text, tool_use

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")


@spanreplay.tool
def lookup(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped"}


@spanreplay.tool
async def alookup(order_id: str) -> dict[str, Any]:
    return {"order_id": order_id, "status": "shipped"}


def tool_spans(exporter: InMemorySpanExporter) -> list[dict[str, Any]]:
    return [
        dict(s.attributes or {})
        for s in exporter.get_finished_spans()
        if (s.attributes or {}).get("spanreplay.kind") == "tool"
    ]


def test_each_tool_call_carries_the_id_of_the_tool_use_it_answers(
    server: MessagesAPIServer, trace_dir: Path, memory_exporter: InMemorySpanExporter, instrumented: None
) -> None:
    server.script(
        reply(tool_use("lookup", {"order_id": "B-2"}, "toolu_b"), tool_use("lookup", {"order_id": "A-1"}, "toolu_a")),
        reply(text("Both shipped.")),
    )
    with anthropic.Anthropic(base_url=server.url, api_key="k") as client, spanreplay.record():
        first = client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "orders?"}])
        # Called in another order than the blocks: each call still finds its own block.
        lookup("A-1")
        lookup("B-2")
        lookup("B-2")  # a block answers once: a second call is linked to none
        lookup("C-3")  # no block asked for it
        client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "and?"}])
        lookup("A-1")  # the newer response asked for no tool: the older blocks are gone
    assert first.stop_reason == "tool_use"
    ids = [
        (json.loads(a["spanreplay.input"])["order_id"], a.get("gen_ai.tool.call.id"))
        for a in tool_spans(memory_exporter)
    ]
    assert ids == [("A-1", "toolu_a"), ("B-2", "toolu_b"), ("B-2", None), ("C-3", None), ("A-1", None)]


def test_async_tools_gathered_at_once_are_linked_too(
    server: MessagesAPIServer, trace_dir: Path, memory_exporter: InMemorySpanExporter, instrumented: None
) -> None:
    server.script(
        reply(tool_use("alookup", {"order_id": "A-1"}, "toolu_1"), tool_use("alookup", {"order_id": "B-2"}, "toolu_2"))
    )

    async def agent() -> None:
        async with anthropic.AsyncAnthropic(base_url=server.url, api_key="k") as client:
            message = await client.messages.create(
                model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "?"}]
            )
            await asyncio.gather(*(alookup(**b.input) for b in message.content if b.type == "tool_use"))

    with spanreplay.record():
        asyncio.run(agent())
    linked = {
        json.loads(a["spanreplay.input"])["order_id"]: a.get("gen_ai.tool.call.id") for a in tool_spans(memory_exporter)
    }
    assert linked == {"A-1": "toolu_1", "B-2": "toolu_2"}

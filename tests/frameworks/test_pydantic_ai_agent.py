"""PydanticAI function tools, zero-code: a real Agent and the real anthropic SDK against the local Messages API.

Each test records a run with ``spanreplay.instrument_all()``, stops the server and
replays offline: the model calls come from the recording, the tools never run.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import AfterValidator, BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import ToolReturnPart
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.toolsets.function import FunctionToolset

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, reply, serve, text, tool_use
from spanreplay.instrumentation.pydantic_ai import PydanticAIToolsInstrumentor

server = pytest.fixture(serve, name="server")

ANSWER = "Order A-17 shipped with DHL and arrives in 2 days."


@pytest.fixture(name="instrumented")
def _instrumented() -> Iterator[None]:
    """Everything spanreplay has an adapter for, instrumented for one test and restored afterwards."""
    instrumentors = spanreplay.instrument_all()
    assert "pydantic_ai" in instrumentors
    yield
    for instrumentor in instrumentors.values():
        instrumentor.uninstrument()


class Order(BaseModel):
    order_id: str
    status: str
    items: list[str]


@dataclass
class Eta:
    carrier: str
    days: int


class SupportAgent:
    """An agent with a sync tool returning a pydantic model and an async one returning a dataclass."""

    def __init__(self, server: MessagesAPIServer, *, lowercase_ids: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        provider = AnthropicProvider(base_url=server.url, api_key="test-key")
        self.agent: Agent[None, str] = Agent(AnthropicModel(MODEL, provider=provider), retries=2)

        if lowercase_ids:
            # The changed code: the same schema for the model, another validated argument for the tool.
            @self.agent.tool_plain
            def lookup_order(order_id: Annotated[str, AfterValidator(str.lower)]) -> Order:
                """Look an order up by its id."""
                return self._lookup(order_id)

        else:

            @self.agent.tool_plain
            def lookup_order(order_id: str) -> Order:
                """Look an order up by its id."""
                return self._lookup(order_id)

        @self.agent.tool
        async def shipping_eta(ctx: RunContext[None], carrier: str) -> Eta:
            """How many days the carrier needs."""
            self.calls.append(("shipping_eta", {"carrier": carrier}))
            await asyncio.sleep(0)
            return Eta(carrier=carrier, days=2)

    def _lookup(self, order_id: str) -> Order:
        self.calls.append(("lookup_order", {"order_id": order_id}))
        if not order_id.startswith("A-"):
            raise ModelRetry("Order ids look like A-17.")
        return Order(order_id=order_id, status="shipped", items=["kettle"])


def script(server: MessagesAPIServer, *, first_id: str = "A-17") -> None:
    replies = [reply(tool_use("lookup_order", {"order_id": first_id}, "toolu_1"))]
    if first_id != "A-17":
        replies.append(reply(tool_use("lookup_order", {"order_id": "A-17"}, "toolu_2")))
    replies += [reply(tool_use("shipping_eta", {"carrier": "DHL"}, "toolu_3")), reply(text(ANSWER))]
    server.script(*replies)


def steps(trace_dir: Path, run_id: str) -> list[tuple[int, str, str]]:
    return [(event.seq, event.kind, event.key) for event in spanreplay.load(trace_dir, run_id)]


def tool_parts(messages: list[Any]) -> list[ToolReturnPart]:
    return [part for message in messages for part in getattr(message, "parts", ()) if isinstance(part, ToolReturnPart)]


def outcomes(messages: list[Any]) -> list[tuple[str, str, Any, str]]:
    """What the model was sent back for each tool call: which call, its content and its outcome."""
    return [(part.tool_call_id, part.tool_name, part.content, part.outcome) for part in tool_parts(messages)]


def test_run_sync_replays_offline_with_the_tools_typed_values(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    support = SupportAgent(server)
    script(server)
    with spanreplay.record() as run:
        recorded = support.agent.run_sync("Where is my order A-17?")
    server.stop()
    assert recorded.output == ANSWER
    assert len(support.calls) == 2
    assert steps(trace_dir, run.run_id) == [
        (1, "model", MODEL),
        (2, "tool", "lookup_order"),
        (3, "model", MODEL),
        (4, "tool", "shipping_eta"),
        (5, "model", MODEL),
    ]
    lookup = spanreplay.load(trace_dir, run.run_id).events[1]
    assert lookup.input == {"order_id": "A-17"}
    assert lookup.output == {"order_id": "A-17", "status": "shipped", "items": ["kettle"]}

    support.calls.clear()
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        replayed = support.agent.run_sync("Where is my order A-17?")
    assert replaying.outcome == "completed"
    assert replayed.output == ANSWER
    assert support.calls == []
    contents = [part.content for part in tool_parts(replayed.all_messages())]
    assert contents == [Order(order_id="A-17", status="shipped", items=["kettle"]), Eta(carrier="DHL", days=2)]
    assert [type(content) for content in contents] == [Order, Eta]


def test_await_run_replays_offline(server: MessagesAPIServer, trace_dir: Path, instrumented: None) -> None:
    support = SupportAgent(server)
    script(server)

    async def main() -> str:
        result = await support.agent.run("Where is my order A-17?")
        return result.output

    with spanreplay.record() as run:
        assert asyncio.run(main()) == ANSWER
    server.stop()
    assert [key for _, kind, key in steps(trace_dir, run.run_id) if kind == "tool"] == ["lookup_order", "shipping_eta"]

    support.calls.clear()
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        assert asyncio.run(main()) == ANSWER
    assert replaying.outcome == "completed"
    assert support.calls == []


def test_parallel_tool_calls_of_one_response_replay_in_their_own_places(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    support = SupportAgent(server)
    server.script(
        reply(
            tool_use("lookup_order", {"order_id": "A-17"}, "toolu_1"),
            tool_use("shipping_eta", {"carrier": "DHL"}, "toolu_2"),
            tool_use("shipping_eta", {"carrier": "UPS"}, "toolu_3"),
        ),
        reply(text(ANSWER)),
    )
    with spanreplay.record() as run:
        recorded = support.agent.run_sync("Where is my order A-17?")
    server.stop()
    assert len(support.calls) == 3
    tools = [event for event in spanreplay.load(trace_dir, run.run_id) if event.kind == "tool"]
    assert sorted((event.key, str(event.input)) for event in tools) == [
        ("lookup_order", "{'order_id': 'A-17'}"),
        ("shipping_eta", "{'carrier': 'DHL'}"),
        ("shipping_eta", "{'carrier': 'UPS'}"),
    ]

    support.calls.clear()
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        replayed = support.agent.run_sync("Where is my order A-17?")
    assert replaying.outcome == "completed"
    assert support.calls == []
    assert outcomes(replayed.all_messages()) == outcomes(recorded.all_messages())
    assert [content for _, _, content, _ in outcomes(replayed.all_messages())] == [
        Order(order_id="A-17", status="shipped", items=["kettle"]),
        Eta(carrier="DHL", days=2),
        Eta(carrier="UPS", days=2),
    ]


def test_a_changed_tool_argument_diverges_at_the_tool_step(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    script(server)
    with spanreplay.record() as run:
        SupportAgent(server).agent.run_sync("Where is my order A-17?")
    server.stop()

    changed = SupportAgent(server, lowercase_ids=True)
    with (
        pytest.raises(spanreplay.InputChangedError) as caught,
        spanreplay.replay(trace_dir, run.run_id),
    ):
        changed.agent.run_sync("Where is my order A-17?")
    assert caught.value.seq == 2
    assert caught.value.call_id.endswith("tool:lookup_order#0")
    assert '-  "order_id": "A-17"' in caught.value.diff
    assert '+  "order_id": "a-17"' in caught.value.diff
    assert changed.calls == []


def test_a_model_retry_raised_by_a_tool_replays_as_the_same_retry(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    support = SupportAgent(server)
    script(server, first_id="17")
    with spanreplay.record() as run:
        recorded = support.agent.run_sync("Where is my order 17?")
    server.stop()
    assert [call for call, _ in support.calls] == ["lookup_order", "lookup_order", "shipping_eta"]
    first = spanreplay.load(trace_dir, run.run_id).events[1]
    assert first.error is not None
    assert (first.error.type_name, first.error.message) == ("ModelRetry", "Order ids look like A-17.")

    support.calls.clear()
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        replayed = support.agent.run_sync("Where is my order 17?")
    assert replaying.outcome == "completed"
    assert support.calls == []
    assert replayed.output == recorded.output == ANSWER
    retried = [part for part in tool_parts(replayed.all_messages()) if part.outcome == "retried"]
    assert [(part.tool_name, part.content, part.retry.cause) for part in retried] == [
        ("lookup_order", "Order ids look like A-17.", "model_retry")
    ]
    assert outcomes(replayed.all_messages()) == outcomes(recorded.all_messages())


def test_a_tool_also_decorated_with_spanreplay_tool_is_recorded_once(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    agent: Agent[None, str] = Agent(AnthropicModel(MODEL, provider=AnthropicProvider(base_url=server.url, api_key="k")))

    @agent.tool_plain
    @spanreplay.tool(name="decorated_lookup")
    def lookup_order(order_id: str) -> str:
        return f"{order_id}: shipped"

    server.script(reply(tool_use("lookup_order", {"order_id": "A-17"}, "toolu_1")), reply(text(ANSWER)))
    with spanreplay.record() as run:
        agent.run_sync("Where is my order A-17?")
    assert [key for _, kind, key in steps(trace_dir, run.run_id) if kind == "tool"] == ["decorated_lookup"]


def test_outside_a_run_the_tools_run_unrecorded(server: MessagesAPIServer, instrumented: None) -> None:
    support = SupportAgent(server)
    script(server)
    assert support.agent.run_sync("Where is my order A-17?").output == ANSWER
    assert [call for call, _ in support.calls] == ["lookup_order", "shipping_eta"]


@pytest.mark.parametrize(
    ("version", "said"),
    [("2.60.0", "is outside the tested range (pydantic-ai-slim >= 2.68, < 3)"), (None, "is not installed")],
)
def test_outside_the_tested_range_the_adapter_logs_one_line_and_wraps_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, version: str | None, said: str
) -> None:
    real = importlib.metadata.version

    def fake(name: str) -> str:
        if name != "pydantic-ai-slim":
            return real(name)
        if version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(importlib.metadata, "version", fake)
    instrumentor = PydanticAIToolsInstrumentor()
    assert not instrumentor.is_instrumented_by_opentelemetry
    before = FunctionToolset.__dict__["call_tool"]
    with caplog.at_level(logging.INFO, logger="spanreplay"):
        instrumentor.instrument()
    assert FunctionToolset.__dict__["call_tool"] is before
    assert not instrumentor.is_instrumented_by_opentelemetry
    lines = [record.getMessage() for record in caplog.records if record.name == "spanreplay"]
    assert len(lines) == 1
    assert said in lines[0]
    assert "pip install 'spanreplay[pydantic-ai]'" in lines[0]

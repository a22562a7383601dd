"""LangChain tools as boundaries: their types on replay, injected arguments, one record per call, the range."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import InjectedToolArg, ToolException, tool
from langgraph.types import Command
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from spanreplay import semconv as sc
from spanreplay.instrumentation.langchain import LangChainToolsInstrumentor

ran: Counter[str] = Counter()


@pytest.fixture(name="instrumented")
def _instrumented() -> Iterator[None]:
    instrumentor = LangChainToolsInstrumentor()
    instrumentor.instrument()
    ran.clear()
    yield
    instrumentor.uninstrument()


@tool
def lookup(order_id: str, tenant: Annotated[str, InjectedToolArg] = "acme") -> dict[str, Any]:
    """Look up an order."""
    ran["lookup"] += 1
    return {"order_id": order_id, "tenant": tenant, "status": "shipped"}


@tool(response_format="content_and_artifact")
def report(order_id: str) -> tuple[str, list[int]]:
    """A report with its raw rows."""
    ran["report"] += 1
    return f"report {order_id}", [1, 2, 3]


@tool
async def alookup(order_id: str) -> str:
    """Look up an order, asynchronously."""
    ran["alookup"] += 1
    return f"{order_id}: shipped"


@tool
@spanreplay.tool
def decorated(order_id: str) -> str:
    """A tool that is a @spanreplay.tool too."""
    ran["decorated"] += 1
    return f"{order_id}: decorated"


@tool
@spanreplay.tool
async def adecorated(order_id: str) -> str:
    """An async tool that is a @spanreplay.tool too."""
    ran["adecorated"] += 1
    return f"{order_id}: decorated"


@tool
def fails(order_id: str) -> str:
    """A tool that fails."""
    ran["fails"] += 1
    raise ToolException(f"no order {order_id}")


@tool
def moves(order_id: str) -> Command:  # type: ignore[type-arg]
    """A tool that updates the graph state."""
    ran["moves"] += 1
    note = ToolMessage(f"moved {order_id}", tool_call_id="toolu_move", name="moves")
    return Command(update={"messages": [note], "moved": order_id})


def _call(args: dict[str, Any], id: str) -> dict[str, Any]:
    return {"type": "tool_call", "name": "x", "args": args, "id": id}


def _both(trace_dir: Path, work: Any) -> tuple[Any, Any]:
    """``work()`` recorded, then replayed; what each gave (the run id in ``recorded_runs``)."""
    with spanreplay.record() as run:
        recorded = work()
    ran.clear()
    with spanreplay.replay(trace_dir, run.run_id) as replay:
        replayed = work()
    assert replay.outcome == "completed"
    assert ran == Counter()
    recorded_runs.append(run.run_id)
    return recorded, replayed


recorded_runs: list[str] = []


def test_invoked_with_a_tool_call_it_replays_the_tool_message(trace_dir: Path, instrumented: None) -> None:
    recorded, replayed = _both(trace_dir, lambda: report.invoke(_call({"order_id": "A-17"}, "toolu_1")))
    assert isinstance(replayed, ToolMessage)
    assert replayed == recorded
    assert (replayed.content, replayed.artifact, replayed.tool_call_id) == ("report A-17", [1, 2, 3], "toolu_1")


def test_invoked_with_arguments_it_replays_the_content(trace_dir: Path, instrumented: None) -> None:
    recorded, replayed = _both(trace_dir, lambda: (report.invoke({"order_id": "A-17"}), lookup.run("A-17")))
    assert replayed == recorded == ("report A-17", {"order_id": "A-17", "tenant": "acme", "status": "shipped"})


def test_a_command_comes_back_as_a_command(trace_dir: Path, instrumented: None) -> None:
    recorded, replayed = _both(trace_dir, lambda: moves.invoke(_call({"order_id": "A-17"}, "toolu_move")))
    assert isinstance(replayed, Command)
    assert isinstance(replayed.update["messages"][0], ToolMessage)
    assert replayed == recorded


def test_async_tools_replay_without_running(trace_dir: Path, instrumented: None) -> None:
    recorded, replayed = _both(trace_dir, lambda: asyncio.run(alookup.ainvoke({"order_id": "A-17"})))
    assert replayed == recorded == "A-17: shipped"


def test_injected_arguments_stay_out_of_the_input_and_the_call_id_is_on_the_span(
    trace_dir: Path, instrumented: None, memory_exporter: InMemorySpanExporter
) -> None:
    with spanreplay.record() as run:
        lookup.invoke(_call({"order_id": "A-17", "tenant": "globex"}, "toolu_7"))
    (event,) = [e for e in spanreplay.load(trace_dir, run.run_id) if e.kind == sc.KIND_TOOL]
    assert (event.key, event.input_json) == ("lookup", b'{"order_id":"A-17"}')
    (span,) = [
        s for s in memory_exporter.get_finished_spans() if s.name == sc.boundary_span_name(sc.KIND_TOOL, "lookup")
    ]
    assert span.attributes is not None
    assert span.attributes[sc.GEN_AI_TOOL_CALL_ID] == "toolu_7"


def test_a_tool_that_is_also_a_spanreplay_tool_is_recorded_once(trace_dir: Path, instrumented: None) -> None:
    def work() -> tuple[Any, Any]:
        return decorated.invoke({"order_id": "A-17"}), asyncio.run(adecorated.ainvoke({"order_id": "B-2"}))

    recorded, replayed = _both(trace_dir, work)
    assert replayed == recorded
    tools = [e.call_id for e in spanreplay.load(trace_dir, recorded_runs[-1]) if e.kind == sc.KIND_TOOL]
    # arun awaits the coroutine in a task of its own: a branch, whose only call is the tool's.
    assert tools == ["tool:decorated#0", "branch:StructuredTool._arun#0/tool:adecorated#0"]


def test_a_failing_tool_fails_again_on_replay_without_running(trace_dir: Path, instrumented: None) -> None:
    with spanreplay.record() as run, pytest.raises(ToolException, match="no order A-17"):
        fails.invoke({"order_id": "A-17"})
    ran.clear()
    with spanreplay.replay(trace_dir, run.run_id), pytest.raises(ToolException, match="no order A-17"):
        fails.invoke({"order_id": "A-17"})
    assert ran == Counter()


def test_outside_a_run_tools_run_untouched(instrumented: None) -> None:
    assert lookup.invoke({"order_id": "A-17"})["status"] == "shipped"
    assert ran == Counter({"lookup": 1})


@pytest.mark.parametrize(
    ("version", "said"),
    [("2.0.1", "langchain-core 2.0.1 is outside the tested range"), (None, "langchain-core is not installed")],
)
def test_out_of_range_or_absent_it_skips_with_one_log_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, version: str | None, said: str
) -> None:
    real = importlib.metadata.version

    def version_of(name: str) -> str:
        if name == "langchain-core":
            if version is None:
                raise importlib.metadata.PackageNotFoundError(name)
            return version
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version_of)
    instrumentor = LangChainToolsInstrumentor()
    with caplog.at_level(logging.INFO, logger="spanreplay"):
        instrumentor.instrument()
    assert not instrumentor.is_instrumented_by_opentelemetry
    assert [r.getMessage() for r in caplog.records if said in r.getMessage()] != []
    assert len(caplog.records) == 1
    assert "pip install 'spanreplay[langchain]'" in caplog.records[0].getMessage()

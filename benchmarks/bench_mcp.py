"""Record overhead of one MCP tool call through the adapter, against a bare OpenTelemetry SDK span.

Even over the SDK's in-memory transport an MCP round trip costs milliseconds
(the stdio one to a subprocess more), which hides a wrapper's microseconds. So
the headline times the adapter's ``call_tool`` wrapper itself, handed a session
call that returns a ready ``CallToolResult`` at once, inside
``spanreplay.record()`` (durable file on), against that same call inside a bare
SDK span whose exporter does nothing. Then, whole calls to an MCP server in this
process over the in-memory transport: outside any run, in a bare span, and
recorded.

    python benchmarks/bench_mcp.py [--quick] [--json]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from _common import Case, Figure, emit, interleaved, median, noise, parse_args, timed
from mcp import ClientSession
from mcp.client._memory import InMemoryTransport
from mcp.server.mcpserver import MCPServer
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

import spanreplay
from spanreplay.instrumentation.mcp import McpInstrumentor

NAME = "mcp"
GOAL_RATIO = 1.5  # the adapter's recorded tool call / the same call in a bare span, as bench_record

server = MCPServer("bench")


@server.tool()
def lookup_order(order_id: str) -> dict[str, Any]:
    """An order's status."""
    return {"order_id": order_id, "status": "shipped", "total": 42.5}


class NullExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


def _batch(calls: int, around: Callable[[], Any] | None) -> Case:
    """A case: ``calls`` tool calls on one session, each inside ``around()`` when given."""

    def case() -> int:
        async def body() -> int:
            async with InMemoryTransport(server) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                await session.list_tools()
                start = time.perf_counter_ns()
                for i in range(calls):
                    if around is None:
                        await session.call_tool("lookup_order", {"order_id": f"A-{i}"})
                    else:
                        with around():
                            await session.call_tool("lookup_order", {"order_id": f"A-{i}"})
                return time.perf_counter_ns() - start

        return anyio.run(body)

    return case


def _recorded(calls: int, trace_dir: Path) -> Case:
    def case() -> int:
        async def body() -> int:
            async with (
                InMemoryTransport(server) as (read, write),
                ClientSession(read, write) as session,
                spanreplay.record(),
            ):
                await session.initialize()
                await session.list_tools()
                start = time.perf_counter_ns()
                for i in range(calls):
                    await session.call_tool("lookup_order", {"order_id": f"A-{i}"})
                return time.perf_counter_ns() - start

        return anyio.run(body)

    return case


RESULT = None  # the ready CallToolResult, built in measure()


async def _ready(*args: Any, **kwargs: Any) -> Any:
    return RESULT


def _wrapper_alone(calls: int, around: Callable[[], Any] | None) -> Case:
    """``calls`` calls of the adapter's wrapper over a session call that answers at once."""
    from spanreplay.instrumentation.mcp import _session

    def case() -> int:
        async def body() -> int:
            if around is not None:
                start = time.perf_counter_ns()
                for i in range(calls):
                    with around():
                        await _ready("lookup_order", {"order_id": f"A-{i}"})
                return time.perf_counter_ns() - start
            async with spanreplay.record():
                start = time.perf_counter_ns()
                for i in range(calls):
                    await _session.call_tool(_ready, None, ("lookup_order", {"order_id": f"A-{i}"}), {})
                return time.perf_counter_ns() - start

        return anyio.run(body)

    return case


def measure(*, calls: int, repeats: int) -> list[Figure]:
    global RESULT
    import mcp.types as types

    RESULT = types.CallToolResult(
        content=[types.TextContent(type="text", text='{"order_id": "A-17", "status": "shipped"}')],
        structured_content={"order_id": "A-17", "status": "shipped", "total": 42.5},
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    provider.add_span_processor(SimpleSpanProcessor(NullExporter()))
    tracer = provider.get_tracer("bench")
    trace_dir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-mcp-"))
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider)
    instrumentor = McpInstrumentor()
    instrumentor.instrument()
    try:

        def bare_span() -> Any:
            return tracer.start_as_current_span(
                "execute_tool lookup_order", attributes={"gen_ai.tool.name": "lookup_order"}
            )

        cases = {
            "wrapper in a bare span": _wrapper_alone(calls * 10, bare_span),
            "wrapper recorded": _wrapper_alone(calls * 10, None),
            "round trip": _batch(calls, None),
            "round trip in a bare span": _batch(calls, bare_span),
            "spanreplay": _recorded(calls, trace_dir),
        }
        samples = interleaved(cases, repeats=repeats)
    finally:
        instrumentor.uninstrument()
        shutil.rmtree(trace_dir, ignore_errors=True)
    us = {
        name: [ns / (calls * 10 if name.startswith("wrapper") else calls) / 1000 for ns in values]
        for name, values in samples.items()
    }
    spanned, ours = median(us["round trip in a bare span"]), median(us["spanreplay"])
    ratio = ours / spanned
    headline = median(us["wrapper recorded"]) / median(us["wrapper in a bare span"])
    pairs = zip(us["wrapper recorded"], us["wrapper in a bare span"], strict=True)
    return [
        timed(NAME, "adapter call_tool wrapper, recorded, durable file on", us["wrapper recorded"]),
        timed(NAME, "the same call in a bare SDK span", us["wrapper in a bare span"]),
        Figure(
            NAME,
            "ratio adapter tool call / bare span",
            headline,
            "x",
            goal=f"<= {GOAL_RATIO}",
            met=headline <= GOAL_RATIO,
            note=noise([a / b for a, b in pairs]),
        ),
        timed(NAME, "call_tool outside a run (in-memory server round trip)", us["round trip"]),
        timed(NAME, "call_tool in a bare SDK span", us["round trip in a bare span"]),
        timed(NAME, "call_tool recorded by the adapter, durable file on", us["spanreplay"]),
        Figure(
            NAME,
            "ratio recorded call / call in a bare span",
            ratio,
            "x",
            note=noise([a / b for a, b in zip(us["spanreplay"], us["round trip in a bare span"], strict=True)]),
        ),
        Figure(NAME, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    calls, repeats = (50, 2) if args.quick else (500, 9)
    emit(measure(calls=calls, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

"""Record overhead of one PydanticAI function tool call through the adapter (1 KB in, 1 KB out), durable file on.

The subject is ``FunctionToolset.call_tool`` instrumented by
``PydanticAIToolsInstrumentor``, inside a run: the one call every function tool
of an agent passes through. Baseline, in the same process: the same toolset's
uninstrumented ``call_tool`` inside a bare OpenTelemetry SDK span that carries the
very same attributes (captured from a span the adapter wrote) through a
SimpleSpanProcessor whose exporter does nothing. Both sides pay for PydanticAI's
own call; the ratio is what recording adds. The tool is async, so no thread hop
blurs the figure. Also shown: the adapter with the file off.

    python benchmarks/bench_pydantic_ai.py [--quick] [--json]
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from _common import QUERY, Case, Figure, emit, interleaved, lookup_plain, median, parse_args, spread, timed
from bench_record import NullExporter
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets.function import FunctionToolset
from pydantic_ai.usage import RunUsage

import spanreplay
from spanreplay.instrumentation.pydantic_ai import PydanticAIToolsInstrumentor

GOAL_RATIO = 1.5  # adapter / bare SDK span with the same attributes, the @spanreplay.tool goal
NAME = "pydantic_ai"

toolset: FunctionToolset[None] = FunctionToolset()


@toolset.tool_plain
async def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


class Bench:
    """The toolset, its tool and a run context, ready to call ``call_tool`` with."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.ctx: RunContext[None] = RunContext(deps=None, model=TestModel(), usage=RunUsage())
        self.tool = self.loop.run_until_complete(toolset.get_tools(self.ctx))["lookup"]
        self.args = {"query": QUERY}

    def call(self) -> Awaitable[Any]:
        return toolset.call_tool("lookup", self.args, self.ctx, self.tool)

    def timed_batch(self, calls: int, call: Callable[[], Awaitable[Any]]) -> int:
        async def batch() -> int:
            start = time.perf_counter_ns()
            for _ in range(calls):
                await call()
            return time.perf_counter_ns() - start

        return self.loop.run_until_complete(batch())


def captured_attributes(bench: Bench) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Name, start and end attributes of a real span the adapter wrote for the 1 KB call."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spanreplay.configure(trace_dir=None, tracer_provider=provider)
    with spanreplay.record(agent="capture"):
        bench.timed_batch(1, bench.call)
    provider.shutdown()
    span = next(s for s in exporter.get_finished_spans() if "spanreplay.call_id" in (s.attributes or {}))
    attributes = dict(span.attributes or {})
    end = {k: v for k, v in attributes.items() if k.startswith("spanreplay.output")}
    start = {k: v for k, v in attributes.items() if k not in end}
    return span.name, start, end


def measure(*, calls: int, repeats: int) -> list[Figure]:
    instrumentor = PydanticAIToolsInstrumentor()
    instrumentor.instrument()
    bench = Bench()
    # The toolset's own call_tool, unwrapped: what the baseline pays PydanticAI for.
    original = FunctionToolset.call_tool.__wrapped__  # type: ignore[attr-defined]
    name, start_attributes, end_attributes = captured_attributes(bench)
    resource = Resource.create({"service.name": "bench"})
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    trace_dir = workdir / "traces"

    baseline_provider = TracerProvider(resource=resource)
    baseline_provider.add_span_processor(SimpleSpanProcessor(NullExporter()))
    baseline_tracer = baseline_provider.get_tracer("bench")
    provider = TracerProvider(resource=resource)

    async def spanned() -> Any:
        span = baseline_tracer.start_span(name, context=ctx, attributes=start_attributes)
        result = await original(toolset, "lookup", bench.args, bench.ctx, bench.tool)
        span.set_attributes(end_attributes)
        span.end()
        return result

    root = baseline_tracer.start_span("invoke_agent bench")
    ctx = trace.set_span_in_context(root)

    def baseline() -> int:
        return bench.timed_batch(calls, spanned)

    def record(file_on: bool) -> Case:
        def case() -> int:
            spanreplay.configure(trace_dir=trace_dir if file_on else None, tracer_provider=provider, masking=True)
            with spanreplay.record(agent="bench"):
                return bench.timed_batch(calls, bench.call)

        return case

    cases: dict[str, Case] = {"baseline": baseline, "adapter": record(file_on=True), "adapter_nofile": record(False)}
    try:
        samples = interleaved(cases, repeats=repeats)
    finally:
        root.end()
        baseline_provider.shutdown()
        provider.shutdown()
        bench.loop.close()
        instrumentor.uninstrument()
        shutil.rmtree(workdir, ignore_errors=True)

    us = {case: [ns / calls / 1000 for ns in values] for case, values in samples.items()}
    ratios = [a / b for a, b in zip(us["adapter"], us["baseline"], strict=True)]
    headline = median(ratios)
    return [
        timed(NAME, "bare OTel span around the uninstrumented call_tool", us["baseline"]),
        timed(NAME, "adapter call_tool in a run, durable file on", us["adapter"]),
        timed(NAME, "adapter call_tool in a run, file off", us["adapter_nofile"]),
        Figure(
            NAME,
            "ratio adapter / bare span",
            headline,
            "x",
            goal=f"<= {GOAL_RATIO:g}x",
            met=headline <= GOAL_RATIO,
            note=f"median of per-repeat ratios, {min(ratios):.2f}-{max(ratios):.2f} (spread {spread(ratios):.0%}); "
            f"best/best {min(us['adapter']) / min(us['baseline']):.2f}x",
        ),
        Figure(NAME, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"),
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    calls, repeats = (200, 3) if args.quick else (2000, 15)
    emit(measure(calls=calls, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

"""Record overhead of one LangChain tool call (1 KB in, 1 KB out) made zero-code, durable file on.

The subject: ``tool.invoke({"query": ...})`` of a plain ``@langchain_core.tools.tool``,
recorded by ``LangChainToolsInstrumentor`` inside ``spanreplay.record()``. The
baseline, in the same process: the same ``invoke`` under a bare OpenTelemetry
SDK span carrying the very same attributes (captured from a span spanreplay
wrote) through a SimpleSpanProcessor whose exporter does nothing: the headline
ratio. Also shown: the bare ``invoke`` alone (what LangChain itself costs: its
callbacks and input validation), and the adapter's own cost over the bare span.

    python benchmarks/bench_langchain.py [--quick] [--json]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import QUERY, Case, Figure, emit, interleaved, lookup_plain, median, noise, parse_args, spread, timed
from bench_record import NullExporter
from langchain_core.tools import tool
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from spanreplay.instrumentation.langchain import LangChainToolsInstrumentor

GOAL_RATIO = 1.5  # recorded invoke / invoke under a bare SDK span with the same attributes
NAME = "langchain"


@tool
def lookup(query: str) -> dict[str, str]:
    """Look something up."""
    return lookup_plain(query)


ARGS = {"query": QUERY}


def captured_attributes() -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Name, start and end attributes of the span spanreplay writes for the call."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spanreplay.configure(trace_dir=None, tracer_provider=provider)
    with spanreplay.record(agent="capture"):
        lookup.invoke(ARGS)
    provider.shutdown()
    span = next(s for s in exporter.get_finished_spans() if "spanreplay.call_id" in (s.attributes or {}))
    attributes = dict(span.attributes or {})
    end = {k: v for k, v in attributes.items() if k.startswith("spanreplay.output")}
    start = {k: v for k, v in attributes.items() if k not in end}
    return span.name, start, end


def measure(*, calls: int, repeats: int) -> list[Figure]:
    instrumentor = LangChainToolsInstrumentor()
    instrumentor.instrument()
    try:
        return timings(calls=calls, repeats=repeats)
    finally:
        instrumentor.uninstrument()


def timings(*, calls: int, repeats: int) -> list[Figure]:
    """The figures, with the tools instrumented ("plain" then runs instrumented outside a run, as an agent would)."""
    name, start_attributes, end_attributes = captured_attributes()
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    baseline_provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    baseline_provider.add_span_processor(SimpleSpanProcessor(NullExporter()))
    tracer = baseline_provider.get_tracer("bench")
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))

    def plain() -> int:
        start = time.perf_counter_ns()
        for _ in range(calls):
            lookup.invoke(ARGS)
        return time.perf_counter_ns() - start

    def bare() -> int:
        root = tracer.start_span("invoke_agent bench")
        ctx = trace.set_span_in_context(root)
        start = time.perf_counter_ns()
        for _ in range(calls):
            span = tracer.start_span(name, context=ctx, attributes=start_attributes)
            lookup.invoke(ARGS)
            span.set_attributes(end_attributes)
            span.end()
        elapsed = time.perf_counter_ns() - start
        root.end()
        return elapsed

    def recorded() -> int:
        spanreplay.configure(trace_dir=workdir / "traces", tracer_provider=provider)
        with spanreplay.record(agent="bench"):
            start = time.perf_counter_ns()
            for _ in range(calls):
                lookup.invoke(ARGS)
            return time.perf_counter_ns() - start

    cases: dict[str, Case] = {"plain": plain, "baseline": bare, "spanreplay": recorded}
    try:
        samples = interleaved(cases, repeats=repeats)
    finally:
        baseline_provider.shutdown()
        provider.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)

    us = {case: [ns / calls / 1000 for ns in values] for case, values in samples.items()}
    ratios = [a / b for a, b in zip(us["spanreplay"], us["baseline"], strict=True)]
    headline = median(ratios)
    adapter = median(us["spanreplay"]) - median(us["plain"])
    span_only = median(us["baseline"]) - median(us["plain"])
    return [
        timed(NAME, "tool.invoke, no run (LangChain's own cost)", us["plain"]),
        timed(NAME, "tool.invoke under a bare OTel span (SimpleSpanProcessor, no-op exporter)", us["baseline"]),
        timed(NAME, "tool.invoke recorded zero-code (durable file, masking on)", us["spanreplay"]),
        Figure(
            NAME,
            "ratio recorded / bare span",
            headline,
            "x",
            goal=f"<= {GOAL_RATIO}",
            met=headline <= GOAL_RATIO,
            note=f"median of per-repeat ratios, {min(ratios):.2f}-{max(ratios):.2f} (spread {spread(ratios):.0%})",
        ),
        Figure(
            NAME,
            "recording's cost over LangChain's / the bare span's",
            adapter / span_only if span_only > 0 else float("nan"),
            "x",
            note=f"{adapter:.1f} vs {span_only:.1f} us/call; {noise(us['spanreplay'])}",
        ),
        Figure(NAME, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"),
    ]


def main() -> None:
    args = parse_args(__doc__ or "")
    calls, repeats = (100, 3) if args.quick else (1_000, 9)
    emit(measure(calls=calls, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

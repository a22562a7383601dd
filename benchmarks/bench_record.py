"""Record overhead of one ``@spanreplay.tool`` call (1 KB in, 1 KB out), durable file on.

Baseline, in the same process: a bare OpenTelemetry SDK span that carries the very
same attributes (captured from a span spanreplay wrote) through a SimpleSpanProcessor
whose exporter does nothing. Also shown: spanreplay with the file switched off (the
cost of the span and the codec alone) and agent-rewind's ``@rewind.tool`` recording
the same call to its own file.

    python benchmarks/bench_record.py [--quick] [--json]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import (
    QUERY,
    Case,
    Figure,
    emit,
    interleaved,
    lookup_plain,
    median,
    noise,
    parse_args,
)
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay

GOAL_RATIO = 2.0
NAME = "record"


class NullExporter(SpanExporter):
    """An exporter that drops every span: the baseline pays for the SDK span alone."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


@spanreplay.tool(name="lookup")
def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


def captured_attributes() -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Name, start and end attributes of a real spanreplay span for the 1 KB call."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spanreplay.configure(trace_dir=None, tracer_provider=provider)
    with spanreplay.record(agent="capture"):
        lookup(QUERY)
    provider.shutdown()
    span = next(s for s in exporter.get_finished_spans() if "spanreplay.call_id" in (s.attributes or {}))
    attributes = dict(span.attributes or {})
    end = {k: v for k, v in attributes.items() if k.startswith("spanreplay.output")}
    start = {k: v for k, v in attributes.items() if k not in end}
    return span.name, start, end


def measure(*, calls: int, repeats: int) -> list[Figure]:
    name, start_attributes, end_attributes = captured_attributes()
    resource = Resource.create({"service.name": "bench"})

    baseline_provider = TracerProvider(resource=resource)
    baseline_provider.add_span_processor(SimpleSpanProcessor(NullExporter()))
    baseline_tracer = baseline_provider.get_tracer("bench")

    provider = TracerProvider(resource=resource)
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    trace_dir = workdir / "traces"

    def baseline() -> int:
        # Under a root span, like the boundaries under their run span.
        root = baseline_tracer.start_span("invoke_agent bench")
        ctx = trace.set_span_in_context(root)
        start = time.perf_counter_ns()
        for _ in range(calls):
            span = baseline_tracer.start_span(name, context=ctx, attributes=start_attributes)
            lookup_plain(QUERY)
            span.set_attributes(end_attributes)
            span.end()
        elapsed = time.perf_counter_ns() - start
        root.end()
        return elapsed

    def record(file_on: bool) -> Case:
        def case() -> int:
            spanreplay.configure(trace_dir=trace_dir if file_on else None, tracer_provider=provider)
            with spanreplay.record(agent="bench"):
                start = time.perf_counter_ns()
                for _ in range(calls):
                    lookup(QUERY)
                elapsed = time.perf_counter_ns() - start
            return elapsed

        return case

    cases: dict[str, Case] = {
        "baseline": baseline,
        "spanreplay": record(file_on=True),
        "spanreplay_nofile": record(file_on=False),
    }
    rewind_note = ""
    try:
        import rewind
    except ImportError:
        rewind_note = "agent-rewind is not installed (pip install agent-rewind)"
    else:
        rewind_lookup = rewind.tool(name="lookup")(lookup_plain)
        counter = iter(range(1_000_000))

        def rewind_record() -> int:
            path = workdir / f"rewind-{next(counter)}.rewind"
            with rewind.record(path):
                start = time.perf_counter_ns()
                for _ in range(calls):
                    rewind_lookup(QUERY)
                elapsed = time.perf_counter_ns() - start
            path.unlink()
            return elapsed

        cases["agent_rewind"] = rewind_record

    try:
        samples = interleaved(cases, repeats=repeats)
    finally:
        provider.shutdown()
        baseline_provider.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)

    us = {case: [ns / calls / 1000 for ns in values] for case, values in samples.items()}
    base = median(us["baseline"])
    ours = median(us["spanreplay"])
    ratios = [a / b for a, b in zip(us["spanreplay"], us["baseline"], strict=True)]
    figures = [
        Figure(NAME, "bare OTel span (SimpleSpanProcessor, no-op exporter)", base, "us/call",
               note=noise(us["baseline"])),
        Figure(NAME, "spanreplay @tool, durable file on", ours, "us/call",
               note=noise(us["spanreplay"])),
        Figure(NAME, "spanreplay @tool, file off", median(us["spanreplay_nofile"]), "us/call",
               note="span + codec only; " + noise(us["spanreplay_nofile"])),
        Figure(NAME, "ratio spanreplay / bare span", median(ratios), "x", goal=f"<= {GOAL_RATIO:g}x",
               met=median(ratios) <= GOAL_RATIO,
               note=f"median of per-repeat ratios; best/best {min(us['spanreplay']) / min(us['baseline']):.2f}x"),
    ]
    if "agent_rewind" in us:
        peer = median(us["agent_rewind"])
        figures.append(Figure(NAME, "agent-rewind @rewind.tool", peer, "us/call",
                              note="peer, JSON-lines file; " + noise(us["agent_rewind"])))
        figures.append(Figure(NAME, "ratio spanreplay / agent-rewind", ours / peer, "x",
                              note=f"best/best {min(us['spanreplay']) / min(us['agent_rewind']):.2f}x"))
    else:
        figures.append(Figure(NAME, "agent-rewind @rewind.tool", float("nan"), "us/call", note=rewind_note))
    figures.append(Figure(NAME, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"))
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    calls, repeats = (200, 3) if args.quick else (1000, 21)
    emit(measure(calls=calls, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

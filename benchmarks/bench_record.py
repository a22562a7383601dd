"""Record overhead of one ``@spanreplay.tool`` call (1 KB in, 1 KB out), durable file on.

Baseline, in the same process: a bare OpenTelemetry SDK span that carries the very
same attributes (captured from a span spanreplay wrote) through a SimpleSpanProcessor
whose exporter does nothing: the headline ratio. Two fairer baselines write that
span to a file as it ends, as spanreplay does: the SDK's own ConsoleSpanExporter
with a file for its output, and the least any durable writer does (one orjson line
of the span's ids, name, times and attributes, one os.write). Also shown: spanreplay
with masking off, with the file off, and agent-rewind's ``@rewind.tool`` recording
the same call to its own file. Last, a model-call boundary whose conversation is
40 KB of JSON, masking on: the turns of one run, each sending the conversation so
far plus the reply and a new question.

With ``--accelerate both`` the spanreplay cases run twice in the same rounds,
with the accelerators (``configure(accelerate=)``) on and off.

    python benchmarks/bench_record.py [--quick] [--json] [--accelerate on|off|both]
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from _common import (
    QUERY,
    Case,
    Figure,
    conversation,
    emit,
    interleaved,
    lookup_plain,
    median,
    noise,
    parse_args,
    spread,
    timed,
)
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay

GOAL_RATIO = 1.2  # spanreplay / bare SDK span with the same attributes (masking on, durable file)
GOAL_PEER = 1.0  # spanreplay / agent-rewind's @rewind.tool
GOAL_MODEL_US = 500.0  # a model call with a 40 KB conversation, masking on
MODEL_TURNS = 20  # model calls per run: the conversation grows from 40 KB by a reply and a question each
NAME = "record"

MODEL_REPLY = {
    "id": "msg_bench",
    "type": "message",
    "role": "assistant",
    "model": "claude-bench",
    "content": [{"type": "text", "text": "It left the depot this morning and arrives on Thursday between 9 and 12."}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 10_000, "output_tokens": 24},
}


class NullExporter(SpanExporter):
    """An exporter that drops every span: the baseline pays for the SDK span alone."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class JsonLineExporter(SpanExporter):
    """The least a durable span file costs: one orjson line per span, one os.write, no OTLP shape."""

    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            ctx = span.get_span_context()
            assert ctx is not None
            line = {
                "trace_id": format(ctx.trace_id, "032x"),
                "span_id": format(ctx.span_id, "016x"),
                "name": span.name,
                "start": span.start_time,
                "end": span.end_time,
                "attributes": dict(span.attributes or {}),
            }
            os.write(self.fd, orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        os.close(self.fd)


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


def measure(*, calls: int, repeats: int, accelerate: str = "on") -> list[Figure]:
    name, start_attributes, end_attributes = captured_attributes()
    resource = Resource.create({"service.name": "bench"})

    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    trace_dir = workdir / "traces"
    console_file = (workdir / "console.jsonl").open("a")
    providers: list[TracerProvider] = []

    def bare(exporter: SpanExporter) -> Case:
        baseline_provider = TracerProvider(resource=resource)
        baseline_provider.add_span_processor(SimpleSpanProcessor(exporter))
        providers.append(baseline_provider)
        baseline_tracer = baseline_provider.get_tracer("bench")

        def case() -> int:
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

        return case

    provider = TracerProvider(resource=resource)
    providers.append(provider)

    main_on = accelerate != "off"

    def record(file_on: bool, masking: bool = True, accelerated: bool = main_on) -> Case:
        def case() -> int:
            spanreplay.configure(
                trace_dir=trace_dir if file_on else None,
                tracer_provider=provider,
                masking=masking,
                accelerate=accelerated,
            )
            with spanreplay.record(agent="bench"):
                start = time.perf_counter_ns()
                for _ in range(calls):
                    lookup(QUERY)
                elapsed = time.perf_counter_ns() - start
            return elapsed

        return case

    base_conversation = conversation()

    def model_turns(accelerated: bool = main_on) -> int:
        # A run of model calls from a 40 KB conversation: masking on, durable file on.
        spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, masking=True, accelerate=accelerated)
        messages = list(base_conversation)
        with spanreplay.record(agent="bench-model"):
            start = time.perf_counter_ns()
            for turn in range(MODEL_TURNS):
                request = {"model": "claude-bench", "max_tokens": 512, "messages": list(messages)}
                reply = spanreplay.boundary("model", "claude-bench", request, lambda: MODEL_REPLY)
                messages.append({"role": "assistant", "content": reply["content"][0]["text"]})
                messages.append({"role": "user", "content": f"Turn {turn}: and the second parcel?"})
            elapsed = time.perf_counter_ns() - start
        return elapsed * calls // MODEL_TURNS  # scaled to ``calls``, so us/call reads like the other cases

    cases: dict[str, Case] = {
        "baseline": bare(NullExporter()),
        "baseline_console_file": bare(
            ConsoleSpanExporter(out=console_file, formatter=lambda span: span.to_json(indent=None) + "\n")
        ),
        "baseline_json_lines": bare(JsonLineExporter(workdir / "lines.jsonl")),
        "spanreplay": record(file_on=True),
        "spanreplay_nomask": record(file_on=True, masking=False),
        "spanreplay_nofile": record(file_on=False),
        "model_40kb": model_turns,
    }
    if accelerate == "both":
        cases["spanreplay_off"] = record(file_on=True, accelerated=False)
        cases["model_40kb_off"] = lambda: model_turns(accelerated=False)
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
        for each in providers:
            each.shutdown()
        console_file.close()
        shutil.rmtree(workdir, ignore_errors=True)

    us = {case: [ns / calls / 1000 for ns in values] for case, values in samples.items()}
    base = median(us["baseline"])
    ours = median(us["spanreplay"])

    def ratio(subject: str, baseline: str) -> tuple[float, str]:
        ratios = [a / b for a, b in zip(us[subject], us[baseline], strict=True)]
        best = min(us[subject]) / min(us[baseline])
        mid = median(ratios)
        return mid, (
            f"median of per-repeat ratios, {min(ratios):.2f}-{max(ratios):.2f} "
            f"(spread {spread(ratios):.0%}); best/best {best:.2f}x"
        )

    headline, headline_note = ratio("spanreplay", "baseline")
    console, console_note = ratio("spanreplay", "baseline_console_file")
    lines, lines_note = ratio("spanreplay", "baseline_json_lines")
    unmasked, unmasked_note = ratio("spanreplay_nomask", "baseline")
    figures = [
        Figure(
            NAME, "bare OTel span (SimpleSpanProcessor, no-op exporter)", base, "us/call", note=noise(us["baseline"])
        ),
        timed(NAME, "bare span written by the SDK's ConsoleSpanExporter to a file", us["baseline_console_file"]),
        timed(NAME, "bare span written as one orjson line (os.write)", us["baseline_json_lines"]),
        Figure(NAME, "spanreplay @tool, durable file on", ours, "us/call", note=noise(us["spanreplay"])),
        timed(NAME, "spanreplay @tool, durable file on, masking off", us["spanreplay_nomask"]),
        Figure(
            NAME,
            "spanreplay @tool, file off",
            median(us["spanreplay_nofile"]),
            "us/call",
            note="span + masking + codec; " + noise(us["spanreplay_nofile"]),
        ),
        Figure(
            NAME,
            "ratio spanreplay / bare span",
            headline,
            "x",
            goal=f"<= {GOAL_RATIO:g}x",
            met=headline <= GOAL_RATIO,
            note=headline_note,
        ),
        Figure(NAME, "ratio spanreplay, masking off / bare span", unmasked, "x", note=unmasked_note),
        Figure(NAME, "ratio spanreplay / bare span written by ConsoleSpanExporter", console, "x", note=console_note),
        Figure(NAME, "ratio spanreplay / bare span written as an orjson line", lines, "x", note=lines_note),
    ]
    model = median(us["model_40kb"])
    figures.append(
        Figure(
            NAME,
            f"model call, 40 KB conversation, masking on ({MODEL_TURNS} turns per run)",
            model,
            "us/call",
            goal=f"<= {GOAL_MODEL_US:g} us",
            met=model <= GOAL_MODEL_US,
            note=noise(us["model_40kb"]),
        )
    )
    if "agent_rewind" in us:
        peer, peer_note = ratio("spanreplay", "agent_rewind")
        figures.append(
            Figure(
                NAME,
                "agent-rewind @rewind.tool (JSON-lines file)",
                median(us["agent_rewind"]),
                "us/call",
                note="peer; " + noise(us["agent_rewind"]),
            )
        )
        figures.append(
            Figure(
                NAME,
                "ratio spanreplay / agent-rewind",
                peer,
                "x",
                goal=f"<= {GOAL_PEER:g}x",
                met=peer <= GOAL_PEER,
                note=peer_note,
            )
        )
    else:
        figures.append(
            Figure(NAME, "agent-rewind @rewind.tool (JSON-lines file)", float("nan"), "us/call", note=rewind_note)
        )
    if "spanreplay_off" in us:
        off, off_note = ratio("spanreplay_off", "baseline")
        tool_cost, tool_note = ratio("spanreplay_off", "spanreplay")
        model_cost, model_note = ratio("model_40kb_off", "model_40kb")
        figures += [
            timed(NAME, "spanreplay @tool, durable file on, accelerators off", us["spanreplay_off"]),
            Figure(NAME, "ratio spanreplay, accelerators off / bare span", off, "x", note=off_note),
            Figure(NAME, "ratio spanreplay, accelerators off / on", tool_cost, "x", note=tool_note),
            timed(NAME, "model call, 40 KB conversation, masking on, accelerators off", us["model_40kb_off"]),
            Figure(NAME, "ratio model call, accelerators off / on", model_cost, "x", note=model_note),
        ]
    elif accelerate == "off":
        figures.append(Figure(NAME, "accelerators", 0, "on", note="off: every spanreplay case above"))
    figures.append(Figure(NAME, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"))
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    calls, repeats = (200, 3) if args.quick else (1000, 21)
    emit(measure(calls=calls, repeats=repeats, accelerate=args.accelerate), as_json=args.json)


if __name__ == "__main__":
    main()

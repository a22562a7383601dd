"""The OTLP exporter with the Collector down: agent-visible latency of one ``@spanreplay.tool`` call
(1 KB in, 1 KB out) with spanreplay's OTLP exporter on and nothing answering, as a ratio to OTLP off.

All cases run in the same process, interleaved, through one tracer provider with
the durable file on, each with its own ``OtlpSpanProcessor`` (only one enabled at
a time):

- ``off``: no OTLP export, the baseline;
- ``down (HTTP)`` / ``down (gRPC)``: the endpoint is a closed port on 127.0.0.1,
  so every export fails at connect and the sender retries and drops;
- ``stuck (HTTP)``: the endpoint accepts connections and never answers, so every
  export waits for its timeout (1 s here, to drop more often than the default 10).

The sender thread works while the agent runs (connects, backs off, counts drops);
its share of the interpreter is the cost the agent can see. The export settings
are the defaults except the endpoint, so the queue fills and then drops, as it
would in production. Goal: at most 1.2x the latency with OTLP off.

    python benchmarks/bench_otlp.py [--quick] [--json]
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import QUERY, Case, Figure, emit, interleaved, lookup_plain, median, parse_args, timed
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.recording.exporters._otlp import OtlpSpanProcessor
from spanreplay.recording.exporters._otlp_endpoint import build_exporter

NAME = "otlp"
GOAL = 1.2


@spanreplay.tool(name="lookup")
def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def processor(endpoint: str, protocol: str, timeout: float | None = None) -> OtlpSpanProcessor:
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    try:
        return OtlpSpanProcessor(build_exporter(protocol, timeout=timeout))
    finally:
        del os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"]


def measure(*, calls: int, repeats: int, idle: float) -> list[Figure]:
    for name in [n for n in os.environ if n.startswith(("OTEL_", "SPANREPLAY_"))]:
        del os.environ[name]
    # A listener that never accepts: connections queue in its backlog and requests hang.
    stuck = socket.socket()
    stuck.bind(("127.0.0.1", 0))
    stuck.listen(1024)
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    processors = {
        "down (HTTP)": processor(f"http://127.0.0.1:{closed_port()}", "http/protobuf"),
        "down (gRPC)": processor(f"http://127.0.0.1:{closed_port()}", "grpc"),
        "stuck (HTTP)": processor(f"http://127.0.0.1:{stuck.getsockname()[1]}", "http/protobuf", timeout=1.0),
    }
    try:
        spanreplay.configure(trace_dir=workdir / "traces", tracer_provider=provider)
        for each in processors.values():
            provider.add_span_processor(each)

        def case(mode: str) -> Case:
            def run() -> int:
                for name, each in processors.items():
                    each.enabled = name == mode
                with spanreplay.record(agent="bench"):
                    start = time.perf_counter_ns()
                    for _ in range(calls):
                        lookup(QUERY)
                    elapsed = time.perf_counter_ns() - start
                return elapsed

            return run

        samples = interleaved({mode: case(mode) for mode in ("off", *processors)}, repeats=repeats)
        stats = {mode: each.stats for mode, each in processors.items()}
        # What the sender threads cost while the agent does nothing: all the process's CPU time is theirs.
        for each in processors.values():
            each.enabled = True
        idle_started, idle_cpu = time.perf_counter(), time.process_time()
        time.sleep(idle)
        sender_share = (time.process_time() - idle_cpu) / (time.perf_counter() - idle_started)
        full_queue_ns = on_end_cost(processors["down (HTTP)"], provider)
    finally:
        provider.shutdown()
        stuck.close()
        shutil.rmtree(workdir, ignore_errors=True)

    for mode, counted in stats.items():
        # Nothing reached an endpoint, and every span each case made is counted as dropped
        # (those still queued when the provider shut down included; on_end_cost adds its own).
        made = (calls + 1) * (repeats + 1)
        if counted.exported or counted.dropped < made:
            raise RuntimeError(f"{mode}: {counted} for {made} spans; the figures would not mean what they say")

    us = {mode: [ns / calls / 1000 for ns in values] for mode, values in samples.items()}
    figures = [timed(NAME, "agent latency per boundary, OTLP off", us["off"])]
    for mode in processors:
        ratio = [a / b for a, b in zip(us[mode], us["off"], strict=True)]
        figures.append(timed(NAME, f"agent latency per boundary, {mode}", us[mode]))
        figures.append(
            Figure(
                NAME,
                f"latency ratio {mode} / off",
                median(ratio),
                "x",
                goal=f"<= {GOAL}x",
                met=median(ratio) <= GOAL,
                note=f"median of per-repeat ratios; {stats[mode].dropped} spans dropped and counted",
            )
        )
    figures.append(
        Figure(
            NAME,
            "on_end per span, queue full (Collector down)",
            full_queue_ns / 1000,
            "us/span",
            note="the whole of the agent thread's own work for the OTLP path",
        )
    )
    figures.append(
        Figure(
            NAME,
            "sender threads' CPU, agent idle, all three endpoints failing",
            sender_share * 100,
            "% of a core",
            note=f"over {idle:g} s",
        )
    )
    figures.append(Figure(NAME, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"))
    return figures


ON_END_SPANS = 20_000


def on_end_cost(processor: OtlpSpanProcessor, provider: TracerProvider) -> float:
    """Nanoseconds per ``on_end`` once the queue is full: the agent thread's whole OTLP cost per span."""
    tracer = provider.get_tracer("bench")
    with tracer.start_as_current_span("ended") as span:
        pass
    for _ in range(processor.max_queue_size):
        processor.on_end(span)  # type: ignore[arg-type]
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter_ns()
        for _ in range(ON_END_SPANS // 5):
            processor.on_end(span)  # type: ignore[arg-type]
        best = min(best, (time.perf_counter_ns() - start) / (ON_END_SPANS // 5))
    return best


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    calls, repeats, idle = (200, 2, 0.5) if args.quick else (1000, 21, 5.0)
    emit(measure(calls=calls, repeats=repeats, idle=idle), as_json=args.json)


if __name__ == "__main__":
    main()

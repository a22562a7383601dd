"""Profile the record and replay hot paths of the 1 KB ``@spanreplay.tool`` call,
and the record path of a model call with a 40 KB conversation (masking on).

Prints the functions with the largest own time (cProfile ``tottime``) and the
largest cumulative time for each path. Profiling inflates every call, so read the
shares, not the absolute numbers; the figures are in bench_record.py and
bench_replay.py.

    python benchmarks/profile_hot_paths.py [--calls N] [--top N] [--path record|replay|baseline|model|all]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from _common import QUERY, conversation, lookup_plain
from bench_record import MODEL_REPLY, MODEL_TURNS, NullExporter, captured_attributes
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import spanreplay


@spanreplay.tool(name="lookup")
def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


def profile(title: str, body: Callable[[], None], top: int) -> None:
    body()  # warm-up: imports, caches, the first file open
    profiler = cProfile.Profile()
    profiler.enable()
    body()
    profiler.disable()
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats(order).print_stats(top)
        print(f"=== {title}: top {top} by {order} ===")
        # Drop pstats' preamble (blank lines, "Ordered by", the totals line stays).
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))
        print()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--path", choices=("record", "replay", "baseline", "model", "all"), default="all")
    args = parser.parse_args(argv)
    calls = args.calls

    name, start_attributes, end_attributes = captured_attributes()
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-profile-"))
    try:
        provider = TracerProvider()
        spanreplay.configure(trace_dir=workdir / "traces", tracer_provider=provider)
        run_ids: list[str] = []

        def record() -> None:
            with spanreplay.record(agent="profile") as run:
                for _ in range(calls):
                    lookup(QUERY)
            run_ids.append(run.run_id)

        if args.path in ("record", "all"):
            profile("record (@tool, durable file on)", record, args.top)
        if args.path in ("replay", "all"):
            if not run_ids:
                record()
            log = spanreplay.load(workdir / "traces", run_ids[-1])

            def replay() -> None:
                with spanreplay.replay(log):
                    for _ in range(calls):
                        lookup(QUERY)

            profile("replay (@tool, EventLog already loaded)", replay, args.top)
        if args.path in ("baseline", "all"):
            base = TracerProvider()
            base.add_span_processor(SimpleSpanProcessor(NullExporter()))
            tracer = base.get_tracer("bench")

            def baseline() -> None:
                root = tracer.start_span("invoke_agent bench")
                ctx = trace.set_span_in_context(root)
                for _ in range(calls):
                    span = tracer.start_span(name, context=ctx, attributes=start_attributes)
                    lookup_plain(QUERY)
                    span.set_attributes(end_attributes)
                    span.end()
                root.end()

            profile("baseline (bare OTel SDK span, no-op exporter)", baseline, args.top)
        if args.path in ("model", "all"):
            start = conversation()

            def model() -> None:
                # As bench_record.py: runs of MODEL_TURNS turns from the 40 KB conversation.
                for _ in range(max(1, calls // 50)):
                    messages = list(start)
                    with spanreplay.record(agent="profile-model"):
                        for turn in range(MODEL_TURNS):
                            request = {"model": "claude-bench", "max_tokens": 512, "messages": list(messages)}
                            reply = spanreplay.boundary("model", "claude-bench", request, lambda: MODEL_REPLY)
                            messages.append({"role": "assistant", "content": reply["content"][0]["text"]})
                            messages.append({"role": "user", "content": f"Turn {turn}: and the second parcel?"})

            profile("model call (40 KB conversation, masking on, durable file on)", model, args.top)
        provider.shutdown()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

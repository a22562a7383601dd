"""Cost attribution: what pricing adds to listing runs, and to reading every span of a source.

Runs are recorded through the real record path (model boundaries carrying the
GenAI usage attributes the Anthropic instrumentor writes, and tool calls between
them) into a directory of trace files. Measured, in the same process:

- ``spanreplay.runs(dir)``, which now prices each run's calls, against the
  listing without cost (the loader's run summaries over the same filtered spans);
- ``spanreplay.cost.summarize(dir)`` (read, price, group, find outliers) against
  reading every span of the directory and doing nothing with it.

    python benchmarks/bench_cost.py [--quick] [--json]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import Case, Figure, emit, interleaved, median, parse_args, timed
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.cost import summarize
from spanreplay.readers import iter_spans
from spanreplay.sources import RUN_MARKER, summaries

NAME = "cost"
GOAL_RUNS = 1.3  # listing runs with their cost: at most 30% slower than without
GOAL_SUMMARY = 1.5  # a cost summary: at most 50% over reading the spans at all


def record(directory: Path, runs: int, turns: int) -> int:
    """Record ``runs`` runs of ``turns`` model calls and tool calls each; returns the span count."""
    provider = TracerProvider()
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    for n in range(runs):
        with spanreplay.record(agent=f"agent-{n % 4}"):
            for turn in range(turns):
                usage = {
                    "gen_ai.request.model": "claude-sonnet-4-6",
                    "gen_ai.response.model": "claude-sonnet-4-6",
                    "gen_ai.usage.input_tokens": 1000 + 400 * turn + (n % 7) * 10,
                    "gen_ai.usage.output_tokens": 120,
                    "gen_ai.usage.cache_read.input_tokens": 300 * turn,
                    "gen_ai.usage.cache_write.input_tokens": 100,
                }
                spanreplay.boundary(
                    "model", "claude-sonnet-4-6", {"turn": turn, "n": n}, lambda: {"text": "ok"}, attributes=usage
                )
                spanreplay.boundary("tool", "lookup", {"turn": turn}, lambda: {"row": 1})
    provider.shutdown()
    return runs * (2 * turns + 1)


def measure(*, runs: int, turns: int, repeats: int) -> list[Figure]:
    directory = Path(tempfile.mkdtemp(prefix="bench_cost_")) / "traces"
    try:
        spans = record(directory, runs, turns)
        marker = RUN_MARKER

        def listing_with_cost() -> int:
            start = time.perf_counter_ns()
            found = spanreplay.runs(directory)
            elapsed = time.perf_counter_ns() - start
            assert len(found) == runs
            assert found[0].usd > 0
            return elapsed

        def listing_plain() -> int:
            start = time.perf_counter_ns()
            found = summaries(iter_spans(directory, contains=marker))
            elapsed = time.perf_counter_ns() - start
            assert len(found) == runs
            return elapsed

        def summary() -> int:
            start = time.perf_counter_ns()
            report = summarize(directory, by="agent")
            elapsed = time.perf_counter_ns() - start
            assert report.total.calls == runs * turns
            return elapsed

        def read_only() -> int:
            start = time.perf_counter_ns()
            for _ in iter_spans(directory):
                pass
            return time.perf_counter_ns() - start

        cases: dict[str, Case] = {
            "runs": listing_with_cost,
            "runs_plain": listing_plain,
            "summary": summary,
            "read": read_only,
        }
        samples = interleaved(cases, repeats=repeats)
    finally:
        shutil.rmtree(directory.parent, ignore_errors=True)
    runs_ratio = median([a / b for a, b in zip(samples["runs"], samples["runs_plain"], strict=True)])
    summary_ratio = median([a / b for a, b in zip(samples["summary"], samples["read"], strict=True)])
    summary_ms = [s / 1e6 for s in samples["summary"]]
    return [
        Figure(
            NAME,
            "runs() with cost / without",
            runs_ratio,
            "x",
            f"<= {GOAL_RUNS}",
            runs_ratio <= GOAL_RUNS,
            f"{runs} runs, {spans:,} spans",
        ),
        Figure(
            NAME,
            "summarize() / reading the spans",
            summary_ratio,
            "x",
            f"<= {GOAL_SUMMARY}",
            summary_ratio <= GOAL_SUMMARY,
            f"{runs * turns:,} model calls",
        ),
        timed(NAME, "summarize()", summary_ms, unit="ms"),
        Figure(NAME, "summarize() throughput", spans / (median(summary_ms) / 1000), "spans/s"),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    runs, turns, repeats = (20, 4, 3) if args.quick else (400, 8, 9)
    emit(measure(runs=runs, turns=turns, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

"""Postgres at volume: steps committed per second and the per-boundary latency (p50, p99)
of each commit mode with 1, 8 and 32 agents recording at once, against the file alone.

The agents are threads of one process sharing one configured tracer provider and
one processor per mode: the "agents in one service" case. Each agent runs its own
``spanreplay.record()`` run of 1 KB-in, 1 KB-out ``@spanreplay.tool`` calls, all
agents released together. Every mode runs through the same provider with the
durable file on, interleaved, one mode's processor enabled at a time:

- ``file only``: no Postgres processor enabled (the baseline);
- ``step sync``: per step, each row committed before its boundary returns, the
  commit waiting for the server's WAL flush (the default);
- ``step async``: per step with ``postgres_commit="async"`` (``synchronous_commit=off``);
- ``batch``: rows queued and committed by the background thread; its throughput
  counts the time until the last row is committed. Its boundaries keep the
  default ``postgres_wait``: one that finds more than two batches uncommitted
  waits for the writer at most that long, and the report counts them.

The per-step processors get a ``postgres_wait`` of a minute, so every boundary
returns after its commit and the figure is the full per-step cost. The same
number of steps is recorded at every agent count (split among the agents).

The server is SPANREPLAY_BENCH_PG_DSN, else SPANREPLAY_TEST_PG_DSN, else
postgresql://postgres@127.0.0.1:5432/test; the tables go in a scratch schema that
is dropped afterwards.

    python benchmarks/bench_postgres_volume.py [--quick] [--json]
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from _common import QUERY, Case, Figure, emit, interleaved, lookup_plain, median, parse_args, spread
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import spanreplay

NAME = "postgres_volume"
DSN = os.environ.get(
    "SPANREPLAY_BENCH_PG_DSN", os.environ.get("SPANREPLAY_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
)
MODES = ("file only", "step sync", "step async", "batch")
AGENTS = (1, 8, 32)


@spanreplay.tool(name="lookup")
def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


def percentile(values: Sequence[int], share: float) -> float:
    """The ``share`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))])


class Sample:
    """One repeat of one mode at one agent count: its wall time and every boundary's latency."""

    def __init__(self, steps: int, wall_ns: int, latencies_ns: list[int]) -> None:
        self.rate = steps / (wall_ns / 1e9)
        self.p50_us = percentile(latencies_ns, 0.50) / 1000
        self.p99_us = percentile(latencies_ns, 0.99) / 1000


def measure(*, steps: int, repeats: int) -> list[Figure]:
    import psycopg

    from spanreplay.postgres import PostgresSpanProcessor, upgrade

    schema = f"spanreplay_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN ('synchronous_commit', 'wal_writer_delay')"
            ).fetchall()
        )
    dsn = f"{DSN}{'&' if '?' in DSN else '?'}options=-csearch_path%3D{schema}"
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    processors = {
        "step sync": PostgresSpanProcessor(dsn, postgres_wait=60.0),
        "step async": PostgresSpanProcessor(dsn, postgres_wait=60.0, postgres_commit="async"),
        "batch": PostgresSpanProcessor(dsn, batch=True),
    }
    samples: dict[tuple[str, int], list[Sample]] = {}
    try:
        upgrade(dsn)
        spanreplay.configure(trace_dir=workdir / "traces", tracer_provider=provider, postgres=processors["step sync"])
        provider.add_span_processor(processors["step async"])
        provider.add_span_processor(processors["batch"])
        for agents in AGENTS:
            per_agent = steps // agents

            def case(mode: str, agents: int = agents, per_agent: int = per_agent) -> Case:
                def run() -> int:
                    for name, processor in processors.items():
                        processor.enabled = name == mode
                    latencies: list[list[int]] = [[] for _ in range(agents)]
                    gate = threading.Barrier(agents + 1)

                    def agent(n: int) -> None:
                        own = latencies[n]
                        gate.wait()
                        with spanreplay.record(agent=f"bench-{n}"):
                            for _ in range(per_agent):
                                started = time.perf_counter_ns()
                                lookup(QUERY)
                                own.append(time.perf_counter_ns() - started)

                    threads = [threading.Thread(target=agent, args=(n,)) for n in range(agents)]
                    for thread in threads:
                        thread.start()
                    gate.wait()
                    start = time.perf_counter_ns()
                    for thread in threads:
                        thread.join()
                    if mode == "batch" and not processors["batch"].force_flush(60_000):
                        raise RuntimeError("the batched processor did not commit its rows within a minute")
                    elapsed = time.perf_counter_ns() - start
                    everyone = [ns for own in latencies for ns in own]
                    samples.setdefault((mode, agents), []).append(Sample(len(everyone), elapsed, everyone))
                    return elapsed

                return run

            interleaved({mode: case(mode) for mode in MODES}, repeats=repeats)
            for mode in MODES:
                del samples[(mode, agents)][0]  # the warm-up round
        # A batched boundary that outwaited postgres_wait (the writer was behind) kept its row queued:
        # counted in the report, not a failure.
        trouble = sum(p.stats.failures + p.stats.dropped for p in processors.values()) + sum(
            p.stats.late for name, p in processors.items() if name != "batch"
        )
        if trouble:
            raise RuntimeError(f"{trouble} Postgres writes failed, were dropped or outwaited postgres_wait")
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT count(*) FROM agent_steps").fetchone()
        expected = sum((steps // agents) * agents for agents in AGENTS) * (repeats + 1) * 3
        if row is None or row[0] != expected:
            raise RuntimeError(f"agent_steps holds {row} rows, expected {expected}")
    finally:
        provider.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    held = (processors["batch"].stats.held, processors["batch"].stats.late)
    return figures(samples, steps=steps, repeats=repeats, settings=settings, held=held)


def figures(
    samples: dict[tuple[str, int], list[Sample]],
    *,
    steps: int,
    repeats: int,
    settings: dict[str, str],
    held: tuple[int, int],
) -> list[Figure]:
    out: list[Figure] = []
    for agents in AGENTS:
        base = samples[("file only", agents)]
        for mode in MODES:
            mine = samples[(mode, agents)]
            label = f"{mode}, {agents} agent{'s' if agents > 1 else ''}"
            rates = [s.rate for s in mine]
            p50 = [s.p50_us for s in mine]
            p99 = [s.p99_us for s in mine]
            out.append(
                Figure(
                    NAME,
                    f"steps per second, {label}",
                    median(rates),
                    "steps/s",
                    note=f"best {max(rates):,.0f}, spread {spread(rates):.0%}",
                )
            )
            out.append(Figure(NAME, f"boundary p50, {label}", median(p50), "us", note=f"spread {spread(p50):.0%}"))
            out.append(Figure(NAME, f"boundary p99, {label}", median(p99), "us", note=f"spread {spread(p99):.0%}"))
            if mode != "file only":
                ratio = statistics.median(s.p50_us / b.p50_us for s, b in zip(mine, base, strict=True))
                slower = statistics.median(b.rate / s.rate for s, b in zip(mine, base, strict=True))
                out.append(
                    Figure(
                        NAME,
                        f"p50 / file only, {label}",
                        ratio,
                        "x",
                        note=f"throughput file only / this {slower:.1f}x; medians of per-repeat ratios",
                    )
                )
    server = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))
    note = f"{steps} x {repeats}; {server}"
    out.append(Figure(NAME, "steps per case x repeats", steps * repeats, "steps", note=note))
    total = sum((steps // agents) * agents for agents in AGENTS) * (repeats + 1)
    note = f"of {total:,} batched boundaries, warm-up included; {held[1]:,} waited postgres_wait in vain"
    out.append(Figure(NAME, "batched boundaries held back by the writer", held[0], "boundaries", note=note))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    steps, repeats = (128, 1) if args.quick else (3200, 5)
    try:
        found = measure(steps=steps, repeats=repeats)
    except ImportError:
        sys.exit("bench_postgres_volume needs psycopg: pip install -e '.[postgres]'")
    emit(found, as_json=args.json)


if __name__ == "__main__":
    main()

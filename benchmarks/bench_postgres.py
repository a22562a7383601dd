"""The Postgres exporter: steps committed per second, per step against batched, and the
agent-visible latency of one ``@spanreplay.tool`` call (1 KB in, 1 KB out) with the
exporter on, as a ratio to off.

All three cases run in the same process, interleaved, through one tracer provider
with the durable file on: ``off`` (both Postgres processors silenced), ``per step``
(the default: each row committed before the boundary returns) and ``batched``
(rows committed by a background thread; its throughput counts the time until the
last row is committed, its latency only what the agent waited for).

The server is SPANREPLAY_BENCH_PG_DSN, else SPANREPLAY_TEST_PG_DSN, else
postgresql://postgres@127.0.0.1:5432/test; the tables go in a scratch schema that
is dropped afterwards. A per-step commit waits for the server's WAL flush
(synchronous_commit), so its figure is mostly the disk's fsync latency.

    python benchmarks/bench_postgres.py [--quick] [--json]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

from _common import QUERY, Case, Figure, emit, interleaved, lookup_plain, median, noise, parse_args, spread, timed
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import spanreplay

NAME = "postgres"
DSN = os.environ.get(
    "SPANREPLAY_BENCH_PG_DSN", os.environ.get("SPANREPLAY_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
)


@spanreplay.tool(name="lookup")
def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


def rate_noise(rates: Sequence[float]) -> str:
    """The best repeat of a rate is its highest (``noise`` reports the lowest, for times)."""
    return f"best {max(rates):,.0f}, spread {spread(rates):.0%}"


def measure(*, calls: int, repeats: int) -> list[Figure]:
    import psycopg

    from spanreplay.postgres import PostgresSpanProcessor, upgrade

    schema = f"spanreplay_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
        commit_setting = conn.execute("SHOW synchronous_commit").fetchone()
    dsn = f"{DSN}{'&' if '?' in DSN else '?'}options=-csearch_path%3D{schema}"
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    # A wait long enough that every boundary returns after its commit: the durable per-step cost.
    per_step = PostgresSpanProcessor(dsn, postgres_wait=60.0)
    batched = PostgresSpanProcessor(dsn, batch=True)
    try:
        upgrade(dsn)
        spanreplay.configure(trace_dir=workdir / "traces", tracer_provider=provider, postgres=per_step)
        provider.add_span_processor(batched)
        flush_ns: list[int] = []

        def case(mode: str) -> Case:
            def run() -> int:
                per_step.enabled = mode == "per step"
                batched.enabled = mode == "batched"
                with spanreplay.record(agent="bench"):
                    start = time.perf_counter_ns()
                    for _ in range(calls):
                        lookup(QUERY)
                    elapsed = time.perf_counter_ns() - start
                if mode == "batched":
                    flushed = time.perf_counter_ns()
                    if not batched.force_flush(60_000):
                        raise RuntimeError("the batched processor did not commit its rows within a minute")
                    flush_ns.append(time.perf_counter_ns() - flushed)
                return elapsed

            return run

        samples = interleaved({mode: case(mode) for mode in ("off", "per step", "batched")}, repeats=repeats)
        failures = per_step.stats.failures + batched.stats.failures + per_step.stats.dropped + batched.stats.dropped
        if failures:
            raise RuntimeError(f"{failures} Postgres writes failed or were dropped; the figures would flatter")
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT count(*) FROM agent_steps").fetchone()
        expected = calls * (repeats + 1) * 2  # the warm-up round too; "off" writes none
        if row is None or row[0] != expected:
            raise RuntimeError(f"agent_steps holds {row} rows, expected {expected}")
    finally:
        provider.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    us = {mode: [ns / calls / 1000 for ns in values] for mode, values in samples.items()}
    # flush_ns holds the warm-up's flush first; the timed rounds follow in order.
    batched_total = [ns + flush for ns, flush in zip(samples["batched"], flush_ns[1:], strict=True)]
    per_step_rate = [calls / (ns / 1e9) for ns in samples["per step"]]
    batched_rate = [calls / (ns / 1e9) for ns in batched_total]
    sync_ratio = [a / b for a, b in zip(us["per step"], us["off"], strict=True)]
    batch_ratio = [a / b for a, b in zip(us["batched"], us["off"], strict=True)]
    return [
        Figure(
            NAME,
            "steps committed per second, per step",
            median(per_step_rate),
            "steps/s",
            note=f"synchronous_commit={commit_setting[0] if commit_setting else '?'}; " + rate_noise(per_step_rate),
        ),
        Figure(
            NAME,
            "steps committed per second, batched",
            median(batched_rate),
            "steps/s",
            note="until the last row is committed; " + rate_noise(batched_rate),
        ),
        Figure(NAME, "ratio batched / per step throughput", median(batched_rate) / median(per_step_rate), "x"),
        Figure(
            NAME,
            "agent latency per boundary, Postgres off",
            median(us["off"]),
            "us/call",
            note="durable file on; " + noise(us["off"]),
        ),
        timed(NAME, "agent latency per boundary, per step", us["per step"]),
        timed(NAME, "agent latency per boundary, batched", us["batched"]),
        Figure(NAME, "latency ratio per step / off", median(sync_ratio), "x", note="median of per-repeat ratios"),
        Figure(NAME, "latency ratio batched / off", median(batch_ratio), "x", note="median of per-repeat ratios"),
        Figure(NAME, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    calls, repeats = (100, 2) if args.quick else (1000, 9)
    try:
        figures = measure(calls=calls, repeats=repeats)
    except ImportError:
        sys.exit("bench_postgres needs psycopg: pip install -e '.[postgres]'")
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()

"""What a side effect's write-ahead intent costs: an ``effect=True`` tool call against a plain one.

The same 1 KB-in, 1 KB-out ``@spanreplay.tool`` body, declared twice: plain, and
``effect=True`` (its span is written when it starts, before the work, as well
as when it ends). Four cases, interleaved in one process through one tracer
provider with the durable file on: plain and effect with the file only, and
plain and effect with Postgres per step as well (a processor whose
``postgres_wait`` of a minute makes every boundary return after its commit, and
every effect wait for its intent row before its work runs).

The server is SPANREPLAY_BENCH_PG_DSN, else SPANREPLAY_TEST_PG_DSN, else
postgresql://postgres@127.0.0.1:5432/test; the tables go in a scratch schema that
is dropped afterwards.

    python benchmarks/bench_effects.py [--quick] [--json]
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

from _common import QUERY, Case, Figure, emit, interleaved, lookup_plain, median, parse_args, timed
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import spanreplay

NAME = "effects"
DSN = os.environ.get(
    "SPANREPLAY_BENCH_PG_DSN", os.environ.get("SPANREPLAY_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
)
CASES = ("file, plain", "file, effect", "postgres, plain", "postgres, effect")


@spanreplay.tool(name="lookup")
def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


@spanreplay.tool(name="lookup_effect", effect=True)
def lookup_effect(query: str) -> dict[str, str]:
    return lookup_plain(query)


def measure(*, file_calls: int, pg_calls: int, repeats: int) -> list[Figure]:
    import psycopg

    from spanreplay.postgres import PostgresSpanProcessor, upgrade

    schema = f"spanreplay_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = f"{DSN}{'&' if '?' in DSN else '?'}options=-csearch_path%3D{schema}"
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
    per_step = PostgresSpanProcessor(dsn, postgres_wait=60.0)
    try:
        upgrade(dsn)
        spanreplay.configure(trace_dir=workdir / "traces", tracer_provider=provider, postgres=per_step)

        # The agent thread's own CPU time (user and system, the write syscalls too) beside
        # the wall time: on a busy machine it stays put while the wall time does not.
        cpu_ns: dict[str, list[int]] = {name: [] for name in CASES}

        def case(name: str) -> Case:
            where, kind = name.split(", ")
            tool = lookup_effect if kind == "effect" else lookup
            calls = pg_calls if where == "postgres" else file_calls

            def run() -> int:
                per_step.enabled = where == "postgres"
                with spanreplay.record(agent="bench"):
                    cpu = time.thread_time_ns()
                    start = time.perf_counter_ns()
                    for _ in range(calls):
                        tool(QUERY)
                    elapsed = time.perf_counter_ns() - start
                    cpu_ns[name].append(time.thread_time_ns() - cpu)
                    return elapsed

            return run

        samples = interleaved({name: case(name) for name in CASES}, repeats=repeats)
        stats = per_step.stats
        if stats.failures or stats.dropped or stats.late:
            raise RuntimeError(
                f"Postgres writes failed ({stats.failures}), were dropped ({stats.dropped}) or outwaited "
                f"postgres_wait ({stats.late}): the figures would flatter"
            )
        with psycopg.connect(dsn) as conn:
            found = conn.execute(
                "SELECT key, count(*), count(*) FILTER (WHERE end_ns = 0) FROM agent_steps GROUP BY key ORDER BY key"
            ).fetchall()
        expected = pg_calls * (repeats + 1)  # the warm-up round too; the file-only cases write none
        if found != [("lookup", expected, 0), ("lookup_effect", expected, 0)]:
            raise RuntimeError(f"agent_steps holds {found}, expected {expected} finished rows of each tool")
    finally:
        provider.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    def per_call(name: str, values: list[int]) -> list[float]:
        return [ns / (pg_calls if name.startswith("postgres") else file_calls) / 1000 for ns in values]

    us = {name: per_call(name, values) for name, values in samples.items()}
    # The warm-up round's CPU time comes first; the timed rounds follow in order.
    cpu = {name: per_call(name, values[1:]) for name, values in cpu_ns.items()}
    figures = [timed(NAME, f"{name} tool call", us[name]) for name in CASES]
    figures += [timed(NAME, f"{name} tool call, CPU time", cpu[name]) for name in CASES]
    for where in ("file", "postgres"):
        for clock, times in (("", us), (", CPU time", cpu)):
            plain, effect = times[f"{where}, plain"], times[f"{where}, effect"]
            ratios = [e / p for e, p in zip(effect, plain, strict=True)]
            extra = [e - p for e, p in zip(effect, plain, strict=True)]
            ratio = f"ratio effect / plain, {where}{clock}"
            figures.append(Figure(NAME, ratio, median(ratios), "x", note="median of per-repeat ratios"))
            figures.append(
                Figure(
                    NAME,
                    f"intent cost per call, {where}{clock}",
                    median(extra),
                    "us/call",
                    note="median of per-repeat deltas",
                )
            )
    figures.append(
        Figure(
            NAME,
            "calls per repeat x repeats",
            (file_calls + pg_calls) * 2 * repeats,
            "calls",
            note=f"file cases {file_calls}, Postgres cases {pg_calls}, x {repeats}",
        )
    )
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    file_calls, pg_calls, repeats = (50, 20, 2) if args.quick else (2000, 300, 9)
    try:
        figures = measure(file_calls=file_calls, pg_calls=pg_calls, repeats=repeats)
    except ImportError:
        sys.exit("bench_effects needs psycopg: pip install -e '.[postgres]'")
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()

"""The Postgres exporter against a frozen and a slow server: what a boundary costs the agent,
as a ratio to the trace file alone.

One process, one tracer provider with the durable file on, and a Postgres cluster
the benchmark starts itself (initdb in a temporary directory, on a free port; the
shared server is never touched). Four cases, interleaved in each repeat:

- ``off``: the Postgres processor silenced, the file only;
- ``healthy``: per step, every row committed before its boundary returns;
- ``frozen``: per step, the whole server stopped with SIGSTOP for the calls and
  woken afterwards (the rows are committed after the timing, then checked);
- ``slow``: per step, every insert held 0.3 s by a ``pg_sleep`` trigger.

Each case reports the mean latency per boundary, the median boundary, and the
worst single boundary (what ``postgres_wait`` bounds); under a fault, the first
boundary of a run waits ``postgres_wait`` and the rest go on, so the mean
depends on the calls per run and the median shows what the others cost. Needs
the server binaries (``initdb``, ``pg_ctl``).

    python benchmarks/bench_postgres_faults.py [--quick] [--json]
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import QUERY, Case, Figure, emit, interleaved, lookup_plain, median, noise, parse_args
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import spanreplay

NAME = "postgres faults"
SLOW_SECONDS = 0.3


@spanreplay.tool(name="lookup")
def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


@spanreplay.tool(name="slow_lookup")
def slow_lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


def measure(*, calls: int, repeats: int) -> list[Figure]:
    import psycopg

    # The cluster helper the fault tests use: initdb, pg_ctl, SIGSTOP of every server process.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from helpers.pg_cluster import own_cluster
    from spanreplay.postgres import PostgresSpanProcessor, upgrade

    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    with own_cluster() as cluster:
        upgrade(cluster.dsn)
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN PERFORM pg_sleep({SLOW_SECONDS}); RETURN NEW; END $$"
            )
            # Only the slow case's rows are slowed: the other cases share the table.
            conn.execute(
                "CREATE TRIGGER slow BEFORE INSERT ON agent_steps FOR EACH ROW "
                "WHEN (NEW.key = 'slow_lookup') EXECUTE FUNCTION slow_insert()"
            )
        provider = TracerProvider(resource=Resource.create({"service.name": "bench"}))
        processor = PostgresSpanProcessor(cluster.dsn)
        worst: dict[str, list[float]] = {}
        each: dict[str, list[float]] = {}
        try:
            spanreplay.configure(trace_dir=workdir / "traces", tracer_provider=provider, postgres=processor)

            def case(mode: str) -> Case:
                tool = slow_lookup if mode == "slow" else lookup

                def run() -> int:
                    processor.enabled = mode != "off"
                    longest = 0
                    with spanreplay.record(agent="bench"):
                        if mode == "frozen":
                            cluster.freeze()
                        try:
                            start = time.perf_counter_ns()
                            for _ in range(calls):
                                before = time.perf_counter_ns()
                                tool(QUERY)
                                took = time.perf_counter_ns() - before
                                longest = max(longest, took)
                                each.setdefault(mode, []).append(took / 1000)
                            elapsed = time.perf_counter_ns() - start
                        finally:
                            if mode == "frozen":
                                cluster.thaw()
                    if not processor.force_flush(120_000):
                        raise RuntimeError(f"the {mode} case's rows were not committed within two minutes")
                    worst.setdefault(mode, []).append(longest / 1e6)
                    return elapsed

                return run

            modes = ("off", "healthy", "frozen", "slow")
            samples = interleaved({mode: case(mode) for mode in modes}, repeats=repeats)
            lost = processor.stats.dropped + processor.stats.refused
            if lost:
                raise RuntimeError(f"{lost} rows were dropped or refused; every row should arrive")
            with psycopg.connect(cluster.dsn) as conn:
                row = conn.execute("SELECT count(*) FROM agent_steps").fetchone()
            expected = calls * (repeats + 1) * 3  # the warm-up round too; "off" writes none
            if row is None or row[0] != expected:
                raise RuntimeError(f"agent_steps holds {row} rows, expected {expected}")
        finally:
            provider.shutdown()
            shutil.rmtree(workdir, ignore_errors=True)

    us = {mode: [ns / calls / 1000 for ns in values] for mode, values in samples.items()}
    off = us["off"]
    typical_off = median(each["off"][calls:])  # the first round is the warm-up
    figures = [
        Figure(NAME, "agent latency per boundary, Postgres off", median(off), "us/call", note=noise(off)),
        Figure(NAME, "median boundary, Postgres off", typical_off, "us/call"),
    ]
    for mode in ("healthy", "frozen", "slow"):
        ratio = [a / b for a, b in zip(us[mode], off, strict=True)]
        timed_rounds = worst[mode][1:]
        typical = median(each[mode][calls:])
        figures += [
            Figure(NAME, f"agent latency per boundary, {mode}", median(us[mode]), "us/call", note=noise(us[mode])),
            Figure(NAME, f"latency ratio {mode} / off", median(ratio), "x", note="median of per-repeat ratios"),
            Figure(NAME, f"median boundary ratio {mode} / off", typical / typical_off, "x", note=f"{typical:,.0f} us"),
            Figure(
                NAME,
                f"worst single boundary, {mode}",
                median(timed_rounds),
                "ms",
                note=f"postgres_wait={processor.postgres_wait:g} s; max {max(timed_rounds):.1f} ms",
            ),
        ]
    figures.append(Figure(NAME, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"))
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    calls, repeats = (10, 1) if args.quick else (30, 5)
    try:
        figures = measure(calls=calls, repeats=repeats)
    except ImportError:
        sys.exit("bench_postgres_faults needs psycopg: pip install -e '.[postgres]'")
    except FileNotFoundError as exc:
        sys.exit(f"bench_postgres_faults needs the Postgres server binaries: {exc}")
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()

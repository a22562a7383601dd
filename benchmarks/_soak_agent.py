"""One agent of bench_soak.py: a process that makes ``steps`` boundaries and reports what each took.

    python benchmarks/_soak_agent.py '{"mode": "record", "steps": 2000, ...}'

The agent sets itself up (imports, and in ``record`` mode ``spanreplay.configure``
with the trace directory, Postgres and OTLP from the ``OTEL_EXPORTER_OTLP_*``
variables), prints ``ready``, and waits for a line on stdin, so that every
agent of a phase starts its boundaries at once. Then, per boundary: a 1 KB
``@spanreplay.tool`` call, and every ``CLOCK_EVERY``-th boundary a clock read
(``spanreplay.time()``) instead. Each boundary is timed alone with
``perf_counter_ns``; VmRSS is read every ``RSS_EVERY`` boundaries, outside the
timing. In ``off`` mode the code is the same but spanreplay is not configured
and no run is open: the decorated tool and the clock read call straight through.
It ends by printing one JSON line: the timings, the RSS samples, and (record)
what the OTLP and Postgres exporters counted after a flush.
"""

from __future__ import annotations

import json
import sys
import time
from array import array
from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _common import QUERY, lookup_plain

import spanreplay

CLOCK_EVERY = 10
RSS_EVERY = 250


@spanreplay.tool(name="lookup")
def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


def rss_kb() -> int:
    with open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def main(spec: dict[str, Any]) -> dict[str, Any]:
    mode: str = spec["mode"]
    steps: int = spec["steps"]
    run_steps: int = spec.get("run_steps") or steps
    recording = mode == "record"
    settings = None
    if recording:
        postgres: Any = None
        if spec.get("dsn"):
            from spanreplay.postgres import PostgresSpanProcessor

            postgres = PostgresSpanProcessor(spec["dsn"], batch=bool(spec.get("batch")))
        settings = spanreplay.configure(
            "soak", trace_dir=Path(spec["trace_dir"]), postgres=postgres, raise_internal_errors=False
        )
    # Inputs differ per step (a numbered prefix on the 1 KB query) and are built before timing.
    queries = [f"{i:08d}{QUERY[8:]}" for i in range(min(steps, 1000))]
    latencies = array("q", bytes(8 * steps))  # allocated up front: it must not show as RSS growth
    rss: list[tuple[int, int]] = []

    print("ready", flush=True)
    sys.stdin.readline()
    rss.append((0, rss_kb()))
    started = time.perf_counter_ns()
    done = 0
    run = 0
    while done < steps:
        size = min(run_steps, steps - done)
        opened = (
            spanreplay.record(agent="soak", run_id=f"{spec['run_prefix']}-r{run:05d}") if recording else nullcontext()
        )
        with opened:
            for i in range(done, done + size):
                if i % CLOCK_EVERY == CLOCK_EVERY - 1:
                    t0 = time.perf_counter_ns()
                    spanreplay.time()
                    t1 = time.perf_counter_ns()
                else:
                    query = queries[i % len(queries)]
                    t0 = time.perf_counter_ns()
                    lookup(query)
                    t1 = time.perf_counter_ns()
                latencies[i] = t1 - t0
                if (i + 1) % RSS_EVERY == 0:
                    rss.append((i + 1, rss_kb()))
        done += size
        run += 1
    wall_ns = time.perf_counter_ns() - started

    result: dict[str, Any] = {
        "mode": mode,
        "steps": steps,
        "runs": run,
        "wall_ns": wall_ns,
        "latencies_ns": latencies.tolist(),
        "rss_kb": rss,
    }
    if settings is not None:
        flushed = time.perf_counter_ns()
        settings.provider.force_flush(60_000)
        result["flush_ns"] = time.perf_counter_ns() - flushed
        settings.provider.shutdown()
        otlp = settings.otlp_processor
        pg = settings.postgres_processor
        result["otlp"] = asdict(otlp.stats) if otlp else None
        result["postgres"] = asdict(pg.stats) if pg else None
    return result


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))), flush=True)

"""A soak: N agent processes x M boundaries each, recording to files, OTLP and Postgres at once,
against the same agents with telemetry off, bounded in time.

Each agent (``_soak_agent.py``) is a process of its own that makes M boundaries
(a 1 KB ``@spanreplay.tool`` call, every tenth a clock read instead) and times
each one alone with ``perf_counter_ns``. Two phases of N agents run in this one
invocation, each phase's agents released together once all are set up:

- ``off``: the same agent code, spanreplay not configured and no run open;
- ``record``: one run per agent (or runs of ``--run-steps`` boundaries), the
  durable trace file on, every step written to Postgres (``--postgres step``,
  the default: each row committed before the boundary returns; ``batch``; or
  ``off``), and OTLP/HTTP to a local receiver
  (``_otlp_counter.py``, in its own process, counting the spans it parses).

Then one more agent records a single run of ``--memory-steps`` boundaries
(10,000) alone, the constant-memory check. ``--slow-insert MS`` makes the server
take MS milliseconds per ``agent_steps`` row (a ``pg_sleep`` trigger in the
scratch schema), as a server under load does: the batched writer then commits
more slowly than an agent makes rows.

Reported: per-boundary p50/p99 of both phases (all agents' boundaries pooled),
their difference and ratio; the RSS growth per 1,000 boundaries (VmRSS read
every 250 boundaries; the last third of the samples against the first, after a
warm-up of 1,000, median and worst agent, and of 2,000 in the single long run,
which holds the goal); the
spans in the trace files against the spans the receiver got (none may be lost
while it is up); the rows in ``agent_steps`` against the steps recorded. Postgres is SPANREPLAY_BENCH_PG_DSN, else
SPANREPLAY_TEST_PG_DSN, else postgresql://postgres@127.0.0.1:5432/test; the tables
go in a scratch schema that is dropped afterwards, and the run ids carry a
prefix unique to the invocation. Past ``--timeout`` seconds the agents still
running are killed and the report says how many.

    python benchmarks/bench_soak.py [--quick] [--json] [--agents N] [--steps M] [--run-steps K]
        [--memory-steps S] [--postgres step|batch|off] [--slow-insert MS] [--timeout SECONDS]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import Figure, emit

NAME = "soak"
HERE = Path(__file__).resolve().parent
DSN = os.environ.get(
    "SPANREPLAY_BENCH_PG_DSN", os.environ.get("SPANREPLAY_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
)
# RSS growth per 1,000 boundaries above this is memory that grows with the run: half
# a KB a boundary, when each boundary carries 2 KB of payload. RSS swings by a few
# MB as the OTLP queue fills and drains, so a smaller bound would read noise.
FLAT_KB = 512.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--quick", action="store_true", help="2 agents x 200 boundaries: a smoke run")
    parser.add_argument("--agents", type=int, help="agent processes per phase (default 16)")
    parser.add_argument("--steps", type=int, help="boundaries per agent (default 2,000)")
    parser.add_argument("--run-steps", type=int, default=0, help="split each agent's boundaries into runs of K")
    parser.add_argument("--memory-steps", type=int, help="boundaries of the single-run memory check (10,000)")
    parser.add_argument(
        "--postgres",
        choices=("step", "batch", "off"),
        default="step",
        help="Postgres rows committed per step (the default), in batches, or not written",
    )
    parser.add_argument(
        "--slow-insert", type=float, default=0.0, help="milliseconds the server spends on each agent_steps row"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds before running agents are killed")
    args = parser.parse_args(argv)
    quick = args.quick
    args.agents = args.agents or (2 if quick else 16)
    args.steps = args.steps or (200 if quick else 2000)
    args.memory_steps = args.memory_steps or (2000 if quick else 10_000)
    return args


class Receiver:
    """The OTLP counter in a process of its own."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(HERE / "_otlp_counter.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        self.url = f"http://127.0.0.1:{int(self.process.stdout.readline())}"

    def counts(self) -> dict[str, int]:
        with urllib.request.urlopen(self.url + "/count", timeout=10) as answer:
            return dict(json.loads(answer.read()))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def agent_env(receiver: Receiver) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANREPLAY_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = receiver.url
    env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
    return env


def run_phase(specs: list[dict[str, Any]], env: dict[str, str], deadline: float, logs: Path) -> list[dict[str, Any]]:
    """Start one agent per spec, release them together once all are ready, collect their results.

    An agent still running at ``deadline`` is killed; its result is ``{"killed": True}``.
    """
    if time.monotonic() >= deadline:
        return [{"killed": True} for _ in specs]
    agents = []
    for n, spec in enumerate(specs):
        stderr = open(logs / f"{spec['mode']}-{n}.stderr", "w")  # noqa: SIM115 (closed below)
        process = subprocess.Popen(
            [sys.executable, str(HERE / "_soak_agent.py"), json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
        )
        agents.append((process, stderr))
    for process, _ in agents:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"an agent failed to start; see {logs}")
    for process, _ in agents:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    results = []
    for process, stderr in agents:
        try:
            out, _ = process.communicate(timeout=max(0.0, deadline - time.monotonic()))
            if process.returncode != 0:
                raise RuntimeError(f"an agent exited with {process.returncode}; see {logs}")
            results.append(json.loads(out))
        except subprocess.TimeoutExpired:
            process.kill()
            process.communicate()
            results.append({"killed": True})
        finally:
            stderr.close()
    return results


def percentile(values: Sequence[int], fraction: float) -> float:
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(fraction * len(ordered)))])


def rss_slope(samples: Sequence[Sequence[int]], warmup: int = 1000) -> float:
    """KB of RSS per 1,000 boundaries after the warm-up: the median RSS of the last third
    of the samples against the median of the first third, over the boundaries between.

    Medians, not a fitted line: RSS swings by a few MB as the OTLP queue fills and
    drains, and a line through a few samples reads a swing as growth.
    """
    points = [(step, kb) for step, kb in samples if step >= warmup]
    if len(points) < 2:
        return float("nan")
    k = max(1, len(points) // 3)
    first, last = points[:k], points[-k:]
    steps = statistics.median(p[0] for p in last) - statistics.median(p[0] for p in first)
    return float((statistics.median(p[1] for p in last) - statistics.median(p[1] for p in first)) / steps * 1000)


def count_file_spans(trace_dir: Path) -> int:
    """Distinct spans in the trace files (a run's span is written when it starts and again when it ends)."""
    from spanreplay.readers import iter_spans

    return len({(span.trace_id, span.span_id) for span in iter_spans(trace_dir)})


def count_rows(dsn: str, prefix: str) -> int:
    import psycopg

    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT count(*) FROM agent_steps WHERE run_id LIKE %s", (prefix + "%",)).fetchone()
    return int(row[0]) if row else 0


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(args: argparse.Namespace) -> list[Figure]:
    import psycopg

    from spanreplay.postgres import upgrade

    started = time.monotonic()
    deadline = started + args.timeout
    load_before = load_average()
    prefix = f"soak-{uuid.uuid4().hex[:8]}"
    schema = f"spanreplay_soak_{prefix[5:]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = f"{DSN}{'&' if '?' in DSN else '?'}options=-csearch_path%3D{schema}"
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-soak-"))
    receiver = Receiver()
    try:
        upgrade(dsn)
        if args.slow_insert > 0:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(
                    "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS "
                    f"$$ BEGIN PERFORM pg_sleep({args.slow_insert / 1000:g}); RETURN NEW; END $$"
                )
                conn.execute(
                    "CREATE TRIGGER slow BEFORE INSERT ON agent_steps FOR EACH ROW EXECUTE FUNCTION slow_insert()"
                )
        env = agent_env(receiver)
        trace_dir = workdir / "traces"

        def specs(mode: str, count: int, steps: int, tag: str, run_steps: int = 0) -> list[dict[str, Any]]:
            return [
                {
                    "mode": mode,
                    "steps": steps,
                    "run_steps": run_steps,
                    "trace_dir": str(trace_dir),
                    "dsn": dsn if args.postgres != "off" else "",
                    "batch": args.postgres == "batch",
                    "run_prefix": f"{prefix}-{tag}{n:02d}",
                }
                for n in range(count)
            ]

        off = run_phase(specs("off", args.agents, args.steps, "off"), env, deadline, workdir)
        rec = run_phase(specs("record", args.agents, args.steps, "a", args.run_steps), env, deadline, workdir)
        long = run_phase(specs("record", 1, args.memory_steps, "long"), env, deadline, workdir)
        load_after = load_average()
        # The exporters flushed before each agent reported; the receiver has parsed what it answered.
        received = receiver.counts()
        file_spans = count_file_spans(trace_dir)
        rows = count_rows(dsn, prefix)
    finally:
        receiver.close()
        shutil.rmtree(workdir, ignore_errors=True)
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    return figures(
        args, off, rec, long, received, file_spans, rows, time.monotonic() - started, load_before, load_after
    )


def figures(
    args: argparse.Namespace,
    off: list[dict[str, Any]],
    rec: list[dict[str, Any]],
    long: list[dict[str, Any]],
    received: dict[str, int],
    file_spans: int,
    rows: int,
    wall: float,
    load_before: str,
    load_after: str,
) -> list[Figure]:
    killed = sum(1 for r in off + rec + long if r.get("killed"))
    off_done = [r for r in off if not r.get("killed")]
    rec_done = [r for r in rec + long if not r.get("killed")]
    soak_done = [r for r in rec if not r.get("killed")]
    shape = f"{args.agents} agents x {args.steps:,} boundaries" + (
        f", runs of {args.run_steps}" if args.run_steps else ", one run each"
    )
    out = [
        Figure(NAME, "agents x boundaries per phase", args.agents * args.steps, "boundaries", note=shape),
        Figure(
            NAME,
            "agents killed at the timeout",
            killed,
            "agents",
            goal="0",
            met=killed == 0,
            note=f"--timeout {args.timeout:g} s; whole invocation {wall:.0f} s",
        ),
        Figure(
            NAME,
            "load average before (1 min)",
            float(load_before.split()[0]),
            "",
            note=f"1/5/15 min: {load_before} before, {load_after} after; {os.cpu_count()} cores",
        ),
    ]
    if off_done and soak_done:
        lat_off = [ns for r in off_done for ns in r["latencies_ns"]]
        lat_rec = [ns for r in soak_done for ns in r["latencies_ns"]]
        for label, q in (("p50", 0.5), ("p99", 0.99)):
            a, b = percentile(lat_rec, q) / 1000, percentile(lat_off, q) / 1000
            out.append(
                Figure(NAME, f"{label} per boundary, telemetry off", b, "us", note=f"{len(lat_off):,} boundaries")
            )
            out.append(
                Figure(
                    NAME,
                    f"{label} per boundary, recording",
                    a,
                    "us",
                    note=f"{len(lat_rec):,} boundaries; Postgres: {args.postgres}"
                    + (f", {args.slow_insert:g} ms per row" if args.slow_insert else ""),
                )
            )
            out.append(Figure(NAME, f"{label} overhead per boundary", a - b, "us", note=f"ratio {a / b:,.0f}x"))
        phase_s = max(r["wall_ns"] for r in soak_done) / 1e9
        out.append(
            Figure(
                NAME,
                "boundaries recorded per second, all agents",
                len(lat_rec) / phase_s,
                "boundaries/s",
                note=f"the slowest agent took {phase_s:.1f} s",
            )
        )
        flush = [r["flush_ns"] / 1e9 for r in soak_done]
        out.append(
            Figure(
                NAME,
                "flush at the end of an agent, median",
                statistics.median(flush),
                "s",
                note=f"max {max(flush):.2f} s",
            )
        )
    slopes = [rss_slope(r["rss_kb"]) for r in soak_done]
    if slopes and args.steps > 1000:
        out.append(
            Figure(
                NAME,
                "RSS growth per 1,000 boundaries, median agent",
                statistics.median(slopes),
                "KB",
                note=f"worst agent {max(slopes):.0f} KB; after a warm-up of 1,000 (few samples: noisy)",
            )
        )
    for r in long:
        if r.get("killed"):
            continue
        warmup = min(2000, r["steps"] // 2)
        slope = rss_slope(r["rss_kb"], warmup=warmup)
        first, last = r["rss_kb"][0][1], r["rss_kb"][-1][1]
        out.append(
            Figure(
                NAME,
                f"RSS growth per 1,000 boundaries, one run of {r['steps']:,}",
                slope,
                "KB",
                goal=f"<= {FLAT_KB:g} KB",
                met=slope <= FLAT_KB,
                note=f"after a warm-up of {warmup:,}; RSS {first / 1024:.0f} -> {last / 1024:.0f} MB; "
                f"{r['steps'] / (r['wall_ns'] / 1e9):,.0f} boundaries/s, flush {r.get('flush_ns', 0) / 1e9:.2f} s",
            )
        )
    otlp_dropped = sum(r["otlp"]["dropped"] for r in rec_done if r.get("otlp"))
    lost = file_spans - received["distinct_spans"]
    out += [
        Figure(NAME, "spans recorded (in the trace files)", file_spans, "spans"),
        Figure(
            NAME,
            "spans received by the OTLP receiver",
            received["distinct_spans"],
            "spans",
            note=f"{received['spans'] - received['distinct_spans']} duplicates; {received['requests']} requests",
        ),
        Figure(
            NAME,
            "spans lost on the way to the receiver",
            lost,
            "spans",
            goal="0",
            met=lost == 0 if not killed else None,
            note=f"the exporters counted {otlp_dropped} dropped"
            + ("; agents were killed with spans queued" if killed else ""),
        ),
    ]
    if args.postgres == "off":
        return out
    steps_recorded = sum(r["steps"] for r in rec_done)
    pg = [r["postgres"] for r in rec_done if r.get("postgres")]
    out.append(
        Figure(
            NAME,
            "rows in agent_steps",
            rows,
            "rows",
            goal=f"= {steps_recorded:,} steps" if not killed else "",
            met=rows == steps_recorded if not killed else None,
            note=f"{sum(p['late'] for p in pg)} late, {sum(p['dropped'] for p in pg)} dropped, "
            f"{sum(p['failures'] for p in pg)} failed writes",
        )
    )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        result = measure(args)
    except ImportError:
        sys.exit("bench_soak needs psycopg: pip install -e '.[postgres]'")
    emit(result, as_json=args.json)


if __name__ == "__main__":
    main()

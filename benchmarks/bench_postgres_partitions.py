"""Postgres at fleet scale: a quarter of a fleet's steps in tables partitioned by day.

Fills ``--steps`` steps (10^7 by default, 10^5 with ``--quick``) spread over 90
days, 100 steps a run, then measures:

- insert rate through the writer's own statements and commit function
  (``spanreplay.recording.postgres.writes.commit``: one transaction per batch of
  500 rows, the run-total triggers firing), with sync and async
  (``synchronous_commit=off``) commits, on top of the filled tables;
- ``spanreplay.load(dsn, run_id)`` of one 100-step run in the middle of the range;
- table and index sizes (every partition's ``pg_table_size``, ``pg_indexes_size``)
  and the bytes a step takes;
- ``spanreplay prune DSN --older-than 60d``: the 30 oldest days dropped as
  partitions; beside it, one day's runs deleted row by row, as before partitions.

The fill itself is server-side SQL (``INSERT ... SELECT`` from
``generate_series``, one statement a day, into the partitioned parents so the
triggers run): the writer's rate is the insert-rate figure, not the fill.
A step holds a 300-byte JSON input and a 500-byte JSON output (each also as
JSONB) and 120 bytes of attributes: a typical tool or model step with masked,
trimmed payloads; size scales with the payloads.

The server is SPANREPLAY_BENCH_PG_DSN, else SPANREPLAY_TEST_PG_DSN, else
postgresql://postgres@127.0.0.1:5432/test; the tables go in a scratch schema that
is dropped afterwards.

    python benchmarks/bench_postgres_partitions.py [--quick] [--steps N] [--json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

from _common import Figure, emit

NAME = "postgres_partitions"
DSN = os.environ.get(
    "SPANREPLAY_BENCH_PG_DSN", os.environ.get("SPANREPLAY_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
)
DAYS = 90
STEPS_PER_RUN = 100
BATCH = 500
# The last day of the fill; the clock prune runs with is the next day at noon.
LAST_DAY = date(2031, 6, 30)

_FILL_RUNS = """
INSERT INTO agent_runs (run_id, run_day, agent, status, trace_id, span_id, service_name, started_at, ended_at,
                        start_ns, end_ns, steps_started, schema_version)
SELECT format('run_%%s_%%s',
              to_char(%(day)s::date + make_interval(secs => r * 86400.0 / %(runs)s), 'YYYYMMDD_HH24MISS'),
              lpad(to_hex(r), 8, '0')),
       %(day)s::date, 'fleet', CASE WHEN r %% 20 = 0 THEN 'error' ELSE 'ok' END, md5(r::text), left(md5(r::text), 16),
       'bench', %(day)s::date + make_interval(secs => r * 86400.0 / %(runs)s),
       %(day)s::date + make_interval(secs => r * 86400.0 / %(runs)s + 60), 1, 2, %(steps_per_run)s, 1
FROM generate_series(0, %(runs)s - 1) AS r
"""
# Payloads of fixed length whose text differs per row (md5), so no page compresses them better than real ones.
_FILL_STEPS = """
INSERT INTO agent_steps (run_id, run_day, step_number, step_type, key, call_id, input, output, input_text,
                         output_text, tokens_in, tokens_out, cost, trace_id, span_id, start_ns, end_ns, created_at,
                         attributes, schema_version)
SELECT r.run_id, r.run_day, s, 'tool', 'search', format('tool:search#%%s', s - 1),
       p.input::jsonb, p.output::jsonb, p.input, p.output, 120, 30, 0.0012, r.trace_id, left(md5(r.run_id || s), 16),
       s, s + 1, r.started_at + make_interval(secs => s), a.attributes::json, 1
FROM agent_runs_p{day:%Y%m%d} AS r, generate_series(1, %(steps_per_run)s) AS s,
     LATERAL (SELECT md5(r.run_id || s::text) AS h) AS h,
     LATERAL (SELECT format('{{"query": "%%s", "filters": {{"region": "eu", "after": "2031-01-01"}}, "k": %%s}}',
                            repeat(h.h, 7), s) AS input,
                     format('{{"results": ["%%s", "%%s"], "total": %%s}}', repeat(h.h, 7), repeat(h.h, 7), s) AS output
             ) AS p,
     LATERAL (SELECT format('{{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "n": %%s}}', s)
                     AS attributes) AS a
"""


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (for run_all.py)")
    parser.add_argument("--quick", action="store_true", help="10^5 steps: a smoke run, not a measurement")
    parser.add_argument("--steps", type=int, default=None, help="steps to fill (default 10^7, --quick 10^5)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    steps = args.steps or (100_000 if args.quick else 10_000_000)
    import psycopg

    schema = f"spanreplay_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        figures = measure(f"{DSN}{'&' if '?' in DSN else '?'}options=-csearch_path%3D{schema}", steps)
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    emit(figures, as_json=args.json)


def fill(dsn: str, steps: int) -> tuple[float, int]:
    """Fill ``steps`` steps over ``DAYS`` days; the seconds it took and the runs made."""
    import psycopg

    runs_per_day = max(1, steps // (DAYS * STEPS_PER_RUN))
    first = LAST_DAY - timedelta(days=DAYS - 1)
    started = time.perf_counter()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET synchronous_commit = off")
        for n in range(DAYS):
            day = first + timedelta(days=n)
            params = {"day": day, "runs": runs_per_day, "steps_per_run": STEPS_PER_RUN}
            conn.execute(_FILL_RUNS, params)  # type: ignore[arg-type]
            conn.execute(_FILL_STEPS.format(day=day), params)  # type: ignore[arg-type]
        conn.execute("VACUUM ANALYZE agent_runs")
        conn.execute("VACUUM ANALYZE agent_steps")
    return time.perf_counter() - started, runs_per_day * DAYS


def insert_rate(dsn: str, commit_mode: str, rows: int) -> float:
    """Steps per second through the writer's commit of batches of ``BATCH`` step rows."""
    from psycopg_pool import ConnectionPool

    from spanreplay.recording.postgres.writes import STEP, Write, commit
    from spanreplay.sources.postgres.connect import connect_kwargs, session_settings

    template = {
        "step_type": "tool", "key": "search", "input": '{"q": "' + "x" * 280 + '"}', "error": None,
        "output_text": '{"r": "' + "y" * 480 + '"}', "error_text": None, "tokens_in": 120, "tokens_out": 30,
        "cost": 0.0012, "trace_id": "a" * 32, "span_id": "b" * 16, "start_ns": 1, "end_ns": 2,
        "attributes": '{"gen_ai.tool.name": "search"}', "schema_version": 1, "service_name": "bench",
    }  # fmt: skip
    template["input_text"] = template["input"]
    template["output"] = template["output_text"]
    now = datetime.combine(LAST_DAY, datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
    batches = []
    tag = uuid.uuid4().hex[:8]
    for b in range(rows // BATCH):
        run_id = f"run_{LAST_DAY:%Y%m%d}_120000_{commit_mode}{tag}{b:05d}"
        batches.append(
            [
                Write(STEP, params={**template, "run_id": run_id, "step_number": i + 1, "call_id": f"tool:search#{i}",
                                    "created_at": now, "started_at": now, "run_day": LAST_DAY, "dated": True})
                for i in range(BATCH)
            ]
        )  # fmt: skip
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn, min_size=1, max_size=1, kwargs={"autocommit": True, **connect_kwargs(30)},
        configure=lambda conn: session_settings(conn, 30, commit_mode), open=True,
    )  # fmt: skip
    try:
        started = time.perf_counter()
        for batch in batches:
            failed = commit(pool, 30, batch)
            if failed is not None:
                raise failed
        return len(batches) * BATCH / (time.perf_counter() - started)
    finally:
        pool.close()


def load_ms(dsn: str, run_id: str, repeats: int = 21) -> tuple[float, int]:
    import spanreplay

    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        log = spanreplay.load(dsn, run_id)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), len(log)


def sizes(dsn: str) -> dict[str, int]:
    import psycopg

    sql = """
        SELECT coalesce(sum(pg_table_size(i.inhrelid)), 0), coalesce(sum(pg_indexes_size(i.inhrelid)), 0)
        FROM pg_inherits AS i WHERE i.inhparent = %s::regclass
    """
    out: dict[str, int] = {}
    with psycopg.connect(dsn) as conn:
        for table in ("agent_steps", "agent_runs"):
            row = conn.execute(sql, (table,)).fetchone()
            assert row is not None
            out[f"{table} table"], out[f"{table} indexes"] = int(row[0]), int(row[1])
        count = conn.execute("SELECT count(*) FROM agent_steps").fetchone()
        out["steps"] = int(count[0]) if count else 0
    return out


def prune_seconds(dsn: str) -> tuple[float, str]:
    from click.testing import CliRunner

    from spanreplay.cli import cli
    from spanreplay.cli._common import CliState

    clock = datetime.combine(LAST_DAY + timedelta(days=1), datetime.min.time(), tzinfo=UTC) + timedelta(hours=12)
    started = time.perf_counter()
    result = CliRunner().invoke(cli, ["prune", dsn, "--older-than", "60d"], obj=CliState(clock=lambda: clock))
    elapsed = time.perf_counter() - started
    if result.exit_code != 0:
        raise RuntimeError(result.output)
    return elapsed, result.output.strip().splitlines()[-1]


def row_by_row_seconds(dsn: str, day: date) -> float:
    """Deleting one day's runs and steps row by row (the only way before partitions)."""
    import psycopg

    from spanreplay.recording.postgres import retention

    with psycopg.connect(dsn) as conn:
        ids = [r for (r,) in conn.execute("SELECT run_id FROM agent_runs WHERE run_day = %s", (day,)).fetchall()]
    started = time.perf_counter()
    retention.delete(dsn, [(run_id, day) for run_id in ids])
    return time.perf_counter() - started


def measure(dsn: str, steps: int) -> list[Figure]:
    from spanreplay.sources.postgres.partitions import make
    from spanreplay.sources.postgres.schema import upgrade

    upgrade(dsn, today=LAST_DAY, ahead=1)
    make(dsn, LAST_DAY - timedelta(days=DAYS - 1), LAST_DAY)
    fill_s, runs = fill(dsn, steps)
    filled = runs * STEPS_PER_RUN
    print(f"filled {filled:,} steps in {fill_s:.0f} s", file=sys.stderr, flush=True)  # a long run shows life
    figures = [
        Figure(NAME, "steps filled (90 days, 100 a run)", filled, "steps", note=f"server-side fill {fill_s:.0f} s"),
        Figure(NAME, "fill rate (server-side INSERT ... SELECT)", filled / fill_s, "steps/s", note="not the writer"),
    ]
    rate_rows = 10_000 if steps < 1_000_000 else 50_000
    for mode in ("sync", "async"):
        rate = insert_rate(dsn, mode, rate_rows)
        figures.append(
            Figure(
                NAME, f"insert rate, batches of {BATCH}, {mode} commits", rate, "steps/s", goal=">= 5,000 steps/s",
                met=rate >= 5000, note=f"{rate_rows} rows into filled tables, one writer connection",
            )
        )  # fmt: skip
    middle = LAST_DAY - timedelta(days=DAYS // 2)
    import psycopg

    with psycopg.connect(dsn) as conn:
        found = conn.execute("SELECT run_id FROM agent_runs WHERE run_day = %s LIMIT 1", (middle,)).fetchone()
    assert found is not None
    ms, events = load_ms(dsn, found[0])
    figures.append(
        Figure(NAME, f"load() of one {events}-step run", ms, "ms", goal="< 50 ms", met=ms < 50, note="median of 21")
    )
    size = sizes(dsn)
    total = sum(v for k, v in size.items() if k != "steps")
    per_step = total / size["steps"]
    figures += [
        Figure(NAME, "agent_steps table (all partitions)", size["agent_steps table"] / 1e9, "GB"),
        Figure(NAME, "agent_steps indexes", size["agent_steps indexes"] / 1e9, "GB"),
        Figure(NAME, "agent_runs table + indexes", (size["agent_runs table"] + size["agent_runs indexes"]) / 1e6, "MB"),
        Figure(NAME, "bytes per step (tables + indexes)", per_step, "B/step", note="payloads 300 B in, 500 B out"),
        Figure(NAME, "per day at 100 steps/s", per_step * 100 * 86400 / 1e9, "GB/day", note="= bytes/step x 8.64e6"),
    ]
    # At fleet scale a chunk of the row-by-row delete can outlast its statement timeout:
    # that is a finding to report beside the other figures, not a reason to lose them.
    started = time.perf_counter()
    try:
        row_s = row_by_row_seconds(dsn, LAST_DAY - timedelta(days=10))
        note = f"{filled // DAYS:,} steps"
    except Exception as exc:  # reported as the figure's note
        row_s, note = time.perf_counter() - started, f"FAILED after: {str(exc)[:80]}"
    figures.append(Figure(NAME, "row by row: delete one day's runs and steps", row_s, "s", note=note))
    started = time.perf_counter()
    try:
        prune_s, summary = prune_seconds(dsn)
        met = prune_s < 60
    except Exception as exc:  # reported as the figure's note
        prune_s, summary, met = time.perf_counter() - started, f"FAILED after: {str(exc)[-80:]}", False
    figures.append(
        Figure(NAME, "prune --older-than 60d (30 days dropped)", prune_s, "s", goal="< 60 s", met=met,
               note=summary[:90])
    )  # fmt: skip
    return figures


if __name__ == "__main__":
    main()

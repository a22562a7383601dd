"""Postgres at fleet scale: tables partitioned by day, migrated in place, retention by partition.

Against the real server, each test in a schema of its own. Time is fixed: the
days are far from today, given to ``upgrade``/``make`` and to the CLI's clock,
so nothing here depends on the date the tests run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.postgres import with_schema

NOW = datetime(2031, 3, 10, 12, 0, tzinfo=UTC)


def query(dsn: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def cli(*args: str, now: datetime = NOW) -> Any:
    from spanreplay.cli import cli as root
    from spanreplay.cli._common import CliState

    result = CliRunner().invoke(root, list(args), obj=CliState(clock=lambda: now), prog_name="spanreplay")
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def empty_schema(pg_server: str) -> Iterator[str]:
    """A DSN on a fresh schema without the spanreplay tables."""
    import psycopg

    schema = f"sr_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_schema(pg_server, schema)
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def at_version_3(dsn: str) -> None:
    """The tables as a release before partitions left them."""
    import psycopg

    from spanreplay.sources.postgres.schema import MIGRATIONS, MIGRATIONS_TABLE

    with psycopg.connect(dsn) as conn:
        conn.execute(
            f"CREATE TABLE {MIGRATIONS_TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
        )
        for migration in MIGRATIONS[:3]:
            conn.execute(migration.sql)
            conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} (version, name) VALUES (%s, %s)", (migration.version, "v"))


def run_id_at(when: datetime) -> str:
    return f"run_{when:%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"


def record(directory: Path, provider: TracerProvider, run_id: str, *, steps: int = 3, fail: bool = False) -> str:
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    try:
        with spanreplay.record(agent="fleet", run_id=run_id):
            for i in range(steps):
                spanreplay.boundary(
                    "model", "m", {"i": i}, lambda i=i: {"n": i}, attributes={"gen_ai.usage.input_tokens": 10}
                )
            if fail:
                raise ValueError("bad")
    except ValueError:
        pass
    return run_id


def relkind(dsn: str, name: str) -> str | None:
    found = query(dsn, "SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass(%s)", (name,))
    return str(found[0][0]) if found else None


def partition_of(dsn: str, run_id: str) -> set[str]:
    """The tables a run's row and its steps' rows are in."""
    runs = query(dsn, "SELECT tableoid::regclass::text FROM agent_runs WHERE run_id = %s", (run_id,))
    steps = query(dsn, "SELECT DISTINCT tableoid::regclass::text FROM agent_steps WHERE run_id = %s", (run_id,))
    return {name for (name,) in runs + steps}


# --- partitions ----------------------------------------------------------------------------


def test_upgrade_partitions_both_tables_by_day_and_makes_the_coming_days(empty_schema: str) -> None:
    from spanreplay.sources.postgres.partitions import listing
    from spanreplay.sources.postgres.schema import upgrade

    upgrade(empty_schema, today=date(2031, 3, 10), ahead=3)
    assert relkind(empty_schema, "agent_steps") == relkind(empty_schema, "agent_runs") == "p"
    days, waiting = listing(empty_schema)
    assert days == [date(2031, 3, 9) + timedelta(days=n) for n in range(5)]  # yesterday to 3 days ahead
    assert waiting == (0, 0)
    for table in ("agent_runs", "agent_steps"):
        assert relkind(empty_schema, f"{table}_p20310313") == "r"
        assert relkind(empty_schema, f"{table}_default") == "r"
    # Made again, or ahead from a later day: only the missing ones are made.
    out = cli("db", "partitions", empty_schema, "--ahead", "5", now=datetime(2031, 3, 12, tzinfo=UTC))
    assert "made 4 day partition(s) from 2031-03-11 to 2031-03-17" in out.output
    assert "has the partitions of 9 day(s): 2031-03-09 to 2031-03-17" in out.output


def test_a_row_for_a_day_without_a_partition_waits_in_the_default_one_and_moves_when_it_is_made(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.recording.postgres.backfill import export
    from spanreplay.sources.postgres.partitions import make

    far = run_id_at(datetime(2040, 1, 1, 23, 59, 59, tzinfo=UTC))
    record(tmp_path / "traces", provider, far, steps=4)
    export(tmp_path / "traces", pg_dsn)
    assert partition_of(pg_dsn, far) == {"agent_runs_default", "agent_steps_default"}
    before = spanreplay.load(pg_dsn, far)
    assert before == spanreplay.load(tmp_path / "traces", far)
    totals = query(pg_dsn, "SELECT steps_recorded, tokens_in FROM agent_runs WHERE run_id = %s", (far,))
    assert totals == [(4, 40)]

    out = cli("db", "partitions", pg_dsn, "--ahead", "0", now=datetime(2040, 1, 1, tzinfo=UTC))
    assert "made 2 day partition(s)" in out.output
    assert "wait in the default" not in out.output
    make(pg_dsn, date(2040, 1, 1), date(2040, 1, 1))  # already there: nothing moves twice
    assert partition_of(pg_dsn, far) == {"agent_runs_p20400101", "agent_steps_p20400101"}
    assert query(pg_dsn, "SELECT count(*) FROM agent_steps_default") == [(0,)]
    assert spanreplay.load(pg_dsn, far) == before
    assert query(pg_dsn, "SELECT steps_recorded, tokens_in FROM agent_runs WHERE run_id = %s", (far,)) == totals


def test_hostile_run_ids_stay_values_and_name_no_partition(pg_dsn: str) -> None:
    import psycopg

    from spanreplay.recording.postgres.span_rows import INSERT_STEP_LOOKUP

    hostile = [
        "run_20310310_120000_x'); DROP TABLE agent_steps; --",
        'run_20310230_000000_"agent_steps_p20310310"',  # no such date: dated by its step instead
        "run_99991231_235959_far",
    ]
    step = {
        "step_number": 1, "step_type": "tool", "key": "k", "call_id": "tool:k#0", "input": "{}", "output": "1",
        "error": None, "input_text": "{}", "output_text": "1", "error_text": None, "tokens_in": None,
        "tokens_out": None, "cost": None, "trace_id": "t" * 32, "span_id": "s" * 16, "start_ns": 1, "end_ns": 2,
        "created_at": NOW, "attributes": "{}", "schema_version": 1, "service_name": "", "started_at": NOW,
        "run_day": date(2031, 3, 9),
    }  # fmt: skip
    with psycopg.connect(pg_dsn) as conn:
        for run_id in hostile:
            conn.execute(INSERT_STEP_LOOKUP, {**step, "run_id": run_id})  # the day read by SQL
    assert relkind(pg_dsn, "agent_steps") == "p"
    days = dict(query(pg_dsn, "SELECT run_id, run_day FROM agent_runs"))
    assert days == {hostile[0]: date(2031, 3, 10), hostile[1]: date(2031, 3, 9), hostile[2]: date(9999, 12, 31)}
    assert partition_of(pg_dsn, hostile[2]) == {"agent_runs_default", "agent_steps_default"}
    for run_id in hostile:
        assert [e.key for e in spanreplay.load(pg_dsn, run_id)] == ["k"]
    assert query(pg_dsn, "SELECT count(*) FROM agent_steps") == [(3,)]


DATED_IDS = st.builds(
    "run_{:04d}{:02d}{:02d}_{:02d}{:02d}{:02d}_{}".format,
    st.integers(0, 9999), st.integers(0, 13), st.integers(0, 32), st.integers(0, 25), st.integers(0, 61),
    st.integers(0, 62), st.text(max_size=5),
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(run_id=st.one_of(DATED_IDS, st.text(max_size=30)))
@example(run_id="run_20240229_235959_leap")
@example(run_id="run_20230229_000000_no")
@example(run_id="run_20310310_120000_\udc80")
@example(run_id="run_२०३१0310_120000_digits")
def test_the_day_a_run_id_carries_is_the_same_in_python_and_in_sql(pg_dsn: str, run_id: str) -> None:
    from spanreplay.sources.postgres.rows import id_day, to_db_text

    stored = to_db_text(run_id)
    assert query(pg_dsn, "SELECT spanreplay_id_day(%s)", (stored,)) == [(id_day(stored),)]


def test_the_writer_makes_the_coming_days_partitions_by_its_clock(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    import time

    from spanreplay.postgres import PostgresSpanProcessor
    from spanreplay.sources.postgres.partitions import listing

    processor = PostgresSpanProcessor(pg_dsn, postgres_wait=60)
    processor.clock = lambda: datetime(2035, 6, 1, 8, tzinfo=UTC)
    processor.partitions_ahead = 2
    spanreplay.configure(trace_dir=tmp_path / "traces", tracer_provider=provider, postgres=processor)
    with spanreplay.record(agent="ahead"):
        spanreplay.boundary("tool", "t", {}, lambda: 1)
    assert processor.force_flush()
    wanted = {date(2035, 5, 31), date(2035, 6, 1), date(2035, 6, 2), date(2035, 6, 3)}
    deadline = time.monotonic() + 30
    while not wanted <= set(listing(pg_dsn)[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert wanted <= set(listing(pg_dsn)[0])


# --- migration in place ----------------------------------------------------------------------


def test_a_version_3_database_is_moved_into_day_partitions_with_every_row_and_total(
    pg_dsn: str, empty_schema: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.recording.postgres.backfill import export
    from spanreplay.sources.postgres.schema import LATEST, upgrade, version

    directory = tmp_path / "traces"
    # Ended one second before midnight: its steps are of the next day, its run of this one.
    late = record(directory, provider, run_id_at(datetime(2031, 3, 5, 23, 59, 59, tzinfo=UTC)), steps=5)
    failed = record(directory, provider, run_id_at(datetime(2031, 3, 7, 9, tzinfo=UTC)), fail=True)
    plain = record(directory, provider, "nightly-import", steps=2)  # no date in its id: its start says the day
    export(directory, pg_dsn)
    logs = {run_id: spanreplay.load(pg_dsn, run_id) for run_id in (late, failed, plain)}

    # The same rows, in a database left at version 3 by an earlier release.
    v3 = empty_schema
    at_version_3(v3)
    schema = v3.rsplit("%3D", 1)[1]
    import psycopg

    run_columns = (
        "run_id, agent, status, error, error_text, trace_id, span_id, service_name, forked_from, started_at, "
        "ended_at, start_ns, end_ns, steps_started, steps_recorded, steps_failed, tokens_in, tokens_out, cost, "
        "schema_version, masking"
    )
    step_columns = (
        "id, run_id, step_number, step_type, key, call_id, input, output, error, input_text, output_text, "
        "error_text, tokens_in, tokens_out, cost, trace_id, span_id, start_ns, end_ns, created_at, attributes, "
        "schema_version"
    )
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f"INSERT INTO {schema}.agent_runs ({run_columns}) SELECT {run_columns} FROM agent_runs")
        conn.execute(f"ALTER TABLE {schema}.agent_steps DISABLE TRIGGER agent_steps_totals")
        conn.execute(f"INSERT INTO {schema}.agent_steps ({step_columns}) SELECT {step_columns} FROM agent_steps")
        conn.execute(f"ALTER TABLE {schema}.agent_steps ENABLE TRIGGER agent_steps_totals")
    totals_sql = f"SELECT {run_columns} FROM agent_runs ORDER BY run_id"
    before = query(v3, totals_sql)
    steps_sql = f"SELECT {step_columns} FROM agent_steps ORDER BY run_id, step_number"
    steps_before = query(v3, steps_sql)
    assert len(before) == 3
    assert len(steps_before) == 10

    # The dry run says what would be done to this database, and does none of it.
    dry = cli("db", "upgrade", v3, "--dry-run")
    assert "would apply migration 4: agent_runs and agent_steps partitioned by day" in dry.output
    assert "would move 3 run(s) and 10 step(s)" in dry.output
    assert "would make the partitions of 3 day(s) the runs started on" in dry.output
    assert version(v3) == 3
    assert relkind(v3, "agent_steps") == "r"
    own_functions = (
        "SELECT count(*) FROM pg_proc WHERE proname = 'spanreplay_id_day' AND pronamespace = %s::regnamespace"
    )
    assert query(v3, own_functions, (schema,)) == [(0,)]
    assert query(v3, totals_sql) == before

    applied = upgrade(v3, today=NOW.date())
    assert [m.version for m in applied] == [4]
    assert version(v3) == LATEST
    assert relkind(v3, "agent_steps") == "p"
    assert query(v3, totals_sql) == before  # totals moved, not counted again
    assert query(v3, steps_sql) == steps_before
    for run_id, log in logs.items():
        assert spanreplay.load(v3, run_id) == log
    # The run of late evening is whole in its start day's partition.
    assert partition_of(v3, late) == {"agent_runs_p20310305", "agent_steps_p20310305"}
    # Safe to run again: nothing left to do.
    assert upgrade(v3, today=NOW.date()) == []
    assert "nothing to do" in cli("db", "upgrade", v3).output
    # New rows go on from the moved ones' ids, and add to the moved totals.
    new = record(directory, provider, run_id_at(datetime(2031, 3, 10, 1, tzinfo=UTC)), steps=1)
    export(directory, v3)
    ids = [i for (i,) in query(v3, "SELECT id FROM agent_steps WHERE run_id = %s", (new,))]
    assert ids
    assert min(ids) > max(row[0] for row in steps_before)


# --- retention ------------------------------------------------------------------------------


def test_prune_drops_whole_day_partitions_and_deletes_only_the_partial_day_row_by_row(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.recording.postgres.backfill import export
    from spanreplay.sources.postgres.partitions import listing, make

    make(pg_dsn, date(2031, 1, 20), date(2031, 3, 11))
    directory = tmp_path / "traces"
    old_ok = record(directory, provider, run_id_at(NOW - timedelta(days=40)))
    old_failed = record(directory, provider, run_id_at(NOW - timedelta(days=40, hours=1)), fail=True)
    # Started just before midnight 35 days ago; its steps were written later (now): one run, one partition.
    spanning = record(directory, provider, run_id_at(datetime(2031, 2, 3, 23, 59, 59, tzinfo=UTC)), steps=6)
    edge = record(directory, provider, run_id_at(NOW - timedelta(days=30, hours=6)))  # same day as the cut-off
    young_same_day = record(directory, provider, run_id_at(NOW - timedelta(days=29, hours=23, minutes=59)))
    young = record(directory, provider, run_id_at(NOW - timedelta(days=10)))
    export(directory, pg_dsn)
    assert partition_of(pg_dsn, spanning) == {"agent_runs_p20310203", "agent_steps_p20310203"}

    def state() -> list[tuple[Any, ...]]:
        return query(pg_dsn, "SELECT run_id, count(*) FROM agent_steps GROUP BY run_id ORDER BY run_id")

    before, days_before = state(), listing(pg_dsn)[0]
    dry = cli("prune", pg_dsn, "--older-than", "30d", "--dry-run")
    assert "would drop the partitions of 2031-01-29: 2 run(s) (1 ok, 1 failed or crashed), 6 step(s)" in dry.output
    assert "would drop the partitions of 2031-02-03: 1 run(s) (1 ok, 0 failed or crashed), 6 step(s)" in dry.output
    assert f"would remove {edge}" in dry.output
    assert (state(), listing(pg_dsn)[0]) == (before, days_before)

    done = cli("prune", pg_dsn, "--older-than", "30d")
    assert "Removed 4 run(s) (3 ok, 1 failed or crashed, older than 30d); kept 2." in done.output
    days = listing(pg_dsn)[0]
    assert min(days) == date(2031, 2, 8)  # every day before the cut-off's day is gone whole
    assert relkind(pg_dsn, "agent_steps_p20310129") is None
    assert relkind(pg_dsn, "agent_runs_p20310203") is None
    kept = {run_id for (run_id,) in query(pg_dsn, "SELECT run_id FROM agent_runs")}
    assert kept == {young_same_day, young}
    # No step of a removed run is left in any partition, and the kept runs are whole.
    assert {run_id for run_id, _ in state()} == kept
    assert dict(state()) == {run_id: n for run_id, n in before if run_id in kept}
    for run_id in (old_ok, old_failed, spanning):
        assert partition_of(pg_dsn, run_id) == set()


def test_prune_keeps_per_status_windows_and_drops_only_days_past_both(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.recording.postgres.backfill import export
    from spanreplay.sources.postgres.partitions import listing, make

    make(pg_dsn, date(2030, 11, 1), date(2031, 3, 11))
    directory = tmp_path / "traces"
    very_old = record(directory, provider, run_id_at(NOW - timedelta(days=100)), fail=True)
    failed = record(directory, provider, run_id_at(NOW - timedelta(days=40)), fail=True)
    ok = record(directory, provider, run_id_at(NOW - timedelta(days=40)))
    export(directory, pg_dsn)
    out = cli("prune", pg_dsn)  # ok 7 days, failed 90 days
    day = (NOW - timedelta(days=100)).date()
    assert f"dropped the partitions of {day:%Y-%m-%d}: 1 run(s) (0 ok, 1 failed or crashed)" in out.output
    assert f"removed {ok}" in out.output
    assert {run_id for (run_id,) in query(pg_dsn, "SELECT run_id FROM agent_runs")} == {failed}
    assert very_old not in {r.run_id for r in spanreplay.runs(pg_dsn)}
    assert (NOW - timedelta(days=40)).date() in listing(pg_dsn)[0]


# --- sub-agents ------------------------------------------------------------------------------


def test_a_sub_agents_parent_round_trips_and_runs_shows_the_tree(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    spanreplay.configure(trace_dir=tmp_path / "traces", tracer_provider=provider, postgres=pg_dsn)
    with spanreplay.record(agent="supervisor") as parent:
        spanreplay.boundary("tool", "plan", {}, lambda: 1)
        with spanreplay.record(agent="researcher") as child:
            spanreplay.boundary("tool", "search", {}, lambda: 2)
    spanreplay.configure(trace_dir=tmp_path / "traces", tracer_provider=provider)  # flushes the rows
    listed = {run.run_id: run.parent for run in spanreplay.runs(pg_dsn)}
    assert listed == {parent.run_id: None, child.run_id: parent.run_id}
    assert spanreplay.runs(pg_dsn) == spanreplay.runs(tmp_path / "traces")
    assert spanreplay.load(pg_dsn, child.run_id).run.parent == parent.run_id
    lines = [line for line in cli("runs", pg_dsn).output.splitlines() if "run_" in line]
    assert parent.run_id in lines[0]
    assert "└" not in lines[0]
    assert "└ " + child.run_id in lines[1]

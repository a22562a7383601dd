"""A batch of step rows written with one statement: the same rows and totals as one insert per row.

Each test writes the same rows twice, into two schemas: as one batch through the
writer's ``commit`` (one ``INSERT ... FROM unnest`` per round) and one row per
commit (the single-row statements), and compares the tables.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.postgres import with_schema

NOW = datetime(2031, 3, 10, 23, 0, tzinfo=UTC)
DATED = "run_20310310_230000_batch"
UNDATED = "nightly-build-7"  # no date in the id: the run's day is its first row's

STEP_COLUMNS = (
    "run_id, run_day, step_number, step_type, key, call_id, input, output, error, input_text, output_text, "
    "error_text, tokens_in, tokens_out, cost, trace_id, span_id, start_ns, end_ns, created_at, attributes::text, "
    "schema_version"
)
RUN_COLUMNS = (
    "run_id, run_day, status, trace_id, service_name, start_ns, started_at, steps_recorded, steps_failed, "
    "tokens_in, tokens_out, cost"
)


def step(
    run_id: str,
    number: int,
    *,
    ended: bool = True,
    failed: bool = False,
    nul: bool = False,
    tokens: float | None = 10,
    output: str = '{"ok": 1}',
    day_offset: int = 0,
) -> dict[str, Any]:
    """The ``step_params`` of a step: ended, failed, an effect's intent (not ended), or holding U+0000."""
    from spanreplay.sources.postgres.rows import id_day

    start = NOW + timedelta(days=day_offset, minutes=number)
    start_ns = int(start.timestamp() * 1e9)
    input_text = '{"q": "a\\u0000b"}' if nul else f'{{"q": {number}}}'
    error_text = '{"type": "Boom"}' if failed and ended else None
    output_text = output if ended and not failed else None
    dated = id_day(run_id)
    return {
        "run_id": run_id, "step_number": number, "step_type": "tool", "key": "search",
        "call_id": f"tool:search#{number - 1}",
        "input": None if nul else input_text, "output": output_text, "error": error_text,
        "input_text": input_text, "output_text": output_text, "error_text": error_text,
        "tokens_in": tokens if ended else None, "tokens_out": 3 if ended else None,
        "cost": 0.5 if ended else None, "trace_id": "a" * 32, "span_id": f"{number:016x}",
        "start_ns": start_ns, "end_ns": start_ns + 1000 if ended else 0,
        "created_at": start if ended else NOW, "attributes": f'{{"n": {number}}}', "schema_version": 1,
        "service_name": "svc", "started_at": start,
        "run_day": dated or start.date(), "dated": dated is not None,
    }  # fmt: skip


@pytest.fixture
def twin_dsn(pg_server: str) -> Iterator[str]:
    """A second schema with the tables: the rows written one per commit go here."""
    import psycopg

    from spanreplay.postgres import upgrade

    schema = f"sr_twin_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = with_schema(pg_server, schema)
    upgrade(dsn, today=NOW.date())
    yield dsn
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def commit_rows(dsn: str, rows: list[dict[str, Any]], *, one_by_one: bool = False) -> None:
    from psycopg_pool import ConnectionPool

    from spanreplay.recording.postgres.writes import STEP, Write, commit
    from spanreplay.sources.postgres.connect import session_settings

    pool: ConnectionPool[Any] = ConnectionPool(
        dsn, min_size=1, max_size=1, kwargs={"autocommit": True}, configure=lambda c: session_settings(c, 10), open=True
    )
    try:
        batches = [[row] for row in rows] if one_by_one else [rows]
        for batch in batches:
            failed = commit(pool, 10, [Write(STEP, params=dict(row)) for row in batch])
            assert failed is None, failed
    finally:
        pool.close()


def tables(dsn: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        steps = conn.execute(f"SELECT {STEP_COLUMNS} FROM agent_steps ORDER BY run_id, step_number").fetchall()
        runs = conn.execute(f"SELECT {RUN_COLUMNS} FROM agent_runs ORDER BY run_id").fetchall()
    return steps, runs


def count_insert_statements(dsn: str) -> None:
    """From now on, every INSERT statement on agent_steps adds a row to ``insert_statements``."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE insert_statements (at timestamptz DEFAULT clock_timestamp())")
        conn.execute(
            "CREATE FUNCTION count_insert() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN INSERT INTO insert_statements DEFAULT VALUES; RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE TRIGGER count_insert AFTER INSERT ON agent_steps FOR EACH STATEMENT EXECUTE FUNCTION count_insert()"
        )


def test_a_batch_with_a_retry_an_intent_and_its_outcome_and_a_nul_keeps_rows_and_totals_exact(
    pg_dsn: str, twin_dsn: str
) -> None:
    already = step(DATED, 1)
    batch = [
        step(DATED, 1, output='{"retried": true}'),  # already in the table: left as it was, not counted
        step(DATED, 2, ended=False),  # a side effect's intent ...
        step(DATED, 3, nul=True),  # JSONB cannot hold U+0000: input NULL, the text kept
        step(DATED, 2, tokens=7.0),  # ... and its outcome, in the same batch
        step(DATED, 4, failed=True, tokens=2.5),
        step(UNDATED, 1, day_offset=0),
        step(UNDATED, 2, day_offset=1),  # after midnight: still the run's first day
    ]
    for dsn in (pg_dsn, twin_dsn):
        commit_rows(dsn, [already])
    count_insert_statements(pg_dsn)
    commit_rows(pg_dsn, batch)
    commit_rows(twin_dsn, batch, one_by_one=True)

    steps, runs = tables(pg_dsn)
    assert (steps, runs) == tables(twin_dsn)
    import psycopg

    with psycopg.connect(pg_dsn) as conn:
        # One statement for the batch, and one more for the step it holds twice.
        assert conn.execute("SELECT count(*) FROM insert_statements").fetchone() == (2,)
        totals = conn.execute(
            "SELECT run_id, run_day, steps_recorded, steps_failed, tokens_in, tokens_out, cost FROM agent_runs "
            "ORDER BY run_id"
        ).fetchall()
        rows = {
            (r[0], r[1]): r[2:]
            for r in conn.execute(
                "SELECT run_id, step_number, input, input_text, output_text, end_ns <> 0, run_day FROM agent_steps"
            ).fetchall()
        }
    assert totals == [
        # tokens_in: 10 (step 1) + 7 (the outcome of 2) + 10 (3) + 2 (2.5 rounded to even, as the column casts it)
        (UNDATED, date(2031, 3, 10), 2, 0, 20, 6, 1.0),
        (DATED, date(2031, 3, 10), 4, 1, 29, 12, 2.0),
    ]
    assert rows[DATED, 1][2] == '{"ok": 1}'  # the retried copy changed nothing
    assert rows[DATED, 2][2:4] == ('{"ok": 1}', True)  # the intent got its outcome
    assert rows[DATED, 3][:2] == (None, '{"q": "a\\u0000b"}')
    assert {r[4] for k, r in rows.items() if k[0] == UNDATED} == {date(2031, 3, 10)}


KINDS = st.sampled_from(["ended", "intent", "failed", "nul", "float tokens", "retry"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    present=st.lists(st.tuples(st.booleans(), st.integers(1, 4)), max_size=3),
    ops=st.lists(st.tuples(st.booleans(), st.integers(1, 4), KINDS, st.integers(0, 1)), min_size=1, max_size=12),
)
def test_any_batch_writes_what_one_insert_per_row_writes(
    pg_dsn: str, twin_dsn: str, present: list[tuple[bool, int]], ops: list[tuple[bool, int, str, int]]
) -> None:
    tag = uuid.uuid4().hex[:8]
    ids = {True: f"run_20310310_230000_{tag}", False: f"agent-{tag}"}

    def make(dated: bool, number: int, kind: str = "ended", offset: int = 0) -> dict[str, Any]:
        return step(
            ids[dated], number, ended=kind != "intent", failed=kind == "failed", nul=kind == "nul",
            tokens=4.5 if kind == "float tokens" else 10, output='{"again": 1}' if kind == "retry" else '{"ok": 1}',
            day_offset=offset,
        )  # fmt: skip

    before = [make(dated, number) for dated, number in present]
    batch = [make(*op) for op in ops]
    for dsn in (pg_dsn, twin_dsn):
        commit_rows(dsn, before)
    commit_rows(pg_dsn, batch)
    commit_rows(twin_dsn, batch, one_by_one=True)
    assert tables(pg_dsn) == tables(twin_dsn)


def test_a_slow_server_takes_a_batch_it_took_row_by_row_and_later_statements_keep_their_bound(pg_dsn: str) -> None:
    import psycopg

    from spanreplay.recording.postgres.step_batches import write_steps
    from spanreplay.sources.postgres.connect import session_settings

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$"
        )
        conn.execute("CREATE TRIGGER slow BEFORE INSERT ON agent_steps FOR EACH ROW EXECUTE FUNCTION slow_insert()")
        session_settings(conn, 0.5)
        rows = [step(DATED, n) for n in (1, 2, 3)]  # 0.9 s in all, 0.3 s a row: under 0.5 s a row
        with conn.transaction(), conn.cursor() as cur:
            assert write_steps(cur, rows, row_timeout=0.5) == 3
            assert cur.execute("SHOW statement_timeout").fetchone() == ("500ms",)
    assert tables(pg_dsn)[1][0][7] == 3  # steps_recorded

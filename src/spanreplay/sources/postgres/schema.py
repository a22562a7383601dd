"""The Postgres schema, as numbered migrations applied by ``spanreplay db upgrade``.

Each migration runs in its own transaction under an advisory lock, so two
processes upgrading at once apply each migration exactly once. A migration is
never edited after release: a change is a new migration with the next number.
The tables live in the first schema of the connection's ``search_path``
(``?options=-csearch_path%3Dagents`` in the DSN picks another).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any, Final

import psycopg

from . import partitions
from .connect import SCHEMA_LOCK, connect, describe, failure
from .partitioned_tables import ID_DAY_SQL, MIGRATION_DAYS, V4_SQL

MIGRATIONS_TABLE: Final = "spanreplay_migrations"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


_V1 = """
CREATE TABLE agent_runs (
    run_id          TEXT PRIMARY KEY,
    agent           TEXT NOT NULL DEFAULT '',
    -- running until the run span ends; a running run whose process died reads as crashed.
    status          TEXT NOT NULL,
    error           JSONB,
    error_text      TEXT,
    trace_id        TEXT,
    -- NULL until the run span itself arrives (steps can come first: an export of a
    -- backend that never received the root of a crashed run).
    span_id         TEXT,
    service_name    TEXT NOT NULL DEFAULT '',
    forked_from     TEXT,
    started_at      TIMESTAMPTZ,
    ended_at        TIMESTAMPTZ,
    start_ns        BIGINT,
    end_ns          BIGINT,
    -- boundaries the run started (written when it ends), against steps_recorded.
    steps_started   INTEGER,
    steps_recorded  INTEGER NOT NULL DEFAULT 0,
    steps_failed    INTEGER NOT NULL DEFAULT 0,
    tokens_in       BIGINT NOT NULL DEFAULT 0,
    tokens_out      BIGINT NOT NULL DEFAULT 0,
    cost            DOUBLE PRECISION NOT NULL DEFAULT 0,
    schema_version  SMALLINT NOT NULL
);
CREATE INDEX agent_runs_started_at ON agent_runs (started_at);
CREATE INDEX agent_runs_status ON agent_runs (status, started_at);

CREATE TABLE agent_steps (
    id              BIGSERIAL PRIMARY KEY,
    run_id          TEXT NOT NULL REFERENCES agent_runs (run_id) ON DELETE CASCADE,
    step_number     INTEGER NOT NULL,
    step_type       TEXT NOT NULL,
    key             TEXT NOT NULL,
    call_id         TEXT NOT NULL,
    -- For queries. NULL where JSONB cannot hold the value (a string with U+0000).
    input           JSONB,
    output          JSONB,
    error           JSONB,
    -- The payloads exactly as recorded (JSONB reorders keys and rewrites numbers);
    -- replay reads these, so the event log matches the trace file byte for byte.
    input_text      TEXT NOT NULL,
    output_text     TEXT,
    error_text      TEXT,
    tokens_in       BIGINT,
    tokens_out      BIGINT,
    cost            DOUBLE PRECISION,
    trace_id        TEXT NOT NULL,
    span_id         TEXT NOT NULL,
    start_ns        BIGINT NOT NULL,
    end_ns          BIGINT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- The span's other attributes (GenAI names, token details), kept verbatim.
    attributes      JSON NOT NULL DEFAULT '{}',
    schema_version  SMALLINT NOT NULL,
    -- Also the index on (run_id, step_number). A retried insert of a step hits it
    -- and does nothing (ON CONFLICT DO NOTHING), so retries are harmless.
    CONSTRAINT agent_steps_run_step UNIQUE (run_id, step_number)
);
CREATE INDEX agent_steps_created_at ON agent_steps (created_at);

-- Totals follow the rows actually inserted (a retried step is not counted twice,
-- and a crashed run still shows what it completed). Statement-level, so a batch
-- of rows updates each run once.
CREATE FUNCTION spanreplay_add_step_totals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE agent_runs AS r
    SET steps_recorded = r.steps_recorded + n.steps,
        steps_failed = r.steps_failed + n.failed,
        tokens_in = r.tokens_in + n.tokens_in,
        tokens_out = r.tokens_out + n.tokens_out,
        cost = r.cost + n.cost
    FROM (
        SELECT run_id,
               count(*) AS steps,
               count(*) FILTER (WHERE error_text IS NOT NULL) AS failed,
               coalesce(sum(tokens_in), 0) AS tokens_in,
               coalesce(sum(tokens_out), 0) AS tokens_out,
               coalesce(sum(cost), 0) AS cost
        FROM new_steps
        GROUP BY run_id
        ORDER BY run_id  -- one lock order for every writer: no deadlock between batches
    ) AS n
    WHERE r.run_id = n.run_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER agent_steps_totals
    AFTER INSERT ON agent_steps
    REFERENCING NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION spanreplay_add_step_totals();
"""

# How the run's payloads were masked (spanreplay.run.masking), so replay from the
# table can check it masks the current inputs the same way.
_V2 = """
ALTER TABLE agent_runs ADD COLUMN masking TEXT;
"""

# A side effect's intent is inserted (and counted) before its work runs; its outcome
# then updates the row. The outcome's failure, tokens and cost are added to the run's
# totals here, from the rows that went from intent (end_ns 0) to ended.
_V3 = """
CREATE FUNCTION spanreplay_add_outcome_totals() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE agent_runs AS r
    SET steps_failed = r.steps_failed + n.failed,
        tokens_in = r.tokens_in + n.tokens_in,
        tokens_out = r.tokens_out + n.tokens_out,
        cost = r.cost + n.cost
    FROM (
        SELECT s.run_id,
               count(*) FILTER (WHERE s.error_text IS NOT NULL AND o.error_text IS NULL) AS failed,
               coalesce(sum(s.tokens_in), 0) - coalesce(sum(o.tokens_in), 0) AS tokens_in,
               coalesce(sum(s.tokens_out), 0) - coalesce(sum(o.tokens_out), 0) AS tokens_out,
               coalesce(sum(s.cost), 0) - coalesce(sum(o.cost), 0) AS cost
        FROM new_steps AS s JOIN old_steps AS o ON o.id = s.id
        WHERE o.end_ns = 0 AND s.end_ns <> 0
        GROUP BY s.run_id
        ORDER BY s.run_id
    ) AS n
    WHERE r.run_id = n.run_id;
    RETURN NULL;
END
$$;
CREATE TRIGGER agent_steps_outcome_totals
    AFTER UPDATE ON agent_steps
    REFERENCING OLD TABLE AS old_steps NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION spanreplay_add_outcome_totals();
"""

# The schema's migrations, oldest first (`spanreplay db upgrade` applies them).
MIGRATIONS: Final = (
    Migration(1, "agent_runs and agent_steps", _V1),
    Migration(2, "agent_runs.masking", _V2),
    Migration(3, "agent_steps outcome totals for side-effect intents", _V3),
    Migration(4, "agent_runs and agent_steps partitioned by day, agent_runs.parent", V4_SQL),
)
# The schema version this release writes and reads.
LATEST: Final = MIGRATIONS[-1].version
# The version whose tables are partitioned by day.
PARTITIONED: Final = 4
# Days after today that partitions are made for ahead (db upgrade, the writer).
AHEAD_DAYS: Final = 7


def current_version(conn: psycopg.Connection[Any]) -> int:
    """The newest migration applied in the connection's schema; 0 for none."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (MIGRATIONS_TABLE,)).fetchone()
    if not row or not row[0]:
        return 0
    found = conn.execute(f"SELECT coalesce(max(version), 0) FROM {MIGRATIONS_TABLE}").fetchone()
    return int(found[0]) if found else 0


def upgrade(dsn: str, *, timeout: float = 30.0, today: date | None = None, ahead: int = AHEAD_DAYS) -> list[Migration]:
    """Apply the migrations the database lacks, oldest first, then make the partitions of
    yesterday to ``ahead`` days after ``today`` (UTC today by default). Returns the
    migrations applied."""
    applied: list[Migration] = []
    with connect(dsn, timeout=timeout) as conn:
        try:
            for migration in MIGRATIONS:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
                    conn.execute(
                        f"CREATE TABLE IF NOT EXISTS {MIGRATIONS_TABLE} ("
                        "version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                        "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
                    )
                    if current_version(conn) >= migration.version:
                        continue
                    conn.execute(migration.sql)
                    conn.execute(
                        f"INSERT INTO {MIGRATIONS_TABLE} (version, name) VALUES (%s, %s)",
                        (migration.version, migration.name),
                    )
                    applied.append(migration)
        except psycopg.Error as exc:
            raise failure(dsn, f"apply migration {migration.version} ({migration.name})", exc) from None
    first, last = partitions.ahead_range(today or datetime.now(UTC).date(), ahead)
    partitions.make(dsn, first, last, timeout=timeout)
    return applied


def plan(dsn: str, *, timeout: float = 30.0) -> list[str]:
    """What ``upgrade`` would do to the database ``dsn``, one sentence a line; changes nothing.

    Everything is read in one transaction that is rolled back whatever happens
    (the move to day partitions needs a temporary copy of the run-day function
    to count the days the rows would go to).
    """
    with connect(dsn, timeout=timeout) as conn:
        try:
            with conn.transaction(force_rollback=True):
                found = current_version(conn)
                lines = [f"would apply migration {m.version}: {m.name}" for m in MIGRATIONS if m.version > found]
                if 1 <= found < PARTITIONED:
                    lines.extend(_partition_plan(conn))
        except psycopg.Error as exc:
            raise failure(dsn, "plan the upgrade", exc) from None
    if not lines:
        lines.append(f"no migration to apply: {describe(dsn)} is at schema version {found}")
    return lines


def _partition_plan(conn: psycopg.Connection[Any]) -> list[str]:
    """The rows migration 4 would move out of the unpartitioned tables, and the partitions it would make."""
    conn.execute(ID_DAY_SQL.format(name="pg_temp.spanreplay_id_day"))
    counted = conn.execute(
        "SELECT (SELECT count(*) FROM agent_runs), (SELECT count(*) FROM agent_steps), "
        "pg_total_relation_size('agent_runs') + pg_total_relation_size('agent_steps')"
    ).fetchone()
    assert counted is not None
    runs, steps, size = counted
    # The days the migration gives the runs: the date a run id carries, else its start.
    days = conn.execute(
        "SELECT count(*), min(day), max(day) FROM (SELECT DISTINCT"
        " coalesce(pg_temp.spanreplay_id_day(run_id), (started_at AT TIME ZONE 'UTC')::date) AS day"
        " FROM agent_runs) AS d WHERE day IS NOT NULL"
    ).fetchone()
    assert days is not None
    distinct, first, last = days
    lines = [
        f"would move {runs} run(s) and {steps} step(s) ({size / 1e6:.1f} MB with their indexes) into tables "
        "partitioned by day, in one transaction: writers wait for it, and a failure changes nothing",
    ]
    if distinct:
        lines.append(
            f"would make the partitions of {min(distinct, MIGRATION_DAYS)} day(s) the runs started on, "
            f"from {first} to {last}; runs of other days go to the default partitions"
        )
    return lines


def version(dsn: str, *, timeout: float = 10.0) -> int:
    """The schema version of the database ``dsn`` points at."""
    with connect(dsn, timeout=timeout) as conn:
        try:
            return current_version(conn)
        except psycopg.Error as exc:
            raise failure(dsn, "read the schema version", exc) from None


def missing_schema_message(dsn: str, found: int) -> str:
    """The sentence that tells a user their database needs ``spanreplay db upgrade``."""
    where = describe(dsn)
    if found == 0:
        return f"{where} has no spanreplay tables; create them with `spanreplay db upgrade {where}`."
    return (
        f"{where} has spanreplay schema version {found}, this release needs {LATEST}; "
        f"upgrade it with `spanreplay db upgrade {where}`."
    )

"""Retention in Postgres: which runs are old enough to go, and deleting them with their steps.

Whole days go by dropping their partitions (every run of the day and all its
steps at once); the runs of the days in between, whose windows depend on their
status, go row by row, each with its steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Final

import psycopg

from spanreplay.sources.postgres import partitions
from spanreplay.sources.postgres.connect import connect, failure
from spanreplay.sources.postgres.rows import read_status

# A run id of the default form sorts by its date, so older runs are a range of the key.
_DATED_ID: Final = r"^run_[0-9]{8}_[0-9]{6}_"
_DELETE_CHUNK: Final = 500


@dataclass(frozen=True)
class StoredRun:
    """A run row as retention sees it."""

    run_id: str
    status: str
    started: datetime | None
    steps: int
    # The partition it is in (all its steps too).
    day: date | None = None


def candidates(dsn: str, *, older_id: str, older_than: datetime) -> list[StoredRun]:
    """Runs that may be past retention: a dated run id below ``older_id`` (``run_YYYYMMDD_HHMMSS``),
    or, for run ids without a date, a start before ``older_than``. The caller applies the
    per-status windows; this only narrows the rows read."""
    query = """
        SELECT run_id, status, end_ns, started_at, steps_recorded, span_id IS NULL, run_day
        FROM agent_runs
        WHERE (run_id ~ %(dated)s AND run_id < %(older_id)s)
           OR (run_id !~ %(dated)s AND (started_at IS NULL OR started_at < %(older_than)s))
        ORDER BY run_id
    """
    with connect(dsn) as conn:
        try:
            rows = conn.execute(query, {"dated": _DATED_ID, "older_id": older_id, "older_than": older_than}).fetchall()
        except psycopg.Error as exc:
            raise failure(dsn, "list the runs to prune", exc) from None
    return [
        StoredRun(
            run_id=run_id,
            status="crashed" if no_root else read_status(status, end_ns),
            started=started,
            steps=steps,
            day=day,
        )
        for run_id, status, end_ns, started, steps, no_root, day in rows
    ]


def delete(dsn: str, runs: Sequence[tuple[str, date | None]]) -> int:
    """Delete these runs (run id, and the day of its partition when known) and their steps, in
    the same transactions. Returns the runs deleted."""
    by_day: dict[date | None, list[str]] = {}
    for run_id, day in runs:
        by_day.setdefault(day, []).append(run_id)
    deleted = 0
    with connect(dsn) as conn:
        try:
            for day, run_ids in by_day.items():
                # Naming the day keeps each statement to one partition: without it every
                # partition's index is searched for every run id of the chunk.
                where = "run_id = ANY(%s)" if day is None else "run_day = %s AND run_id = ANY(%s)"
                for start in range(0, len(run_ids), _DELETE_CHUNK):
                    chunk = run_ids[start : start + _DELETE_CHUNK]
                    values = (chunk,) if day is None else (day, chunk)
                    with conn.transaction():
                        conn.execute(f"DELETE FROM agent_steps WHERE {where}", values)
                        cur = conn.execute(f"DELETE FROM agent_runs WHERE {where}", values)
                        deleted += max(cur.rowcount, 0)
        except psycopg.Error as exc:
            raise failure(dsn, "delete the pruned runs", exc) from None
    return deleted


def count(dsn: str) -> int:
    """How many runs the database holds."""
    with connect(dsn) as conn:
        try:
            row = conn.execute("SELECT count(*) FROM agent_runs").fetchone()
        except psycopg.Error as exc:
            raise failure(dsn, "count the runs", exc) from None
    return int(row[0]) if row else 0


def whole_days(dsn: str, before: date) -> list[partitions.DayPartition]:
    """The day partitions older than ``before``, with the runs and steps each holds."""
    with connect(dsn) as conn:
        try:
            with conn.transaction():
                return [partitions.count_day(conn, day) for day in partitions.partition_days(conn) if day < before]
        except psycopg.Error as exc:
            raise failure(dsn, "list the partitions to prune", exc) from None


def drop_days(dsn: str, days: Sequence[date]) -> None:
    """Detach and drop the partitions of these days: their runs and steps go whole."""
    with connect(dsn) as conn:
        for day in days:
            try:
                partitions.drop_on(conn, day)
            except psycopg.Error as exc:
                raise failure(dsn, f"drop the partitions of {day}", exc) from None

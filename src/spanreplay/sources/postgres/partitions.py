"""The day partitions of ``agent_runs`` and ``agent_steps``: listed, made ahead, dropped whole.

A partition's name is formatted here from a ``date`` (``agent_steps_p20261129``),
never taken from a row or an argument, and reaches SQL as an identifier. Making
and dropping take the schema's advisory lock, so hosts doing it at once take
turns. See ``partitioned_tables`` for the layout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Final

import psycopg
from psycopg import sql

from .connect import SCHEMA_LOCK, connect, failure

TABLES: Final = ("agent_runs", "agent_steps")
# Runs started yesterday may still be writing: their partition is made too.
_BEHIND: Final = timedelta(days=1)
_NAME: Final = re.compile(r"^agent_steps_p([0-9]{8})$")


def partition_name(table: str, day: date) -> str:
    """The name of ``table``'s partition for ``day``: ``agent_steps_p20261129``."""
    return f"{table}_p{day:%Y%m%d}"


def ahead_range(today: date, ahead: int) -> tuple[date, date]:
    """The days partitions are made for: yesterday to ``ahead`` days after ``today``."""
    return today - _BEHIND, today + timedelta(days=ahead)


@dataclass(frozen=True)
class DayPartition:
    """One day's partitions: the day, and the runs and steps they hold (when counted)."""

    day: date
    runs: int = 0
    steps: int = 0
    ok_runs: int = 0


def partition_days(conn: psycopg.Connection[Any]) -> list[date]:
    """The days ``agent_steps`` has a partition of spanreplay's naming for, oldest first."""
    found = conn.execute(
        "SELECT c.relname FROM pg_inherits AS i JOIN pg_class AS c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = 'agent_steps'::regclass"
    ).fetchall()
    days = []
    for (name,) in found:
        match = _NAME.match(name)
        if match:
            try:
                days.append(datetime.strptime(match.group(1), "%Y%m%d").date())
            except ValueError:  # a table named like ours by someone else, not a date
                continue
    return sorted(days)


def count_day(conn: psycopg.Connection[Any], day: date) -> DayPartition:
    """The runs (and how many ended ok) and steps in ``day``'s partitions."""
    runs_table, steps_table = (sql.Identifier(partition_name(t, day)) for t in TABLES)
    runs = conn.execute(
        sql.SQL(
            "SELECT count(*), count(*) FILTER (WHERE status = 'ok' AND span_id IS NOT NULL AND end_ns IS NOT NULL) "
            "FROM {}"
        ).format(runs_table)
    ).fetchone()
    steps = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(steps_table)).fetchone()
    assert runs is not None
    assert steps is not None
    return DayPartition(day, runs=int(runs[0]), steps=int(steps[0]), ok_runs=int(runs[1]))


def make_on(conn: psycopg.Connection[Any], first: date, last: date, *, wait: bool = True) -> int | None:
    """Make the missing partitions from ``first`` to ``last`` in one transaction; the tables made.

    ``wait=False`` (the writer) gives up at once, returning None, when another
    session holds the schema lock: it tries again later.
    """
    with conn.transaction():
        if wait:
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        else:
            row = conn.execute("SELECT pg_try_advisory_xact_lock(%s)", (SCHEMA_LOCK,)).fetchone()
            if not row or not row[0]:
                return None
        made = conn.execute("SELECT spanreplay_make_partitions(%s, %s)", (first, last)).fetchone()
    return int(made[0]) if made else 0


def make(dsn: str, first: date, last: date, *, timeout: float = 30.0) -> int:
    """Make the missing partitions from ``first`` to ``last`` in ``dsn``; the tables made."""
    with connect(dsn, timeout=timeout) as conn:
        try:
            return make_on(conn, first, last) or 0
        except psycopg.Error as exc:
            raise failure(dsn, f"make the partitions from {first} to {last}", exc) from None


def drop_on(conn: psycopg.Connection[Any], day: date) -> None:
    """Detach and drop ``day``'s partitions of both tables, in one transaction.

    The runs of a day and all their steps are in these two tables, so no run is
    ever left half there.
    """
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        for table in reversed(TABLES):  # steps first: never a step without its run
            part = sql.Identifier(partition_name(table, day))
            exists = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (partition_name(table, day),)).fetchone()
            if not exists or not exists[0]:
                continue
            conn.execute(sql.SQL("ALTER TABLE {} DETACH PARTITION {}").format(sql.Identifier(table), part))
            conn.execute(sql.SQL("DROP TABLE {}").format(part))


def default_rows(conn: psycopg.Connection[Any]) -> tuple[int, int]:
    """The runs and steps waiting in the default partitions (a day with no partition)."""
    runs = conn.execute("SELECT count(*) FROM agent_runs_default").fetchone()
    steps = conn.execute("SELECT count(*) FROM agent_steps_default").fetchone()
    return (int(runs[0]) if runs else 0), (int(steps[0]) if steps else 0)


def listing(dsn: str) -> tuple[list[date], tuple[int, int]]:
    """The days ``dsn`` has partitions for, and the runs and steps in its default partitions."""
    with connect(dsn) as conn:
        try:
            with conn.transaction():
                return partition_days(conn), default_rows(conn)
        except psycopg.Error as exc:
            raise failure(dsn, "list the partitions", exc) from None

"""Postgres as a trace source: ``load("postgresql://...", run_id)`` and ``runs(...)``.

One run is read inside a ``SERIALIZABLE, READ ONLY, DEFERRABLE`` transaction:
the run row and its steps come from one consistent snapshot, taken at a moment
no concurrent writer can make anomalous, and the read never fails with a
serialization error nor blocks a writer.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import psycopg

from spanreplay import semconv as sc
from spanreplay.errors import RunNotFoundError, TraceFormatError
from spanreplay.model.error_records import decode_error
from spanreplay.model.events import EventLog, RunSummary
from spanreplay.model.input_refs import rebuild_inputs
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import SpanReplayWarning

from . import rows
from .connect import connect, describe, failure

_SUMMARY = """
SELECT r.run_id, r.agent, r.status, r.error_text, r.steps_recorded, r.trace_id, r.span_id,
       r.start_ns, r.end_ns, r.service_name, r.parent
FROM agent_runs AS r
ORDER BY r.start_ns NULLS FIRST, r.run_id
"""


def runs(dsn: str) -> list[RunSummary]:
    """The runs in the database, oldest first, as ``spanreplay runs`` lists them."""
    with connect(dsn) as conn:
        _snapshot(conn)
        try:
            with conn.transaction():
                found = conn.execute(_SUMMARY).fetchall()
        except psycopg.Error as exc:
            raise failure(dsn, "list the runs", exc) from None
    return [_summary(row, dsn) for row in found]


def _summary(row: tuple[Any, ...], dsn: str) -> RunSummary:
    run_id, agent, status, error_text, steps, trace_id, span_id, start_ns, end_ns, service, parent = map(
        rows.from_db_text, row
    )
    error: str | None = None
    if error_text is not None:
        try:
            error = str(decode_error(error_text.encode(), origin=f"{describe(dsn)} run {run_id}"))
        except TraceFormatError as exc:
            error = f"(unreadable error payload: {exc})"
    return RunSummary(
        run_id=run_id,
        agent=agent if span_id is not None else "",
        status=rows.read_status(status, end_ns) if span_id is not None else sc.RUN_STATUS_CRASHED,
        error=error,
        steps=steps,
        trace_id=trace_id or "",
        start_ns=start_ns or 0,
        end_ns=(end_ns or 0) if span_id is not None else 0,
        service_name=service,
        parent=parent,
    )


def load(dsn: str, run_id: str | None = None) -> EventLog:
    """The EventLog of one run, read in one serializable snapshot.

    Raises:
        RunNotFoundError: the run is not in the database (the message lists the latest).
        TraceFormatError: steps of a run that ended are missing.
        PostgresError: the database cannot be reached or has no spanreplay tables.
    """
    where = describe(dsn)
    with connect(dsn) as conn:
        _snapshot(conn)
        try:
            with conn.transaction():
                if run_id is None:
                    found = conn.execute("SELECT run_id FROM agent_runs ORDER BY start_ns, run_id LIMIT 6").fetchall()
                    run_id = _only_run([r[0] for r in found], where)
                # A dated id names its day's partition; any other id is looked up in each.
                db_id = rows.to_db_text(run_id)
                day = rows.id_day(db_id)
                found_runs = conn.execute(
                    f"SELECT {rows.RUN_COLUMNS}, run_day FROM agent_runs WHERE run_id = %s"
                    + (" AND run_day = %s" if day is not None else "")
                    + " ORDER BY run_day",
                    (db_id, day) if day is not None else (db_id,),
                ).fetchall()
                if not found_runs:
                    latest = conn.execute(
                        "SELECT run_id FROM agent_runs ORDER BY start_ns DESC NULLS LAST, run_id DESC LIMIT 5"
                    ).fetchall()
                    listed = ", ".join(r[0] for r in reversed(latest))
                    raise RunNotFoundError(
                        f"Run {run_id} is not in {where}."
                        + (f" The latest runs there: {listed}." if listed else " It holds no runs.")
                        + " spanreplay runs DSN lists them all.",
                        run_id=run_id,
                        available=tuple(r[0] for r in reversed(latest)),
                    )
                # The run's day names the one partition its steps are in (the planner prunes
                # to it); a run written twice under two days (see docs/postgres.md) reads both.
                run_row = found_runs[0][:-1]
                step_rows = conn.execute(
                    f"SELECT {rows.STEP_COLUMNS} FROM agent_steps WHERE run_id = %s AND run_day = ANY(%s) "
                    "ORDER BY step_number",
                    (rows.to_db_text(run_id), [r[-1] for r in found_runs]),
                ).fetchall()
        except psycopg.Error as exc:
            raise failure(dsn, f"read run {run_id}", exc) from None
    origin = f"{where} run {run_id}"
    info = rows.run_from_row(run_row, origin)
    events = tuple(rebuild_inputs([rows.event_from_row(row, f"{origin} seq {row[1]}") for row in step_rows]))
    _check_gaps(info.run_id, info.status, info.steps, [e.seq for e in events], where)
    return EventLog(info, events)


def _snapshot(conn: psycopg.Connection[Any]) -> None:
    conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
    conn.read_only = True
    conn.deferrable = True


def _only_run(found: list[str], where: str) -> str:
    if len(found) == 1:
        return found[0]
    if not found:
        raise RunNotFoundError(
            f"{where} holds no spanreplay runs; record with spanreplay.configure(postgres=...) or import "
            "trace files with `spanreplay export traces/ DSN`.",
            run_id=None,
        )
    raise RunNotFoundError(
        f"{where} holds more than one run; name one. spanreplay runs DSN lists them.",
        run_id=None,
        available=tuple(found),
    )


def _check_gaps(run_id: str, status: str, steps: int | None, seqs: list[int], where: str) -> None:
    present = set(seqs)
    last = steps if steps is not None else max(present, default=0)
    missing = [seq for seq in range(1, last + 1) if seq not in present]
    if not missing:
        return
    shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
    if status == sc.RUN_STATUS_CRASHED:
        warnings.warn(
            f"Run {run_id} crashed; the steps at seq {shown} were still running and left no row in {where}.",
            SpanReplayWarning,
            stacklevel=4,
        )
        return
    raise TraceFormatError(
        f"Run {run_id} in {where} is missing the steps at seq {shown} of {last}: the database was "
        "unreachable while they were recorded. The trace files hold them: import them with "
        f"`spanreplay export traces/ {where}` (existing rows are kept), then load again.",
        source=where,
    )


class PostgresSource:
    """A database the Postgres exporter wrote to: runs and steps are rows, read in one snapshot."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.name = describe(dsn)

    def runs(self, tap: Callable[[SpanRecord], object] | None = None) -> list[RunSummary]:
        # Rows, not spans: nothing for ``tap`` to see (cost reads the same tables itself).
        return runs(self.dsn)

    def load(self, run_id: str | None = None) -> EventLog:
        return load(self.dsn, run_id)

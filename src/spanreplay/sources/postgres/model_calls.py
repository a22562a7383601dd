"""The model-call steps in ``agent_steps`` and the runs in ``agent_runs``, read in one snapshot.

What cost attribution reads of a Postgres source: the rows as they are, which
``spanreplay.cost`` turns into its runs and calls.
"""

from __future__ import annotations

from typing import Any, Final

import psycopg

from spanreplay import semconv as sc

from .connect import connect, failure

RUNS_SQL: Final = "SELECT run_id, agent, status, start_ns, end_ns, span_id, trace_id FROM agent_runs"
# The digest is taken in the database, so the payloads stay there; it is the sha256
# the span carried (spanreplay.input.sha256), of the same bytes.
STEPS_SQL: Final = (
    "SELECT run_id, step_number, key, start_ns, error_text IS NOT NULL, "
    "encode(sha256(convert_to(input_text, 'UTF8')), 'hex'), attributes::text, trace_id, span_id "
    "FROM agent_steps WHERE step_type = %s ORDER BY start_ns, run_id, step_number"
)


def model_call_rows(dsn: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The ``RUNS_SQL`` rows and the model steps' ``STEPS_SQL`` rows, from one read-only snapshot."""
    with connect(dsn) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        try:
            with conn.transaction():
                run_rows = conn.execute(RUNS_SQL).fetchall()
                step_rows = conn.execute(STEPS_SQL, (sc.KIND_MODEL,)).fetchall()
        except psycopg.Error as exc:
            raise failure(dsn, "read the model calls", exc) from None
    return run_rows, step_rows

"""Many ``agent_steps`` rows in one statement: the rows' parameters as arrays, ``unnest``-ed.

One ``INSERT`` per row (``executemany``) fires the statement-level totals triggers
once per row; one ``INSERT ... SELECT FROM unnest(...)`` per batch fires them
once. The statement does what ``span_rows.INSERT_STEP`` / ``INSERT_STEP_LOOKUP``
do, row after row in the batch's order:

- a run's placeholder row comes from its first row in the batch, as the first
  of the single inserts would have made it;
- a run whose id carries no date gets one day for all its rows: the day of its
  row already in the table, else the day its first row in the batch started
  (the single inserts found the placeholder the first one made);
- ``ON CONFLICT (run_id, step_number, run_day)`` leaves a written step as it is
  and fills in a side effect's intent with its outcome. One statement cannot
  touch a row twice, so a step that occurs again in the batch (an intent then
  its outcome, a retried copy) goes in a later statement: ``rounds``.

The values travel as bound array parameters, never as SQL text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import psycopg

from .span_rows import RUN_PLACEHOLDER, STEP_COLUMNS, STEP_CONFLICT

# (parameter, array type) in unnest's order. Numbers are either ints or floats (token
# counts and cost as the instrumentation set them), and psycopg will not put both in one
# array: each goes in two arrays, one per Python type, cast to the column as a single
# insert's parameter would be.
_TEXT: Final = (
    "run_id",
    "step_type",
    "key",
    "call_id",
    "input",
    "output",
    "error",
    "input_text",
    "output_text",
    "error_text",
    "trace_id",
    "span_id",
    "attributes",
    "service_name",
)
_INTS: Final = ("step_number", "start_ns", "end_ns", "schema_version")
_NUMBERS: Final = ("tokens_in", "tokens_out", "cost")
_OTHER: Final = (("created_at", "timestamptz"), ("started_at", "timestamptz"), ("run_day", "date"), ("dated", "bool"))

_COLUMNS: Final = (
    *((name, "text") for name in _TEXT),
    *((name, "int8") for name in _INTS),
    *((f"{name}_int", "numeric") for name in _NUMBERS),
    *((f"{name}_float", "float8") for name in _NUMBERS),
    *_OTHER,
)


def _unnest() -> str:
    arrays = ", ".join(f"%({name})b::{kind}[]" for name, kind in _COLUMNS)
    names = ", ".join(name for name, _ in _COLUMNS)
    return f"unnest({arrays}) WITH ORDINALITY AS u({names}, ord)"


INSERT_STEPS: Final = f"""
WITH u AS (
    SELECT * FROM {_unnest()}
),
first_rows AS (
    SELECT DISTINCT ON (run_id) * FROM u ORDER BY run_id, ord
),
run_days AS (
    SELECT f.*,
           CASE WHEN f.dated THEN f.run_day ELSE coalesce(
               spanreplay_id_day(f.run_id),
               (SELECT a.run_day FROM agent_runs AS a WHERE a.run_id = f.run_id ORDER BY a.run_day LIMIT 1),
               f.run_day
           ) END AS day_of_run
    FROM first_rows AS f
),
run AS (
    {RUN_PLACEHOLDER}
    SELECT run_id, day_of_run, 'running', trace_id, service_name, start_ns, started_at, schema_version
    FROM run_days
    ORDER BY run_id
    ON CONFLICT (run_id, run_day) DO NOTHING
)
INSERT INTO agent_steps ({STEP_COLUMNS})
SELECT
    u.run_id, d.day_of_run, u.step_number, u.step_type, u.key, u.call_id,
    u.input::jsonb, u.output::jsonb, u.error::jsonb, u.input_text, u.output_text, u.error_text,
    coalesce(u.tokens_in_int::bigint, u.tokens_in_float::bigint),
    coalesce(u.tokens_out_int::bigint, u.tokens_out_float::bigint),
    coalesce(u.cost_int::float8, u.cost_float), u.trace_id, u.span_id, u.start_ns, u.end_ns, u.created_at,
    u.attributes::json, u.schema_version
FROM u JOIN run_days AS d ON d.run_id = u.run_id
ORDER BY u.ord
{STEP_CONFLICT}"""


def rounds(rows: Iterable[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """``rows`` in statements that each touch a step once: the first occurrence of every
    step, then the second, and so on, each in the batch's order."""
    out: list[list[Mapping[str, Any]]] = []
    seen: dict[tuple[Any, Any], int] = {}
    for row in rows:
        key = (row["run_id"], row["step_number"])
        n = seen.get(key, 0)
        seen[key] = n + 1
        if n == len(out):
            out.append([])
        out[n].append(row)
    return out


def batch_params(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """The ``INSERT_STEPS`` parameters of ``step_params`` rows: one array per column."""
    params: dict[str, list[Any]] = {name: [row[name] for row in rows] for name in (*_TEXT, *_INTS)}
    for name in _NUMBERS:
        values = [row[name] for row in rows]
        params[f"{name}_int"] = [None if isinstance(v, float) else v for v in values]
        params[f"{name}_float"] = [v if isinstance(v, float) else None for v in values]
    for name, _ in _OTHER:
        params[name] = [row[name] for row in rows]
    return params


def write_steps(
    cur: psycopg.Cursor[Any], rows: Sequence[Mapping[str, Any]], *, row_timeout: float | None = None
) -> int:
    """Write ``step_params`` rows with one statement per round; the rows inserted or filled in.

    ``row_timeout`` (seconds), in a transaction whose session's statement timeout it is:
    each statement may take that long per row it writes, the bound one insert per row
    had, so a slow server still takes a batch as it took its rows one by one. The
    statements after these get the session's bound again.
    """
    written = 0
    stretched = False
    for group in rounds(rows):
        if row_timeout is not None and len(group) > 1:
            _statement_timeout(cur, row_timeout * len(group))
            stretched = True
        cur.execute(INSERT_STEPS, batch_params(group))
        written += max(cur.rowcount, 0)
    if stretched and row_timeout is not None:
        _statement_timeout(cur, row_timeout)
    return written


def _statement_timeout(cur: psycopg.Cursor[Any], seconds: float) -> None:
    """The statement timeout until the transaction ends (the session keeps its own)."""
    cur.execute("SELECT set_config('statement_timeout', %s, true)", (str(max(1, int(seconds * 1000))),))

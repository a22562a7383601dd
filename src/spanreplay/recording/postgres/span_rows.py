"""Spans -> ``agent_steps`` / ``agent_runs`` rows: the SQL that writes them and its parameters.

Spans are decoded by the span codec, the same as from a trace file: payload
digests are verified and masking applied upstream carries over untouched. The
rows keep each payload twice: as JSONB for queries, and as the recorded text,
which is what replay reads back (``spanreplay.sources.postgres.rows``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay.model.codec import span_to_event, span_to_run
from spanreplay.model.payloads import read_payload
from spanreplay.model.spans import SpanRecord
from spanreplay.model.text_escapes import readable_values
from spanreplay.sources.postgres.rows import id_day, to_db_text

# JSONB rejects the escape of U+0000; such a payload keeps its text but no JSONB copy.
_NUL_ESCAPE: Final = b"\\u0000"

_STEP_TEXT: Final = ("run_id", "step_type", "key", "call_id", "trace_id", "span_id", "service_name")
_RUN_TEXT: Final = (
    "run_id",
    "agent",
    "status",
    "trace_id",
    "span_id",
    "service_name",
    "forked_from",
    "masking",
    "parent",
)

# The run's day (its partition, see spanreplay.sources.postgres.partitioned_tables): the
# date a default run id carries, else the day of the run's row already there, else the
# day this span started. Every row of a run gets the same day, so a run stays whole.
# A dated id's day is known here (rows.id_day, the same as the SQL function): its
# statements name the day, so they are planned against one partition, not all of them.
_RUN_DAY_GIVEN: Final = "day AS (SELECT %(run_day)s::date AS run_day)"
_RUN_DAY_LOOKUP: Final = """
day AS (
    SELECT coalesce(
        spanreplay_id_day(%(run_id)s),
        (SELECT run_day FROM agent_runs WHERE run_id = %(run_id)s ORDER BY run_day LIMIT 1),
        %(run_day)s::date
    ) AS run_day
)"""

# What both inserts (one row, a batch: step_batches.py) write: a run's placeholder row and the step's columns.
RUN_PLACEHOLDER: Final = (
    "INSERT INTO agent_runs (run_id, run_day, status, trace_id, service_name, start_ns, started_at, schema_version)"
)
# A step row is final once its span ended: a retried insert of it does nothing. The one
# row that changes is a side effect's intent (end_ns 0, no outcome), which its ended
# span fills in.
STEP_CONFLICT: Final = """\
ON CONFLICT (run_id, step_number, run_day) DO UPDATE SET
    output = EXCLUDED.output, error = EXCLUDED.error, output_text = EXCLUDED.output_text,
    error_text = EXCLUDED.error_text, tokens_in = EXCLUDED.tokens_in, tokens_out = EXCLUDED.tokens_out,
    cost = EXCLUDED.cost, end_ns = EXCLUDED.end_ns, created_at = EXCLUDED.created_at,
    attributes = EXCLUDED.attributes
WHERE agent_steps.end_ns = 0 AND EXCLUDED.end_ns <> 0
"""
STEP_COLUMNS: Final = """
    run_id, run_day, step_number, step_type, key, call_id,
    input, output, error, input_text, output_text, error_text,
    tokens_in, tokens_out, cost, trace_id, span_id, start_ns, end_ns, created_at,
    attributes, schema_version
"""

_INSERT_STEP: Final = """
WITH {day}, run AS (
    {run_placeholder}
    SELECT %(run_id)s, day.run_day, 'running', %(trace_id)s, %(service_name)s, %(start_ns)s, %(started_at)s,
           %(schema_version)s
    FROM day
    ON CONFLICT (run_id, run_day) DO NOTHING
)
INSERT INTO agent_steps ({columns})
SELECT
    %(run_id)s, day.run_day, %(step_number)s, %(step_type)s, %(key)s, %(call_id)s,
    %(input)s::jsonb, %(output)s::jsonb, %(error)s::jsonb, %(input_text)s, %(output_text)s, %(error_text)s,
    %(tokens_in)s, %(tokens_out)s, %(cost)s, %(trace_id)s, %(span_id)s, %(start_ns)s, %(end_ns)s, %(created_at)s,
    %(attributes)s::json, %(schema_version)s
FROM day
{conflict}"""

INSERT_STEP: Final = _INSERT_STEP.format(
    day=_RUN_DAY_GIVEN, run_placeholder=RUN_PLACEHOLDER, columns=STEP_COLUMNS, conflict=STEP_CONFLICT
)
INSERT_STEP_LOOKUP: Final = _INSERT_STEP.format(
    day=_RUN_DAY_LOOKUP, run_placeholder=RUN_PLACEHOLDER, columns=STEP_COLUMNS, conflict=STEP_CONFLICT
)

# A step row is final once its span ended (STEP_CONFLICT above), whichever copy arrives
# again later. A run row is written when the run starts (status running) and again when it ends.
# A copy never replaces one that knows more: the ended run span wins over the
# started one, either wins over the placeholder a step inserted, and an ended
# row is final. So copies may arrive in any order, any number of times.
# The run's steps go with it, in the same statement. A dated run id names its day, which
# the planner then prunes to: the delete touches that day's partitions only.
DELETE_RUN: Final = """
WITH steps AS (
    DELETE FROM agent_steps
    WHERE run_id = %(run_id)s
      AND (run_day = spanreplay_id_day(%(run_id)s) OR spanreplay_id_day(%(run_id)s) IS NULL)
)
DELETE FROM agent_runs
WHERE run_id = %(run_id)s AND (run_day = spanreplay_id_day(%(run_id)s) OR spanreplay_id_day(%(run_id)s) IS NULL)
"""

_UPSERT_RUN: Final = """
WITH {day}
INSERT INTO agent_runs AS r (
    run_id, run_day, agent, status, error, error_text, trace_id, span_id, service_name, forked_from, masking,
    parent, started_at, ended_at, start_ns, end_ns, steps_started, schema_version
)
SELECT
    %(run_id)s, day.run_day, %(agent)s, %(status)s, %(error)s::jsonb, %(error_text)s, %(trace_id)s, %(span_id)s,
    %(service_name)s, %(forked_from)s, %(masking)s, %(parent)s, %(started_at)s, %(ended_at)s, %(start_ns)s,
    %(end_ns)s, %(steps_started)s, %(schema_version)s
FROM day
ON CONFLICT (run_id, run_day) DO UPDATE SET
    agent = EXCLUDED.agent, status = EXCLUDED.status, error = EXCLUDED.error,
    error_text = EXCLUDED.error_text, trace_id = EXCLUDED.trace_id, span_id = EXCLUDED.span_id,
    service_name = EXCLUDED.service_name, forked_from = EXCLUDED.forked_from, masking = EXCLUDED.masking,
    parent = EXCLUDED.parent, started_at = EXCLUDED.started_at, ended_at = EXCLUDED.ended_at,
    start_ns = EXCLUDED.start_ns, end_ns = EXCLUDED.end_ns, steps_started = EXCLUDED.steps_started,
    schema_version = EXCLUDED.schema_version
WHERE r.span_id IS NULL OR (r.end_ns IS NULL AND EXCLUDED.end_ns IS NOT NULL)
"""

UPSERT_RUN: Final = _UPSERT_RUN.format(day=_RUN_DAY_GIVEN)
UPSERT_RUN_LOOKUP: Final = _UPSERT_RUN.format(day=_RUN_DAY_LOOKUP)


def step_statement(params: Mapping[str, Any]) -> str:
    """The statement that writes these ``step_params``: the lookup of the run's day only
    for a run id that does not carry it."""
    return INSERT_STEP if params["dated"] else INSERT_STEP_LOOKUP


def run_statement(params: Mapping[str, Any]) -> str:
    """The statement that writes these ``run_params`` (see ``step_statement``)."""
    return UPSERT_RUN if params["dated"] else UPSERT_RUN_LOOKUP


def by_statement(
    choose: Callable[[Mapping[str, Any]], str], rows: Iterable[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    """``rows`` grouped by the statement ``choose`` picks for each, in their order."""
    grouped: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(choose(row), []).append(row)
    return grouped


def _escaped(params: dict[str, Any], columns: tuple[str, ...]) -> dict[str, Any]:
    for column in columns:
        params[column] = to_db_text(params[column])
    # After the escapes: the day is read from the id as the table holds it, as the SQL does.
    dated = id_day(params["run_id"])
    params["dated"] = dated is not None
    if dated is not None:
        params["run_day"] = dated
    return params


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode()


def _jsonb(data: bytes | None, text: str | None) -> str | None:
    """The JSONB copy of a payload: its ``text`` itself (one string for both columns, so a
    row the writer holds keeps each payload once), or None if JSONB cannot hold it."""
    return None if data is None or _NUL_ESCAPE in data else text


def _json_text(attributes: dict[str, Any]) -> str:
    try:
        return orjson.dumps(attributes, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # text UTF-8 cannot hold that another library set: readable, as in the trace file
        return orjson.dumps(readable_values(attributes), option=orjson.OPT_NON_STR_KEYS).decode()


def _time(ns: int) -> datetime | None:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC) if ns else None


def _number(attributes: Mapping[str, Any], *names: str) -> Any:
    for name in names:
        value = attributes.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    return None


def step_params(span: SpanRecord) -> dict[str, Any]:
    """The ``INSERT_STEP`` parameters for one boundary span (payloads verified by the codec)."""
    event = span_to_event(span)
    error_json = None
    if event.error is not None:
        where = span.origin or f"span {span.span_id}"
        error_json = read_payload(span.attributes, sc.ERROR, run_id=event.run_id, seq=event.seq, origin=where)
    attributes = dict(event.attributes)
    if event.output_types is not None:
        # The output's type tags ride in the attributes column: the row keeps what replay needs.
        attributes[sc.OUTPUT_TYPES] = event.output_types.decode()
    if event.effect:
        attributes[sc.EFFECT] = True
    input_text, output_text, error_text = event.input_json.decode(), _text(event.output_json), _text(error_json)
    params = {
        "run_id": event.run_id,
        "step_number": event.seq,
        "step_type": event.kind,
        "key": event.key,
        "call_id": event.call_id,
        "input": _jsonb(event.input_json, input_text),
        "output": _jsonb(event.output_json, output_text),
        "error": _jsonb(error_json, error_text),
        "input_text": input_text,
        "output_text": output_text,
        "error_text": error_text,
        "tokens_in": _number(attributes, sc.GEN_AI_USAGE_INPUT_TOKENS),
        "tokens_out": _number(attributes, sc.GEN_AI_USAGE_OUTPUT_TOKENS),
        "cost": _number(attributes, sc.GEN_AI_USAGE_COST),
        "trace_id": event.trace_id,
        "span_id": event.span_id,
        "start_ns": event.start_ns,
        "end_ns": event.end_ns,
        "created_at": (created_at := _time(event.end_ns) or datetime.now(UTC)),
        # The run's day when nothing else says it (see _RUN_DAY_LOOKUP): the day the step started.
        "run_day": (_time(event.start_ns) or created_at).date(),
        "attributes": _json_text(attributes),
        "schema_version": event.schema_version,
        # For the placeholder run row, when the step arrives before its run span.
        "service_name": str(span.resource.get(sc.SERVICE_NAME, "")),
        "started_at": _time(event.start_ns),
    }
    return _escaped(params, _STEP_TEXT)


def run_params(span: SpanRecord) -> dict[str, Any]:
    """The ``UPSERT_RUN`` parameters for a run span, started (running) or ended."""
    info = span_to_run(span)
    error_json = None
    if info.error is not None:
        where = span.origin or f"span {span.span_id}"
        error_json = read_payload(span.attributes, sc.RUN_ERROR, run_id=info.run_id, seq=0, origin=where)
    # The codec reads an unended run span as crashed; in the table it is running
    # until its end arrives, and readers turn a running run into crashed.
    status = info.status if span.ended else sc.RUN_STATUS_RUNNING
    version = span.attributes.get(sc.SCHEMA, sc.SCHEMA_VERSION)
    error_text = _text(error_json)
    params = {
        "run_id": info.run_id,
        "agent": info.agent,
        "status": status,
        "error": _jsonb(error_json, error_text),
        "error_text": error_text,
        "trace_id": info.trace_id,
        "span_id": info.span_id,
        "service_name": info.service_name,
        "forked_from": info.forked_from,
        "masking": info.masking,
        "parent": info.parent,
        "run_day": (_time(info.start_ns) or datetime.now(UTC)).date(),
        "started_at": _time(info.start_ns),
        "ended_at": _time(info.end_ns) if span.ended else None,
        "start_ns": info.start_ns,
        "end_ns": info.end_ns if span.ended else None,
        "steps_started": info.steps,
        "schema_version": int(version) if isinstance(version, int) else sc.SCHEMA_VERSION,
    }
    return _escaped(params, _RUN_TEXT)

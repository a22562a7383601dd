"""``agent_steps`` / ``agent_runs`` rows -> Events and RunInfo, and the text columns' escapes.

The rows keep each payload twice: as JSONB for queries, and as the recorded text,
which is what replay reads back, so the EventLog read from Postgres equals the
one read from the trace file of the same run. The writer (spans -> rows) is
``spanreplay.recording.postgres.span_rows``; the escapes of text columns are
here, on the reading side, which both sides import.
"""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay.model.error_records import decode_error
from spanreplay.model.events import Event, RunInfo
from spanreplay.model.text_escapes import utf8_ok

# Postgres text cannot hold U+0000. The payload columns hold JSON, where it is
# already the escape \u0000; the plain text columns (agent, key, ...) get the
# same escape, and the readers turn it back, so a name with a NUL round-trips
# instead of making its row fail forever.
_NUL: Final = "\x00"
_NUL_TEXT: Final = "\\u0000"
# Nor can it hold a lone surrogate (a key that is a file name from os.listdir()). Such
# text is written as this mark, a Unicode noncharacter (reserved for a program's own
# use, so no text an agent gives starts with it), then the text as ASCII JSON, which
# says every code point; the readers give back the identical str.
_MARK: Final = "\ufdd0"

_DATED_ID: Final = re.compile(r"^run_([0-9]{4})([0-9]{2})([0-9]{2})_([0-9]{2})([0-9]{2})([0-9]{2})_")

STEP_COLUMNS: Final = (
    "run_id, step_number, step_type, key, call_id, input_text, output_text, error_text, "
    "schema_version, trace_id, span_id, start_ns, end_ns, attributes::text"
)
RUN_COLUMNS: Final = (
    "run_id, agent, status, error_text, trace_id, span_id, start_ns, end_ns, service_name, steps_started, forked_from, "
    "masking, parent"
)


def to_db_text(value: Any) -> Any:
    """``value`` as a text column can hold it: U+0000 written as ``\\u0000``, text with a
    lone surrogate as ``_MARK`` and its JSON."""
    if not isinstance(value, str):
        return value
    if not utf8_ok(value) or value.startswith(_MARK):
        return _MARK + json.dumps(value)
    return value.replace(_NUL, _NUL_TEXT) if _NUL in value else value


def from_db_text(value: Any) -> Any:
    """A text column's value as it was recorded (the inverse of ``to_db_text``)."""
    if not isinstance(value, str):
        return value
    if value.startswith(_MARK):
        try:
            text = json.loads(value[len(_MARK) :])
        except ValueError:
            return value  # not written by to_db_text: kept as it is, so it matches nothing recorded
        return text if isinstance(text, str) else value
    return value.replace(_NUL_TEXT, _NUL) if _NUL_TEXT in value else value


def id_day(db_run_id: str) -> date | None:
    """The UTC day a default run id carries (``run_YYYYMMDD_HHMMSS_...``), given as the
    table holds it (``to_db_text``); None for any other id or a date that does not exist.

    The same answer as the schema's ``spanreplay_id_day``: rows of such a run are in
    that day's partition, so a writer or reader that knows it names the partition.
    """
    match = _DATED_ID.match(db_run_id)
    if not match:
        return None
    year, month, day, hour, minute, second = map(int, match.groups())
    if year < 1 or hour > 23 or minute > 59 or second > 61:
        return None
    try:
        return date(year, month, day)
    except ValueError:
        return None


def read_status(status: str, end_ns: int | None) -> str:
    """A run that never ended reads as crashed, exactly as from a trace file."""
    if end_ns is None or status == sc.RUN_STATUS_RUNNING:
        return sc.RUN_STATUS_CRASHED
    return status


def event_from_row(row: tuple[Any, ...], origin: str) -> Event:
    """An Event from the ``STEP_COLUMNS`` of one ``agent_steps`` row."""
    (run_id, seq, kind, key, call_id, input_text, output_text, error_text, version, trace_id, span_id,
     start_ns, end_ns, attributes) = row  # fmt: skip
    run_id, kind, key, call_id = map(from_db_text, (run_id, kind, key, call_id))
    extra = orjson.loads(attributes)
    output_types = extra.pop(sc.OUTPUT_TYPES, None)
    effect = extra.pop(sc.EFFECT, None) is True
    return Event(
        run_id=run_id,
        seq=seq,
        call_id=call_id,
        kind=kind,
        key=key,
        input_json=input_text.encode(),
        output_json=None if output_text is None else output_text.encode(),
        error=None if error_text is None else decode_error(error_text.encode(), origin=origin),
        schema_version=version,
        trace_id=trace_id,
        span_id=span_id,
        start_ns=start_ns,
        end_ns=end_ns,
        attributes=extra,
        output_types=output_types.encode() if isinstance(output_types, str) else None,
        effect=effect,
    )


def run_from_row(row: tuple[Any, ...], origin: str) -> RunInfo:
    """A RunInfo from the ``RUN_COLUMNS`` of one ``agent_runs`` row."""
    (run_id, agent, status, error_text, trace_id, span_id, start_ns, end_ns, service, steps, forked, masking,
     parent) = map(from_db_text, row)  # fmt: skip
    if span_id is None:
        # Only steps arrived, never the run span: what a trace file without its root gives.
        return RunInfo(run_id=run_id, status=sc.RUN_STATUS_CRASHED)
    return RunInfo(
        run_id=run_id,
        agent=agent,
        status=read_status(status, end_ns),
        error=None if error_text is None else decode_error(error_text.encode(), origin=origin),
        trace_id=trace_id or "",
        span_id=span_id,
        start_ns=start_ns or 0,
        end_ns=end_ns or 0,
        service_name=service,
        steps=steps,
        forked_from=forked,
        masking=masking,
        parent=parent,
    )

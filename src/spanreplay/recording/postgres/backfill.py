"""Importing trace sources (files, Collector exports, Jaeger and Tempo JSON) into Postgres.

Every span goes through the same codec and the same rows as the live exporter,
and every write is idempotent: a step already in the table is left alone (its
unique (run_id, step_number) key), a run row only ever gains what it lacked.
Exporting the same source twice, or a source that overlaps rows the live
exporter already wrote, adds nothing twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

import psycopg

from spanreplay import semconv as sc
from spanreplay.model import codec as _codec
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import iter_spans
from spanreplay.sources.postgres.connect import connect, failure
from spanreplay.sources.runlog import RUN_MARKER

from . import span_rows
from .step_batches import write_steps

# Each statement's bound, per row it writes (step rows go in one statement per batch).
_TIMEOUT: Final = 10.0


@dataclass(frozen=True)
class ExportResult:
    """What one export did.

    Attributes:
        runs: the run ids found in the source.
        steps_seen: boundary spans read (a span the source holds twice counts twice).
        steps_added: step rows inserted; the rest were already in the table.
    """

    runs: tuple[str, ...]
    steps_seen: int
    steps_added: int

    @property
    def steps_present(self) -> int:
        return self.steps_seen - self.steps_added


def export(
    source: str | os.PathLike[str],
    dsn: str,
    *,
    batch_size: int = 500,
    progress: Callable[[int], None] | None = None,
) -> ExportResult:
    """Import every spanreplay run of ``source`` into the database at ``dsn``.

    Rows are committed every ``batch_size`` spans; an export that stops half way
    is completed by running it again.

    Raises:
        TraceFormatError: the source cannot be read (PayloadIntegrityError for a cut payload).
        PostgresError: the database cannot be reached or has no spanreplay tables.
    """
    return _export(iter_spans(source, contains=RUN_MARKER), dsn, batch_size=batch_size, progress=progress)


def _export(
    spans: Iterable[SpanRecord], dsn: str, *, batch_size: int, progress: Callable[[int], None] | None
) -> ExportResult:
    seen = 0
    run_ids: dict[str, None] = {}
    runs: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    intents: dict[tuple[str, str], dict[str, Any]] = {}
    added = 0
    with connect(dsn, timeout=_TIMEOUT) as conn:

        def flush() -> None:
            nonlocal added
            if not runs and not steps:
                return
            added += _write_batch(conn, dsn, runs, steps)
            if progress is not None:
                progress(len(steps))
            runs.clear()
            steps.clear()

        for span in spans:
            run_id = span.attributes.get(sc.RUN_ID)
            if not isinstance(run_id, str):
                continue
            if _codec.is_boundary_span(span):
                if not span.ended:
                    # A side effect's intent: its ended copy usually follows and is the step.
                    # Intents that never ended (the process died in the work) go in at the end.
                    intents[span.key] = span_rows.step_params(span)
                    run_ids.setdefault(run_id)
                    continue
                intents.pop(span.key, None)
                # A span the source holds twice (an exporter retry) hits the unique key and is skipped.
                seen += 1
                steps.append(span_rows.step_params(span))
            elif _codec.is_run_span(span):
                # Both copies of a run span (started, ended) go in: the upsert keeps the ended one.
                runs.append(span_rows.run_params(span))
            else:
                continue
            run_ids.setdefault(run_id)
            if len(steps) + len(runs) >= batch_size:
                flush()
        seen += len(intents)
        steps.extend(intents.values())
        flush()
    return ExportResult(runs=tuple(run_ids), steps_seen=seen, steps_added=added)


def _write_batch(
    conn: psycopg.Connection[Any], dsn: str, runs: list[dict[str, Any]], steps: list[dict[str, Any]]
) -> int:
    """Write one batch of run and step rows in one transaction; the number of steps that were new."""
    try:
        with conn.transaction(), conn.cursor() as cur:
            for statement, rows in span_rows.by_statement(span_rows.run_statement, runs).items():
                cur.executemany(statement, rows)
            return write_steps(cur, steps, row_timeout=_TIMEOUT)
    except psycopg.Error as exc:
        raise failure(dsn, "import the runs", exc) from None

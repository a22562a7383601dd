"""What the Postgres writer queues and counts: a row's write, the processor's stats,
which errors are about one row rather than the connection, and the pool's noise."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import psycopg
import psycopg_pool
from opentelemetry.sdk.trace import ReadableSpan

from .span_rows import DELETE_RUN, by_statement, run_statement, step_statement
from .step_batches import write_steps

POOL_NAME: Final = "spanreplay-exporter"
STEP: Final = "step"
RUN: Final = "run"
# The keep policy dropped a run: its rows go, after every row of it queued before.
DELETE: Final = "delete"
# The statement each kind of row is written with, chosen by its parameters.
STATEMENTS: Final[dict[str, Callable[[Mapping[str, Any]], str]]] = {
    RUN: run_statement,
    STEP: step_statement,
    DELETE: lambda _: DELETE_RUN,
}

# Errors about one row, not the connection: the server answered and will give the
# same answer for this row every time, so retrying it would only hold up the rest.
# UnicodeEncodeError: a lone surrogate in a string, refused before it is sent.
REFUSALS: Final = (psycopg.DataError, psycopg.IntegrityError, UnicodeEncodeError)


@dataclass
class PostgresExportStats:
    """What the processor did so far. Read it to alert on a database that falls behind.

    Attributes:
        steps_written: step rows committed (a step already in the table is left as it was).
        runs_written: run row writes committed (a run is written when it starts and ends).
        failures: write attempts that failed (each is retried unless dropped).
        dropped: rows given up on: the queue was full, or they were still queued at
            shutdown. The trace files hold them; ``spanreplay export`` fills them in.
        invalid: spans that could not be turned into rows (a payload cut on the way).
        refused: rows the server refused (a value or constraint it rejects); each is
            set aside, logged with the reason, and not retried.
        runs_removed: runs deleted with their steps because the keep policy dropped them.
        late: boundaries that returned after waiting ``postgres_wait`` for their
            row (per step) or for the writer to catch up (batched); the row stayed
            queued and was written when the server answered.
        held: batched boundaries that waited for the writer to catch up, because
            more than ``high_water`` rows (two batches) were not committed yet.
    """

    steps_written: int = 0
    runs_written: int = 0
    failures: int = 0
    dropped: int = 0
    invalid: int = 0
    refused: int = 0
    late: int = 0
    runs_removed: int = 0
    held: int = 0


@dataclass(slots=True)
class Write:
    kind: str
    params: dict[str, Any] | None = None
    # An ended span whose row the writer thread builds (batched mode): the agent's
    # thread then pays for neither the codec nor the digests.
    span: ReadableSpan | None = None
    # Committed or set aside: what a boundary waiting for its row waits for.
    settled: bool = False


class QuietPoolFilter(logging.Filter):
    """Drops psycopg_pool's per-attempt reconnection warnings about this exporter's pools.

    The processor logs the first failure of an outage itself, with the fix, and
    counts the rest; the pool would otherwise add a warning for every attempt.
    Records about the application's own pools pass untouched.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.levelno <= logging.WARNING and POOL_NAME in args)


def commit(pool: psycopg_pool.ConnectionPool[Any], timeout: float, writes: list[Write]) -> Exception | None:
    """Commit ``writes`` in one transaction; the failure, or None when committed."""
    try:
        with pool.connection(timeout=timeout) as conn:
            if len(writes) == 1 and writes[0].params is not None:
                conn.execute(STATEMENTS[writes[0].kind](writes[0].params), writes[0].params)
            else:
                with conn.transaction(), conn.cursor() as cur:
                    for kind in (RUN, STEP, DELETE):  # a run's delete after its rows in the batch
                        params = [w.params for w in writes if w.kind == kind and w.params is not None]
                        if kind == STEP:
                            # One statement for the batch: the totals triggers fire once, not per row.
                            write_steps(cur, params, row_timeout=timeout)
                            continue
                        for statement, rows in by_statement(STATEMENTS[kind], params).items():
                            cur.executemany(statement, rows)
    except Exception as exc:  # any failure: the database is down, slow or refuses
        return exc
    return None

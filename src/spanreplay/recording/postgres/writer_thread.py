"""The writer thread of the Postgres span processor: the queue of rows and how they are committed.

Only this thread talks to the database: a server that is frozen, slow or
unreachable can block it, never the agent. The first failure of an outage is
logged once; later ones are only counted. Rows that failed wait in a bounded
queue that the writer retries with backoff. A row the server refuses (a value
it cannot hold, a constraint) is set aside, logged with the reason, and never
retried: it must not hold up the rows behind it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import psycopg
from psycopg_pool import ConnectionPool

from spanreplay.model.spans import SpanRecord, from_sdk_span
from spanreplay.sources.postgres import partitions
from spanreplay.sources.postgres.connect import connect_kwargs, describe, failure, first_line, session_settings
from spanreplay.sources.postgres.schema import AHEAD_DAYS

from ..exporters._foreign import guarded
from . import notices, span_rows
from .writes import DELETE, POOL_NAME, REFUSALS, RUN, STEP, PostgresExportStats, Write, commit

logger = logging.getLogger("spanreplay")

_FIRST_BACKOFF: Final = 0.5
_MAX_BACKOFF: Final = 30.0
# The writer makes the coming days' partitions after its first commit, then this often
# (seconds); when it could not (the lock was taken, an older schema), it tries again sooner.
_PARTITIONS_EVERY: Final = 12 * 3600.0
_PARTITIONS_RETRY: Final = 600.0


@dataclass(frozen=True, slots=True)
class WriterSettings:
    """How the writer thread commits rows: the options of ``PostgresSpanProcessor``, checked."""

    batch: bool
    batch_size: int
    flush_interval: float
    timeout: float
    max_pending: int
    pool_size: int
    postgres_wait: float
    postgres_commit: str


class RowWriter:
    """The rows queued for Postgres and the one background thread that commits them.

    The settings are those of ``PostgresSpanProcessor``, which adds the span
    processor's side: what becomes a row, and how long a boundary waits for it.
    """

    def __init__(self, dsn: str, settings: WriterSettings) -> None:
        self.dsn = dsn
        self.postgres_commit = settings.postgres_commit
        self.batch = settings.batch
        self.batch_size = settings.batch_size
        self.flush_interval = settings.flush_interval
        self.timeout = settings.timeout
        self.max_pending = settings.max_pending
        self.pool_size = settings.pool_size
        self.postgres_wait = settings.postgres_wait
        # Batched: past this many rows not yet committed, boundaries wait for the writer.
        # Two batches: the writer commits one while the next fills.
        self.high_water = max(1, min(2 * self.batch_size, self.max_pending // 2))
        self.stats = PostgresExportStats()
        # The days ahead the writer makes partitions for, and the clock that says today.
        self.partitions_ahead = AHEAD_DAYS
        self.clock: Callable[[], datetime] = lambda: datetime.now(UTC)
        self._where = describe(dsn)
        self._init_state()

    def _init_state(self) -> None:
        self._pid = os.getpid()
        lock = threading.Lock()
        self._cond = threading.Condition(lock)
        # Boundaries a batched writer holds back wait here, woken when the backlog shrinks
        # or waiting stops helping, not by every row another thread queues.
        self._room = threading.Condition(lock)
        self._pending: deque[Write] = deque()
        self._in_flight = 0
        self._taken_at = 0.0  # when the writer took the rows in flight
        self._holding = 0  # boundaries waiting for the batched writer to catch up
        self._thread: threading.Thread | None = None
        self._closing = False
        self._outage = False
        self._backoff = _FIRST_BACKOFF
        self._retry_at = 0.0
        self._reported_full = False
        self._flushing = False
        # Set when a boundary waited postgres_wait in vain: later boundaries do not
        # wait until a commit is quick again, so a slow server costs one wait, not one per step.
        self._behind = False
        self._warned_late = False
        self._last_error = ""
        self._reported_refusals: set[tuple[str, str]] = set()
        self._close_deadline = 0.0
        self._partitions_due = 0.0
        self._pool = ConnectionPool(
            self.dsn,
            min_size=1,
            max_size=max(1, self.pool_size),
            kwargs={"autocommit": True, **connect_kwargs(self.timeout)},
            configure=self._configure_connection,
            timeout=self.timeout,
            # The processor schedules its own retries; the pool need not keep trying.
            reconnect_timeout=max(self.timeout * 2, 5.0),
            num_workers=1,
            name=POOL_NAME,
            open=False,
        )
        # Connect in the background: configure() must not wait for the database.
        self._pool.open(wait=False)

    def _configure_connection(self, conn: psycopg.Connection[Any]) -> None:
        session_settings(conn, self.timeout, self.postgres_commit)

    @property
    def pending(self) -> int:
        """Rows not committed yet: queued for the writer thread, a batch or a retry."""
        return len(self._pending) + self._in_flight

    def _convert(self, write: Write) -> Write | None:
        """Fill in the row parameters of ``write`` from its span; None if the span cannot be a row."""
        if write.params is not None or write.span is None:
            return write
        to_params: Callable[[SpanRecord], dict[str, Any]] = (
            span_rows.step_params if write.kind == STEP else span_rows.run_params
        )
        try:
            write.params = to_params(from_sdk_span(guarded(write.span)))
        except Exception:  # telemetry never breaks the agent
            with self._cond:
                self.stats.invalid += 1
            logger.exception(
                "spanreplay could not turn span %r into a Postgres row; the trace file still has it", write.span.name
            )
            return None
        write.span = None
        return write

    def _behind_writer(self) -> bool:
        """Batched, holding the lock: more than ``high_water`` rows wait, and waiting can help."""
        if len(self._pending) + self._in_flight <= self.high_water:
            return False
        # An outage backs off before it retries, and a commit under way for longer than the
        # writer's own timeout is a frozen server: waiting for either would only stall the agent.
        stuck = self._in_flight > 0 and time.monotonic() - self._taken_at > self.timeout
        return not (self._outage or self._closing or stuck)

    # -- writing (the writer thread) --------------------------------------------

    def _write(self, writes: list[Write]) -> None:
        """Commit ``writes``: a refused row is set aside, a failure queues them for retry."""
        writes = [w for w in map(self._convert, writes) if w is not None]
        if not writes:
            return
        started = time.monotonic()
        exc = commit(self._pool, self.timeout, writes)
        if exc is None:
            self._committed(writes, time.monotonic() - started)
            return
        if not isinstance(exc, REFUSALS):
            self._failed(exc, writes)
            return
        if len(writes) == 1:
            self._set_aside(writes[0], exc)
            return
        # One refused row rolls back the whole transaction: write the rows one at a
        # time, so only the refused ones are set aside.
        for i, write in enumerate(writes):
            started = time.monotonic()
            exc = commit(self._pool, self.timeout, [write])
            if exc is None:
                self._committed([write], time.monotonic() - started)
            elif isinstance(exc, REFUSALS):
                self._set_aside(write, exc)
            else:
                self._failed(exc, writes[i:])
                return

    def _committed(self, writes: list[Write], elapsed: float) -> None:
        steps_done = sum(1 for w in writes if w.kind == STEP)
        removed = sum(1 for w in writes if w.kind == DELETE)
        with self._cond:
            for write in writes:
                write.settled = True
            self.stats.steps_written += steps_done
            self.stats.runs_removed += removed
            self.stats.runs_written += len(writes) - steps_done - removed
            if self._behind and not self._pending and elapsed < self.postgres_wait:
                self._behind = False  # quick again: boundaries wait for their rows once more
            self._cond.notify_all()
            if self._outage:
                self._outage = False
                self._backoff = _FIRST_BACKOFF
                logger.warning(
                    "spanreplay writes to %s again, after %d failed attempts", self._where, self.stats.failures
                )

    def _set_aside(self, write: Write, exc: Exception) -> None:
        params = write.params or {}
        row = f"agent_steps row of run {params.get('run_id')} step {params.get('step_number')}"
        if write.kind == RUN:
            row = f"agent_runs row of run {params.get('run_id')}"
        code = getattr(getattr(exc, "diag", None), "sqlstate", None) or type(exc).__name__
        with self._cond:
            write.settled = True
            self.stats.refused += 1
            first = (write.kind, code) not in self._reported_refusals
            self._reported_refusals.add((write.kind, code))
            self._cond.notify_all()
        level = logging.ERROR if first else logging.DEBUG
        logger.log(level, notices.REFUSED, self._where, row, first_line(exc), self._where)

    def _failed(self, exc: Exception, writes: list[Write]) -> None:
        with self._cond:
            self.stats.failures += 1
            first = not self._outage
            self._outage = True
            self._last_error = first_line(exc)
            self._retry_at = time.monotonic() + self._backoff
            self._backoff = min(self._backoff * 2, _MAX_BACKOFF)
            self._cond.notify_all()  # boundaries waiting for these rows stop waiting
        if first:
            reason = failure(self.dsn, "write spanreplay rows", exc) if isinstance(exc, psycopg.Error) else exc
            logger.error(notices.OUTAGE, reason)
        else:
            logger.debug("spanreplay: writing to %s failed again: %s", self._where, exc)
        self._enqueue(writes, front=True)

    def _enqueue(self, writes: list[Write], *, front: bool) -> None:
        with self._cond:
            if self._closing and self._thread is None:
                self.stats.dropped += len(writes)
                return
            kept = [w for w in writes if w.kind != STEP or len(self._pending) < self.max_pending]
            # Run rows are few and say how the run ended; deletes are the keep policy's: never dropped.
            dropped = len(writes) - len(kept)
            if dropped:
                self.stats.dropped += dropped
                if not self._reported_full:
                    self._reported_full = True
                    logger.error(notices.FULL, self.max_pending, self._where, self._where)
            if front:
                self._pending.extendleft(reversed(kept))
            else:
                self._pending.extend(kept)
            if self._thread is None and not self._closing:
                self._thread = threading.Thread(target=self._run_writer, name="spanreplay-postgres", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run_writer(self) -> None:
        while True:
            with self._cond:
                batch = self._next_batch()
                if batch is None:
                    return
                self._in_flight = len(batch)
                self._taken_at = time.monotonic()
            try:
                self._write(batch)  # on failure it is queued again, retried after the backoff
                self._make_partitions()
            finally:
                with self._cond:
                    self._in_flight = 0
                    if len(self._pending) < self.max_pending // 2:
                        self._reported_full = False
                    self._cond.notify_all()
                    self._room.notify_all()

    def _make_partitions(self) -> None:
        """Make the partitions of the coming days, when due; a row of a day without one waits
        in the default partition meanwhile, so a failure here only logs and retries later."""
        now = time.monotonic()
        if now < self._partitions_due or self._outage:
            return
        self._partitions_due = now + _PARTITIONS_RETRY
        first, last = partitions.ahead_range(self.clock().date(), self.partitions_ahead)
        try:
            with self._pool.connection(timeout=self.timeout) as conn:
                made = partitions.make_on(conn, first, last, wait=False)
        except Exception as exc:  # the agent's rows matter more: never let this stop the writer
            logger.debug(
                "spanreplay could not make the partitions of %s to %s in %s: %s", first, last, self._where, exc
            )
            return
        if made is not None:
            self._partitions_due = now + _PARTITIONS_EVERY

    def _next_batch(self) -> list[Write] | None:
        """Wait (holding the lock) until a batch is due; None when closing with nothing left."""
        first_seen: float | None = None
        while True:
            now = time.monotonic()
            if self._closing and (not self._pending or (self._outage and now >= self._close_deadline)):
                return None
            if self._pending:
                first_seen = now if first_seen is None else first_seen
                waiting_retry = self._outage and now < self._retry_at
                due = (
                    self._closing
                    or self._flushing
                    or self._holding
                    or not self.batch
                    or len(self._pending) >= self.batch_size
                    or now - first_seen >= self.flush_interval
                )
                if due and not (waiting_retry and not self._closing):
                    size = min(len(self._pending), self.batch_size)
                    return [self._pending.popleft() for _ in range(size)]
                wake = self._retry_at if waiting_retry else first_seen + self.flush_interval
                self._cond.wait(max(0.001, wake - now))
            else:
                first_seen = None
                self._cond.wait()

    def _cause(self) -> str:
        """Why rows are still queued, for the messages that count them."""
        if self._outage and self._last_error:
            return f"the last attempt failed: {self._last_error}"
        return f"the server did not answer in time: frozen, overloaded, or slower than timeout={self.timeout:g} s"

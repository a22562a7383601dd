"""The Postgres span processor: one ``agent_steps`` row per boundary, as it completes.

Two modes:

- per step (the default): the boundary waits until its row is committed, so a
  process killed after a boundary returned has that step in the table
  (write-ahead), but never longer than ``postgres_wait``; past it the row stays
  queued and is committed when the server answers. A side effect
  (``effect=True``) also waits, the same way, for its intent row before its
  work runs.
- batched: rows are queued and a background thread commits them together every
  ``flush_interval`` seconds or ``batch_size`` rows; far less work per step, but
  a crash loses what was still queued (the trace file keeps it). A writer slower
  than the agent holds the boundaries back (each at most ``postgres_wait``) once
  two batches wait, so a long run records in constant memory.

In both modes only the background writer thread talks to the database
(``writer_thread``): a database that is down or slow never breaks the agent. The
durable trace file is written before this processor runs, so it has every step
regardless; rows that were dropped can be filled in with
``spanreplay export traces/ DSN``.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from psycopg_pool import ConnectionPool

from spanreplay import semconv as sc
from spanreplay.sources.postgres.connect import check_commit, check_dsn

from . import notices
from .writer_thread import RowWriter, WriterSettings
from .writes import DELETE, RUN, STEP, PostgresExportStats, QuietPoolFilter, Write

logger = logging.getLogger("spanreplay")

DEFAULT_WAIT: Final = 0.2


class PostgresSpanProcessor(RowWriter, SpanProcessor):
    """Writes the boundary and run spans of spanreplay runs to Postgres.

    Args:
        dsn: ``postgresql://user@host:port/db``; the tables must exist
            (``spanreplay db upgrade DSN``).
        batch: commit rows in batches every ``flush_interval`` instead of as each
            step completes; boundaries do not wait for their row, only for a
            writer that fell behind (more than two batches of rows wait).
        batch_size: most rows per batch commit.
        flush_interval: longest a row waits in batched mode, in seconds.
        timeout: bound on each connect, statement and lock wait of the writer
            thread, in seconds.
        postgres_wait: longest a boundary waits for its row to be committed (per
            step mode), or for a batched writer to catch up, in seconds; past it the
            boundary returns and the row stays queued. 0 never waits: rows are
            written in the background as they come, however many pile up.
            ``SPANREPLAY_POSTGRES_WAIT`` sets it for a DSN given to ``configure()``.
        max_pending: most rows held for retry or batching; past it rows are
            dropped (and counted) rather than growing memory without bound.
        pool_size: most connections the pool opens (one per thread writing at once).
        postgres_commit: ``"sync"`` (a commit waits for the WAL flush) or ``"async"``
            (``synchronous_commit=off``: a crash of the server can lose the last
            commits); ``SPANREPLAY_POSTGRES_COMMIT`` for a DSN given to ``configure()``.
    """

    def __init__(  # noqa: PLR0913 -- public keyword options since 0.1; grouping them would break every user's processor
        self,
        dsn: str,
        *,
        batch: bool = False,
        batch_size: int = 500,
        flush_interval: float = 0.5,
        timeout: float = 2.0,
        max_pending: int = 10_000,
        pool_size: int = 4,
        postgres_wait: float = DEFAULT_WAIT,
        postgres_commit: str = "sync",
    ) -> None:
        check_dsn(dsn)
        postgres_commit = check_commit(postgres_commit)
        if not postgres_wait >= 0:
            raise ValueError(f"postgres_wait must be 0 or more seconds, not {postgres_wait!r}")
        super().__init__(
            dsn,
            WriterSettings(
                batch=batch,
                batch_size=batch_size,
                flush_interval=flush_interval,
                timeout=timeout,
                max_pending=max_pending,
                pool_size=pool_size,
                postgres_wait=postgres_wait,
                postgres_commit=postgres_commit,
            ),
        )
        # configure() silences a processor it replaces (an SDK provider cannot drop one).
        self.enabled = True

    def __repr__(self) -> str:
        mode = "batched" if self.batch else "per step"
        return f"<PostgresSpanProcessor {self._where} {mode}, {self.postgres_commit} commits>"

    # -- span processor ---------------------------------------------------------

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        if not self.enabled:
            return
        attributes = span.attributes or {}
        if sc.RUN_ID not in attributes:
            return
        if attributes.get(sc.RUN_STATUS) == sc.RUN_STATUS_RUNNING:
            kind = RUN
        elif attributes.get(sc.EFFECT) is True and sc.CALL_ID in attributes:
            # A side effect's intent: a step row without an outcome, committed (per step,
            # within postgres_wait) before the work runs. The ended span fills it in.
            kind = STEP
        else:
            return
        # Converted now in any mode: a started span still changes until it ends.
        write = self._convert(Write(kind, span=span))
        if write is not None:
            self._submit(write)

    def on_end(self, span: ReadableSpan) -> None:
        if not self.enabled:
            return
        attributes = span.attributes or {}
        if sc.RUN_ID not in attributes:
            return
        if sc.CALL_ID in attributes:
            write = Write(STEP, span=span)
        elif sc.RUN_STATUS in attributes:
            write = Write(RUN, span=span)
        else:
            return
        if self.batch:
            self._submit(write)  # converted by the writer thread
            return
        converted = self._convert(write)
        if converted is not None:
            self._submit(converted)

    def _submit(self, write: Write) -> None:
        if os.getpid() != self._pid:
            self._after_fork()
        wait = not self.batch and self.postgres_wait > 0 and not (self._outage or self._behind or self._closing)
        self._enqueue([write], front=False)
        if wait:
            self._wait_for(write)
        elif self.batch and self.postgres_wait > 0 and len(self._pending) + self._in_flight > self.high_water:
            self._hold_back()  # counted without the lock: a cheap test on every boundary

    def _wait_for(self, write: Write) -> None:
        """Hold the boundary until ``write`` is committed, at most ``postgres_wait`` seconds."""
        deadline = time.monotonic() + self.postgres_wait
        with self._cond:
            # An outage: the writer backs off before retrying, so waiting gains nothing.
            while not write.settled and not self._outage:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.stats.late += 1
                    self._behind = True
                    first = not self._warned_late
                    self._warned_late = True
                    break
                self._cond.wait(left)
            else:
                return
        if first:
            logger.warning(notices.LATE, self._where, self.postgres_wait)

    def _hold_back(self) -> None:
        """Batched: hold the boundary (its row queued) while over ``high_water``, at most ``postgres_wait``."""
        deadline = time.monotonic() + self.postgres_wait
        with self._cond:
            if not self._behind_writer():
                return
            self.stats.held += 1
            self._holding += 1
            self._cond.notify_all()  # a batch is due now, whatever the interval
            try:
                while self._behind_writer() and (left := deadline - time.monotonic()) > 0:
                    self._room.wait(left)
            finally:
                self._holding -= 1
            if not self._behind_writer():
                return
            self.stats.late += 1
            first, self._warned_late = not self._warned_late, True
        if first:
            logger.warning(notices.BEHIND, self._where, self.postgres_wait, self.pending)

    def remove_run(self, run_id: str) -> None:
        """Delete the run and its steps (the keep policy dropped it), queued behind its rows."""
        if self.enabled:
            self._enqueue([Write(DELETE, params={"run_id": run_id})], front=False)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Commit every queued row; False if the database did not take them in time."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._cond:
            self._flushing = True
            self._cond.notify_all()
            try:
                while self._pending or self._in_flight:
                    left = deadline - time.monotonic()
                    if left <= 0 or self._thread is None:
                        left_rows = len(self._pending) + self._in_flight
                        break
                    self._cond.wait(min(left, 0.05))
                else:
                    return True
            finally:
                self._flushing = False
        logger.warning(notices.FLUSH_LEFT, left_rows, self._where, self._cause())
        return False

    def shutdown(self) -> None:
        """Commit what is queued (waiting at most a few timeouts), then close the pool."""
        with self._cond:
            if self._closing and self._pool.closed:
                return  # already shut down: the provider and configure() may both ask
            self._closing = True
            self._close_deadline = time.monotonic() + self.timeout * 2
            thread = self._thread
            self._cond.notify_all()
            self._room.notify_all()
        if thread is not None:
            thread.join(self.timeout * 3)
        with self._cond:
            self._thread = None
            left = len(self._pending) + self._in_flight
            self._pending.clear()
        if left:
            self.stats.dropped += left
            logger.error(notices.SHUTDOWN_LEFT, left, self._where, self._cause(), self._where)
        self._pool.close(timeout=self.timeout)

    def _after_fork(self) -> None:
        # The parent's pool and writer thread did not survive the fork; its sockets
        # did. Keep the old pool referenced (closing it here would end the parent's
        # sessions) and start afresh.
        _orphans.append(self._pool)
        self.stats = PostgresExportStats()
        self._init_state()


_orphans: list[ConnectionPool[Any]] = []


logging.getLogger("psycopg.pool").addFilter(QuietPoolFilter())

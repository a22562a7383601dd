"""What the Postgres writer tells the operator, on the ``spanreplay`` logger.

Each sentence names the database (never its password), what became of the rows,
and the fix; the trace files hold every step whatever the database did.
"""

from __future__ import annotations

from typing import Final

# A per-step boundary outwaited postgres_wait: where, the wait.
LATE: Final = (
    "spanreplay: %s did not commit a step within postgres_wait (%g s); the agent goes on and the "
    "row stays queued, written when the server answers (the trace file has it already). Later "
    "steps do not wait until the server is quick again; check the server's load, or raise "
    "postgres_wait (SPANREPLAY_POSTGRES_WAIT) to wait longer."
)

# A batched boundary outwaited postgres_wait for the writer to catch up: where, the wait, rows waiting.
BEHIND: Final = (
    "spanreplay: %s commits rows more slowly than the agent makes them: a boundary waited "
    "postgres_wait (%g s) for the %d rows ahead of it. The agent goes on and the rows stay "
    "queued (at most max_pending; the trace file has them). Check the server's load, or raise "
    "postgres_wait (SPANREPLAY_POSTGRES_WAIT) to wait longer."
)

# A row the server refused: where, which row, the server's reason, where.
REFUSED: Final = (
    "spanreplay: %s refused the %s: %s. The row is set aside and not retried, and the rows after it "
    "go on. The trace file keeps it: once the cause is fixed (the value or the constraint named "
    "above), `spanreplay export traces/ %s` fills it in."
)

# The first failure of an outage: the failure, naming the database and the fix.
OUTAGE: Final = (
    "spanreplay: %s The agent continues; the trace files keep every step, and the rows are retried in the background."
)

# The queue is full: max_pending, where, where.
FULL: Final = (
    "spanreplay: %d rows wait for %s, the most it holds (max_pending); newer steps are "
    "dropped until it catches up. Fill them in later with `spanreplay export traces/ %s`."
)

# force_flush() timed out: rows left, where, why.
FLUSH_LEFT: Final = (
    "spanreplay: %d rows still wait for %s after the flush (%s); they stay queued and are written "
    "when the server answers. The trace files hold them."
)

# shutdown() dropped rows: rows left, where, why, where.
SHUTDOWN_LEFT: Final = (
    "spanreplay: %d rows could not be written to %s before shutdown (%s). The trace files hold "
    "them: `spanreplay export traces/ %s` fills them in."
)

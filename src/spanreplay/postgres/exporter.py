"""The Postgres exporter's setup: boundary spans as ``agent_steps`` rows, committed per step."""

from __future__ import annotations

from typing import Final

from opentelemetry.sdk.trace import TracerProvider

from .._environment import environment
from .processor import DEFAULT_WAIT, PostgresSpanProcessor
from .writes import PostgresExportStats

__all__ = ["DSN_VARIABLE", "MODE_VARIABLE", "PostgresExportStats", "PostgresSpanProcessor", "attach"]

DSN_VARIABLE: Final = "SPANREPLAY_POSTGRES_DSN"
MODE_VARIABLE: Final = "SPANREPLAY_POSTGRES_MODE"


def attach(
    provider: TracerProvider,
    postgres: str | PostgresSpanProcessor | None,
    previous: PostgresSpanProcessor | None,
) -> PostgresSpanProcessor | None:
    """Add the processor ``configure(postgres=...)`` asks for to ``provider``.

    ``postgres`` is a DSN, a processor built by the caller (batched mode, other
    timeouts), or None to use ``SPANREPLAY_POSTGRES_DSN`` when it is set;
    ``SPANREPLAY_POSTGRES_MODE=batch`` picks the batched mode for a DSN, and
    ``SPANREPLAY_POSTGRES_WAIT`` how long a boundary waits for its row.
    ``previous`` is the processor an earlier ``configure()`` added to the same
    provider: kept when it is the one asked for again, otherwise silenced and
    closed (an SDK provider cannot remove a processor).
    """
    env = environment()
    batch = env.postgres_batch
    wait = DEFAULT_WAIT if env.postgres_wait is None else env.postgres_wait
    dsn = postgres if isinstance(postgres, str) else env.postgres_dsn
    if previous is not None:
        if isinstance(postgres, PostgresSpanProcessor):
            same = postgres is previous
        else:
            same = (previous.dsn, previous.batch, previous.postgres_wait) == (dsn, batch, wait)
        if same:
            previous.enabled = True
            return previous
        previous.enabled = False
        previous.shutdown()
    if isinstance(postgres, PostgresSpanProcessor):
        processor = postgres
    elif dsn:
        processor = PostgresSpanProcessor(dsn, batch=batch, postgres_wait=wait)
    else:
        return None
    provider.add_span_processor(processor)
    return processor

"""The Postgres exporter's setup: boundary spans as ``agent_steps`` rows, committed per step."""

from __future__ import annotations

from typing import Final

from opentelemetry.sdk.trace import TracerProvider

from spanreplay._environment import environment
from spanreplay.errors import ConfigurationError
from spanreplay.sources.postgres.connect import check_commit

from .processor import DEFAULT_WAIT, PostgresSpanProcessor
from .writes import PostgresExportStats

__all__ = ["COMMIT_VARIABLE", "DSN_VARIABLE", "MODE_VARIABLE", "PostgresExportStats", "PostgresSpanProcessor", "attach"]

# The variable holding the DSN that configure() writes runs to.
DSN_VARIABLE: Final = "SPANREPLAY_POSTGRES_DSN"
# The variable that picks batched commits ("batch") over one commit per step.
MODE_VARIABLE: Final = "SPANREPLAY_POSTGRES_MODE"
# The variable choosing how commits wait ("sync" or "async").
COMMIT_VARIABLE: Final = "SPANREPLAY_POSTGRES_COMMIT"


def attach(
    provider: TracerProvider,
    postgres: str | PostgresSpanProcessor | None,
    previous: PostgresSpanProcessor | None,
    commit: str | None = None,
) -> PostgresSpanProcessor | None:
    """Add the processor ``configure(postgres=...)`` asks for to ``provider``.

    ``postgres`` is a DSN, a processor built by the caller (batched mode, other
    timeouts), or None to use ``SPANREPLAY_POSTGRES_DSN`` when it is set;
    ``SPANREPLAY_POSTGRES_MODE=batch`` picks the batched mode for a DSN, and
    ``SPANREPLAY_POSTGRES_WAIT`` how long a boundary waits for its row.
    ``commit`` (``configure(postgres_commit=...)``, else ``SPANREPLAY_POSTGRES_COMMIT``,
    else ``"sync"``) is how the rows of a DSN are committed; a processor brings its own.
    ``previous`` is the processor an earlier ``configure()`` added to the same
    provider: kept when it is the one asked for again, otherwise silenced and
    closed (an SDK provider cannot remove a processor).
    """
    env = environment()
    batch = env.postgres_batch
    wait = DEFAULT_WAIT if env.postgres_wait is None else env.postgres_wait
    if isinstance(postgres, PostgresSpanProcessor):
        if commit is not None and check_commit(commit) != postgres.postgres_commit:
            raise ConfigurationError(
                f"configure(postgres_commit={commit!r}) applies to a DSN; the PostgresSpanProcessor given commits "
                f"{postgres.postgres_commit!r}: build it with PostgresSpanProcessor(dsn, postgres_commit={commit!r})."
            )
    elif commit is not None:
        commit = check_commit(commit)
    else:
        commit = check_commit(env.postgres_commit or "sync", COMMIT_VARIABLE)
    dsn = postgres if isinstance(postgres, str) else env.postgres_dsn
    if previous is not None:
        if isinstance(postgres, PostgresSpanProcessor):
            same = postgres is previous
        else:
            settings = (previous.dsn, previous.batch, previous.postgres_wait, previous.postgres_commit)
            same = settings == (dsn, batch, wait, commit)
        if same:
            previous.enabled = True
            return previous
        previous.enabled = False
        previous.shutdown()
    if isinstance(postgres, PostgresSpanProcessor):
        processor = postgres
    elif dsn:
        processor = PostgresSpanProcessor(dsn, batch=batch, postgres_wait=wait, postgres_commit=commit or "sync")
    else:
        return None
    provider.add_span_processor(processor)
    return processor

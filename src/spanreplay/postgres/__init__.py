"""Runs kept in Postgres: the public face of the reading and the writing side.

Reading (a source of ``spanreplay.sources``) lives in ``spanreplay.sources.postgres``:
``connect`` (connections, and errors that name the database and the fix), ``schema``
(the tables and their migrations, ``spanreplay db upgrade``), ``rows`` and ``source``
(``load()`` and ``runs()`` from a DSN). Writing lives in ``spanreplay.recording.postgres``:
``processor`` and ``exporter`` (what ``configure(postgres=...)`` adds), ``writes``,
``notices``, ``backfill`` (``spanreplay export``) and ``retention`` (``spanreplay prune``).
Code inside spanreplay imports from those modules, never from here.
"""

try:
    import psycopg as _psycopg  # noqa: F401
    import psycopg_pool as _psycopg_pool  # noqa: F401
except ImportError as _exc:  # an optional dependency: say how to get it
    from spanreplay.errors import ConfigurationError

    raise ConfigurationError(
        f"Keeping runs in Postgres needs psycopg 3 and psycopg_pool ({_exc.name} is not installed); "
        "install them with: pip install 'spanreplay[postgres]'."
    ) from None

from spanreplay.errors import PostgresError
from spanreplay.recording.postgres.exporter import COMMIT_VARIABLE, DSN_VARIABLE, MODE_VARIABLE, attach
from spanreplay.recording.postgres.processor import PostgresSpanProcessor
from spanreplay.recording.postgres.writes import PostgresExportStats
from spanreplay.sources.kinds import is_postgres_dsn
from spanreplay.sources.postgres.connect import describe
from spanreplay.sources.postgres.schema import LATEST, MIGRATIONS, Migration, upgrade, version
from spanreplay.sources.postgres.source import PostgresSource, load, runs

__all__ = [
    "COMMIT_VARIABLE",
    "DSN_VARIABLE",
    "LATEST",
    "MIGRATIONS",
    "MODE_VARIABLE",
    "Migration",
    "PostgresError",
    "PostgresExportStats",
    "PostgresSource",
    "PostgresSpanProcessor",
    "attach",
    "describe",
    "is_postgres_dsn",
    "load",
    "runs",
    "upgrade",
    "version",
]

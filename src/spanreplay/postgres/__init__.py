"""Runs kept in Postgres: the schema and its migrations, the exporter that writes rows as an
agent runs, reading runs back (a source of ``spanreplay.sources``), importing trace files.

- ``schema``: the tables and their migrations (``spanreplay db upgrade``);
- ``processor`` and ``exporter``: the span processor ``configure(postgres=...)`` adds;
- ``rows``: spans to rows and rows back to events, shared by the writers and the reader;
- ``source``: ``load()`` and ``runs()`` from a DSN;
- ``backfill``: trace files into the tables (``spanreplay export``);
- ``retention``: deleting old runs (``spanreplay prune``);
- ``connect``: connections, and the errors that name the database and the fix;
- ``notices``: what the writer logs about its rows, each sentence with the fix.
"""

try:
    import psycopg as _psycopg  # noqa: F401
    import psycopg_pool as _psycopg_pool  # noqa: F401
except ImportError as _exc:  # an optional dependency: say how to get it
    from ..errors import ConfigurationError

    raise ConfigurationError(
        f"Keeping runs in Postgres needs psycopg 3 and psycopg_pool ({_exc.name} is not installed); "
        "install them with: pip install 'spanreplay[postgres]'."
    ) from None

from ..errors import PostgresError
from .connect import describe, is_postgres_dsn
from .exporter import COMMIT_VARIABLE, DSN_VARIABLE, MODE_VARIABLE, attach
from .processor import PostgresSpanProcessor
from .schema import LATEST, MIGRATIONS, Migration, upgrade, version
from .source import PostgresSource, load, runs
from .writes import PostgresExportStats

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

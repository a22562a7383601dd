"""Runs kept in Postgres: the schema and its migrations, reading runs back, importing trace files.

The exporter that writes rows as an agent runs is ``spanreplay.exporters.postgres``.
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
from ._connect import describe, is_postgres_dsn
from ._schema import LATEST, MIGRATIONS, Migration, upgrade, version
from ._source import load, runs

__all__ = [
    "LATEST",
    "MIGRATIONS",
    "Migration",
    "PostgresError",
    "describe",
    "is_postgres_dsn",
    "load",
    "runs",
    "upgrade",
    "version",
]

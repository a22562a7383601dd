"""Postgres as a trace source: connections, the schema and its migrations, and rows read back as events.

The writing side lives in ``spanreplay.recording.postgres``; ``spanreplay.postgres`` is the public face of both.
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

"""DSNs, connections and the one error every Postgres failure becomes."""

from __future__ import annotations

from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict

from spanreplay.errors import ConfigurationError, PostgresError

APPLICATION_NAME: Final = "spanreplay"

# How a session's commits end: "sync" waits for the WAL flush (the server's
# synchronous_commit), "async" returns before it (synchronous_commit=off).
COMMIT_MODES: Final = ("sync", "async")
# pg_advisory_xact_lock key taken by whatever changes the tables' shape (migrations,
# partitions made or dropped): the ASCII of "spanrepl", so it cannot collide by accident.
SCHEMA_LOCK: Final = 0x7370616E7265706C


def check_dsn(dsn: str) -> None:
    """Raise ConfigurationError for a DSN libpq cannot parse, before anything tries to connect."""
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ConfigurationError(
            f"The Postgres DSN is not valid ({first_line(exc)}); write postgresql://USER@HOST:PORT/DATABASE."
        ) from None


def describe(dsn: str) -> str:
    """``postgresql://user@host:port/db``: the DSN as it may be printed, never its password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "postgresql://(unparsable DSN)"
    user = f"{parts['user']}@" if parts.get("user") else ""
    host = str(parts.get("host") or "localhost")
    port = f":{parts['port']}" if parts.get("port") else ""
    db = f"/{parts['dbname']}" if parts.get("dbname") else ""
    return f"postgresql://{user}{host}{port}{db}"


def connect_kwargs(timeout: float) -> dict[str, Any]:
    """libpq settings that keep a dead or unreachable server from hanging the caller.

    ``connect_timeout`` is whole seconds and libpq treats anything under 2 as 2;
    ``tcp_user_timeout`` bounds a write to a peer that stopped answering.
    """
    return {
        "connect_timeout": max(2, round(timeout)),
        "tcp_user_timeout": int(timeout * 1000),
        "application_name": APPLICATION_NAME,
    }


def check_commit(value: object, name: str = "postgres_commit") -> str:
    """``value`` as a commit mode ("sync" or "async"); ConfigurationError naming ``name`` otherwise."""
    mode = value.strip().lower() if isinstance(value, str) else value
    if mode not in COMMIT_MODES:
        raise ConfigurationError(
            f'{name} is {value!r}; write one of {", ".join(map(repr, COMMIT_MODES))}: "sync" (the default) '
            'waits for the server to flush each commit, "async" lets a commit return before the server flushes it '
            "(synchronous_commit=off). See docs/postgres.md."
        )
    return str(mode)


def session_settings(conn: psycopg.Connection[Any], timeout: float, commit: str = "sync") -> None:
    """Bound every statement and lock wait of this session, so a slow server fails fast.

    ``commit="async"`` turns synchronous_commit off for the session: a commit then
    returns without waiting for its WAL to reach the disk.
    """
    millis = str(max(1, int(timeout * 1000)))
    sql = "SELECT set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false)"
    if commit == "async":
        sql += ", set_config('synchronous_commit', 'off', false)"
    conn.execute(sql, (millis, millis))
    if not conn.autocommit:
        conn.commit()


def connect(dsn: str, *, timeout: float = 10.0, autocommit: bool = False) -> psycopg.Connection[Any]:
    """One connection for a command or a load, with bounded waits."""
    try:
        conn = psycopg.connect(dsn, autocommit=autocommit, **connect_kwargs(timeout))
    except psycopg.Error as exc:
        raise PostgresError(
            f"Cannot connect to {describe(dsn)}: {first_line(exc)}. Check the DSN and that the server "
            "is running and accepts connections (pg_isready -h HOST).",
            dsn=describe(dsn),
        ) from None
    try:
        session_settings(conn, timeout)
    except psycopg.Error as exc:
        conn.close()
        raise failure(dsn, "set up the session", exc) from None
    return conn


def failure(dsn: str, doing: str, exc: BaseException) -> PostgresError:
    """The PostgresError for a failed operation, naming the fix where one is known."""
    hint = ""
    if isinstance(exc, psycopg.errors.UndefinedTable):
        hint = f" The spanreplay tables are missing: run `spanreplay db upgrade {describe(dsn)}` first."
    elif isinstance(exc, psycopg.errors.UndefinedFunction):
        # The writer's statements call the schema's functions before naming a table.
        hint = (
            f" The spanreplay tables are missing: run `spanreplay db upgrade {describe(dsn)}` first "
            "(or they are of an older schema version, which it upgrades)."
        )
    elif isinstance(exc, psycopg.errors.UndefinedColumn):
        hint = f" The spanreplay tables are of an older schema version: run `spanreplay db upgrade {describe(dsn)}`."
    elif isinstance(exc, (psycopg.errors.QueryCanceled, psycopg.errors.LockNotAvailable)):
        hint = " The server was too slow (statement or lock timeout); retry, or raise the timeout."
    elif isinstance(exc, psycopg.OperationalError):
        hint = " Check that the server is running and reachable."
    return PostgresError(f"Could not {doing} in {describe(dsn)}: {first_line(exc)}.{hint}", dsn=describe(dsn))


def first_line(exc: BaseException) -> str:
    """The first line of an error's message, without its final full stop."""
    text = str(exc).strip().splitlines()
    return text[0].rstrip(".") if text else type(exc).__name__

"""The Postgres fixtures: the server at 127.0.0.1:5432 (or SPANREPLAY_TEST_PG_DSN), a fresh schema per test.

Without a server the tests that ask for these skip, except in CI (CI=true),
where they fail: a CI run that silently skipped them would claim coverage it
does not have. tests/conftest.py registers this module as a plugin, so any
test may name the fixtures.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

BASE_DSN = os.environ.get("SPANREPLAY_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _unavailable(reason: str) -> None:
    message = (
        f"The Postgres tests cannot run: {reason}. Start the server (pg_ctlcluster ... main start) "
        "or point SPANREPLAY_TEST_PG_DSN at one."
    )
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def psycopg_installed() -> None:
    """psycopg and psycopg_pool importable; fails in CI, skips elsewhere, when they are not."""
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        _unavailable(f"{exc.name} is not installed (pip install -e '.[test]')")


@pytest.fixture(scope="session")
def pg_server(psycopg_installed: None) -> str:
    """The server's DSN; fails in CI, skips elsewhere, when it cannot be reached."""
    import psycopg

    try:
        with psycopg.connect(BASE_DSN, connect_timeout=3):
            pass
    except psycopg.Error as exc:
        _unavailable(f"{BASE_DSN} does not answer ({str(exc).strip()})")
    return BASE_DSN


def with_schema(dsn: str, schema: str) -> str:
    """``dsn`` with ``schema`` as its search_path."""
    joiner = "&" if "?" in dsn else "?"
    return f"{dsn}{joiner}options=-csearch_path%3D{schema}"


@pytest.fixture
def pg_dsn(pg_server: str) -> Iterator[str]:
    """A DSN whose search_path is a fresh schema holding the spanreplay tables.

    Tests name it before ``provider``, so the provider (and the processors writing
    here) shuts down before the schema is dropped.
    """
    import psycopg

    from spanreplay.postgres import upgrade

    schema = f"sr_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = with_schema(pg_server, schema)
    upgrade(dsn)
    yield dsn
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")

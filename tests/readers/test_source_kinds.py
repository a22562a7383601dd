"""What kind of source a string names: one answer per string, and every reader agrees with it."""

from __future__ import annotations

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st

from spanreplay.cli import _export_test, _prune, cli
from spanreplay.errors import TraceFormatError
from spanreplay.sources import SourceKind, is_postgres_dsn, open_source, source_kind
from spanreplay.sources.backends import BackendSource
from spanreplay.sources.files import FileSource, StdinSource
from spanreplay.sources.kinds import BACKEND_SCHEMES, POSTGRES_SCHEMES, is_backend
from spanreplay.sources.postgres.source import PostgresSource

_PREFIXES = (*POSTGRES_SCHEMES, *BACKEND_SCHEMES, "-", "postgresql:", "jaeger+", "tempo+", "POSTGRESQL://", "./")
# Text a command line can hold (no lone surrogates), near the prefixes the kinds start with.
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
sources = st.one_of(
    _TEXT,
    st.just("-"),
    st.tuples(st.sampled_from(_PREFIXES), _TEXT).map("".join),
)

_OPENED = {
    SourceKind.POSTGRES: PostgresSource,
    SourceKind.BACKEND: BackendSource,
    SourceKind.STDIN: StdinSource,
    SourceKind.FILES: FileSource,
}


@given(sources)
def test_every_string_is_classified_exactly_once(text: str) -> None:
    kind = source_kind(text)
    claims = {
        SourceKind.POSTGRES: text.startswith(("postgresql://", "postgres://")),
        SourceKind.BACKEND: text.startswith(("jaeger+http://", "jaeger+https://", "tempo+http://", "tempo+https://")),
        SourceKind.STDIN: text == "-",
    }
    claims[SourceKind.FILES] = not any(claims.values())
    assert [k for k, claimed in claims.items() if claimed] == [kind]
    assert is_postgres_dsn(text) is (kind is SourceKind.POSTGRES)
    assert is_backend(text) is (kind is SourceKind.BACKEND)


@given(sources)
@example("jaeger+http://[")  # urlsplit's ValueError: refused as a malformed backend URL too
def test_open_source_opens_the_kind_source_kind_names(text: str) -> None:
    kind = source_kind(text)
    try:
        opened = open_source(text)
    except TraceFormatError:
        # Only a backend URL is parsed on opening (and refused when malformed).
        assert kind is SourceKind.BACKEND
        return
    assert type(opened) is _OPENED[kind]


def test_asking_whether_a_string_is_a_dsn_imports_no_psycopg() -> None:
    code = (
        "import sys\n"
        "from spanreplay.sources.kinds import is_postgres_dsn\n"
        "assert is_postgres_dsn('postgresql://u@h/db')\n"
        "assert 'psycopg' not in sys.modules, 'psycopg imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- the commands that treat one kind apart agree with open_source --------------------


# The exit code of a command that went on past its check of the source's kind.
_REACHED = 77


def _reached(*_: object, **__: object) -> None:
    raise click.exceptions.Exit(_REACHED)


@settings(max_examples=60, deadline=None)
@given(text=sources)
def test_prune_deletes_rows_exactly_for_the_sources_open_source_opens_as_postgres(text: str) -> None:
    taken: list[str] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_prune, "_prune_postgres", lambda *a, **k: (taken.append("postgres"), ([], 0))[1])
        mp.setattr(_prune, "_prune_files", lambda *a, **k: (taken.append("files"), _reached())[1])
        CliRunner().invoke(cli, ["prune", "--", text])
    assert taken == (["postgres"] if isinstance(open_source_or_none(text), PostgresSource) else ["files"])


@settings(max_examples=60, deadline=None)
@given(text=sources)
def test_export_test_refuses_exactly_the_sources_open_source_opens_as_postgres(text: str) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_export_test, "load", _reached)
        result = CliRunner().invoke(cli, ["export-test", "--entry", "agent:main", "--", text, "run_1"])
    if isinstance(open_source_or_none(text), PostgresSource):
        assert result.exit_code == 2
        assert "Postgres keeps its steps" in result.output
    else:
        assert result.exit_code == _REACHED


@settings(max_examples=60, deadline=None)
@given(text=sources)
def test_db_takes_exactly_the_sources_open_source_opens_as_postgres(text: str) -> None:
    import spanreplay.sources.postgres.schema as schema

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(schema, "version", _reached)
        result = CliRunner().invoke(cli, ["db", "status", "--", text])
    if isinstance(open_source_or_none(text), PostgresSource):
        assert result.exit_code == _REACHED
    else:
        assert result.exit_code == 2
        assert "is not a Postgres DSN" in result.output


def test_check_refuses_the_source_open_source_opens_as_stdin() -> None:
    assert isinstance(open_source("-"), StdinSource)
    result = CliRunner().invoke(cli, ["check", "-", "--entry", "agent:main"])
    assert result.exit_code == 2
    assert "cannot read stdin" in result.output


def open_source_or_none(text: str) -> object:
    try:
        return open_source(text)
    except TraceFormatError:
        return None

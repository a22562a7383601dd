"""How the Postgres exporter commits: ``postgres_commit="sync"`` (the default) or ``"async"``.

``async`` sets ``synchronous_commit=off`` on the exporter's sessions. What these
tests hold: the setting really is in force in the session that inserts the rows
(a trigger reads it on the server), every row still arrives, a boundary still
returns only after its commit (so an agent killed with SIGKILL loses no step
whose boundary returned), and a value other than the two is refused by name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.errors import ConfigurationError

# A port nothing listens on; the checks below refuse a value before anything connects.
DOWN_DSN = "postgresql://postgres@127.0.0.1:1/test"
# A wait no commit on a loaded test machine reaches: every boundary returns after its commit.
GENEROUS_WAIT = "60"


def query(dsn: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def execute(dsn: str, sql: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


@pytest.fixture
def seen_dsn(pg_dsn: str) -> str:
    """``pg_dsn`` with a trigger that notes, for every step row inserted, the inserting session's synchronous_commit."""
    execute(
        pg_dsn,
        """
        CREATE TABLE commit_seen (run_id TEXT, setting TEXT);
        CREATE FUNCTION note_commit_setting() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO commit_seen VALUES (NEW.run_id, current_setting('synchronous_commit'));
            RETURN NEW;
        END $$;
        CREATE TRIGGER note_commit_setting AFTER INSERT ON agent_steps
            FOR EACH ROW EXECUTE FUNCTION note_commit_setting();
        """,
    )
    return pg_dsn


def record_steps(agent: str, steps: int) -> str:
    with spanreplay.record(agent=agent) as run:
        for i in range(steps):
            spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: {"i": i})
    return run.run_id


def test_async_commits_run_with_synchronous_commit_off_and_every_row_arrives(
    seen_dsn: str, tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPANREPLAY_POSTGRES_WAIT", GENEROUS_WAIT)
    config = spanreplay.configure(
        trace_dir=tmp_path, tracer_provider=provider, raise_internal_errors=True, postgres=seen_dsn,
        postgres_commit="async",
    )  # fmt: skip
    assert config.postgres_processor is not None
    assert config.postgres_processor.postgres_commit == "async"
    run_id = record_steps("async", 30)
    assert query(seen_dsn, "SELECT DISTINCT run_id, setting FROM commit_seen") == [(run_id, "off")]
    assert query(seen_dsn, "SELECT count(*) FROM agent_steps") == [(30,)]
    assert query(seen_dsn, "SELECT status, steps_recorded FROM agent_runs") == [("ok", 30)]
    assert spanreplay.load(seen_dsn, run_id) == spanreplay.load(tmp_path, run_id)


def test_sync_commits_keep_the_servers_setting(seen_dsn: str, tmp_path: Path, provider: TracerProvider) -> None:
    ((server_default,),) = query(seen_dsn, "SHOW synchronous_commit")
    config = spanreplay.configure(
        trace_dir=tmp_path, tracer_provider=provider, raise_internal_errors=True, postgres=seen_dsn
    )
    assert config.postgres_processor is not None
    assert config.postgres_processor.postgres_commit == "sync"
    run_id = record_steps("sync", 5)
    assert query(seen_dsn, "SELECT DISTINCT run_id, setting FROM commit_seen") == [(run_id, server_default)]


def test_batched_rows_commit_asynchronously_too(seen_dsn: str, tmp_path: Path, provider: TracerProvider) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    processor = PostgresSpanProcessor(seen_dsn, batch=True, postgres_commit="async")
    spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, raise_internal_errors=True, postgres=processor)
    run_id = record_steps("batched", 50)
    assert processor.force_flush(30_000)
    assert query(seen_dsn, "SELECT DISTINCT setting, count(*) FROM commit_seen GROUP BY setting") == [("off", 50)]
    assert spanreplay.load(seen_dsn, run_id) == spanreplay.load(tmp_path, run_id)


def test_the_environment_variable_picks_async_commits_for_the_dsn_variable(
    seen_dsn: str, tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPANREPLAY_POSTGRES_DSN", seen_dsn)
    monkeypatch.setenv("SPANREPLAY_POSTGRES_COMMIT", " Async ")
    config = spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, raise_internal_errors=True)
    assert config.postgres_processor is not None
    assert "async commits" in repr(config.postgres_processor)
    record_steps("env", 3)
    assert query(seen_dsn, "SELECT DISTINCT setting FROM commit_seen") == [("off",)]


def test_configuring_another_commit_mode_replaces_the_processor_and_the_same_one_keeps_it(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    first = spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, postgres=pg_dsn).postgres_processor
    again = spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, postgres=pg_dsn, postgres_commit="sync")
    assert again.postgres_processor is first
    changed = spanreplay.configure(
        trace_dir=tmp_path, tracer_provider=provider, postgres=pg_dsn, postgres_commit="async"
    ).postgres_processor
    assert changed is not first
    assert changed is not None
    assert first is not None
    assert (changed.postgres_commit, first.enabled) == ("async", False)


# --- an agent killed mid-run --------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import sys
    from opentelemetry.sdk.trace import TracerProvider
    import spanreplay

    dsn, trace_dir, run_id = sys.argv[1], sys.argv[2], sys.argv[3]
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=TracerProvider(), postgres=dsn, postgres_commit="async")
    with spanreplay.record(agent="child", run_id=run_id):
        for i in range(100_000):
            spanreplay.boundary("tool", "step", {"i": i}, lambda: {"i": i, "pad": "x" * 300})
            print(i + 1, flush=True)
    """
)


@pytest.mark.slow
def test_an_agent_killed_with_async_commits_keeps_every_step_whose_boundary_returned(
    seen_dsn: str, tmp_path: Path
) -> None:
    run_id = f"run_{datetime.now(UTC):%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, seen_dsn, str(tmp_path), run_id],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SPANREPLAY_POSTGRES_WAIT": GENEROUS_WAIT},
    )
    assert child.stdout is not None
    returned = 0
    while returned < 40:
        returned = int(child.stdout.readline())
    child.send_signal(signal.SIGKILL)  # somewhere in the middle of the next steps
    child.wait(10)
    child.stdout.close()
    # The server did not crash: what a commit returned for is there, flushed or not.
    log = spanreplay.load(seen_dsn, run_id)
    seqs = [e.seq for e in log]
    assert seqs == list(range(1, len(seqs) + 1))
    assert len(seqs) >= returned
    assert log.run.status == "crashed"
    assert query(seen_dsn, "SELECT DISTINCT setting FROM commit_seen") == [("off",)]
    file_events = list(spanreplay.load(tmp_path, run_id))
    assert file_events[: len(seqs)] == list(log)


# --- values refused -----------------------------------------------------------------------


def assert_names_value_and_choices(error: ConfigurationError, value: object, name: str) -> None:
    message = str(error)
    assert f"{name} is {value!r}" in message
    assert "'sync', 'async'" in message


@given(st.one_of(st.text(max_size=12), st.integers(), st.none(), st.booleans()))
def test_any_value_but_sync_or_async_is_refused_naming_it_and_the_choices(value: object) -> None:
    from spanreplay.sources.postgres.connect import check_commit

    if isinstance(value, str) and value.strip().lower() in ("sync", "async"):
        assert check_commit(value) == value.strip().lower()
        return
    with pytest.raises(ConfigurationError) as caught:
        check_commit(value)
    assert_names_value_and_choices(caught.value, value, "postgres_commit")


@pytest.mark.parametrize("value", ["off", "asynchronous", "", "on"])
def test_a_bad_commit_mode_is_refused_by_the_processor_and_by_configure(
    psycopg_installed: None, tmp_path: Path, provider: TracerProvider, value: str
) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    with pytest.raises(ConfigurationError) as caught:
        PostgresSpanProcessor(DOWN_DSN, postgres_commit=value)
    assert_names_value_and_choices(caught.value, value, "postgres_commit")
    with pytest.raises(ConfigurationError) as caught:
        spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, postgres=DOWN_DSN, postgres_commit=value)
    assert_names_value_and_choices(caught.value, value, "postgres_commit")


def test_a_bad_commit_mode_is_refused_even_without_a_dsn(
    psycopg_installed: None, tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPANREPLAY_POSTGRES_DSN", raising=False)
    with pytest.raises(ConfigurationError) as caught:
        spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, postgres_commit="asnyc")
    assert_names_value_and_choices(caught.value, "asnyc", "postgres_commit")
    config = spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, postgres_commit="async")
    assert config.postgres_processor is None


def test_a_bad_environment_value_is_refused_naming_the_variable(
    psycopg_installed: None, tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPANREPLAY_POSTGRES_DSN", DOWN_DSN)
    monkeypatch.setenv("SPANREPLAY_POSTGRES_COMMIT", "fast")
    with pytest.raises(ConfigurationError) as caught:
        spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider)
    assert_names_value_and_choices(caught.value, "fast", "SPANREPLAY_POSTGRES_COMMIT")


def test_a_commit_mode_that_contradicts_the_processor_given_is_refused(
    psycopg_installed: None, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    processor = PostgresSpanProcessor(DOWN_DSN)
    try:
        with pytest.raises(ConfigurationError, match=r"PostgresSpanProcessor\(dsn, postgres_commit='async'\)"):
            spanreplay.configure(
                trace_dir=tmp_path, tracer_provider=provider, postgres=processor, postgres_commit="async"
            )
    finally:
        processor.shutdown()

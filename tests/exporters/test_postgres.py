"""Runs kept in Postgres: schema, the per-step exporter, the loader source, export, prune.

Every test runs against a real server (127.0.0.1:5432, or SPANREPLAY_TEST_PG_DSN
in URL form) in a schema of its own, dropped afterwards. Without a server the
tests skip, except in CI (CI=true), where they fail: a CI run that silently
skipped them would claim coverage it does not have.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.postgres import with_schema
from spanreplay import RunNotFoundError

# A port nothing listens on: connections are refused at once, as from a database that is down.
DOWN_DSN = "postgresql://postgres@127.0.0.1:1/test"


def wait_for_error(caplog: pytest.LogCaptureFixture, seconds: float = 10) -> None:
    """Until spanreplay logged an error, or ``seconds`` passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(r.name == "spanreplay" and r.levelno >= logging.ERROR for r in caplog.records):
            return
        time.sleep(0.05)


def query(dsn: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


# A wait no commit on a loaded test machine reaches: every boundary returns after its commit.
GENEROUS_WAIT = "60"


@pytest.fixture
def recording(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str]:
    """spanreplay writing this test's runs to a trace directory and to Postgres, per step."""
    monkeypatch.setenv("SPANREPLAY_POSTGRES_WAIT", GENEROUS_WAIT)
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn)
    return directory, pg_dsn


def rich_agent(fail: bool = False) -> str:
    """An agent whose steps cover what a row must carry back exactly."""
    found = spanreplay.boundary("tool", "search", {"q": "refund", "z": 1, "a": [1.5, None]}, lambda: {"z": 2, "a": 1})
    spanreplay.boundary("tool", "nul", {"text": "a\u0000b"}, lambda: "x\u0000y")  # JSONB cannot hold U+0000
    long_text = "é€𝄞" * 1500  # above the chunk threshold: an array of chunks in the span
    spanreplay.boundary("tool", "long", {"t": long_text}, lambda: long_text[::-1])

    def outer() -> Any:
        return spanreplay.boundary("clock", "now", None, lambda: 1_700_000_000.25)

    spanreplay.boundary("tool", "outer", {}, outer)
    reply = spanreplay.boundary(
        "model",
        "claude-x",
        {"messages": [found]},
        lambda: {"content": "hi", "n": 2**53 + 1, "f": 1e100},
        attributes={
            "gen_ai.usage.input_tokens": 120,
            "gen_ai.usage.output_tokens": 30,
            "gen_ai.usage.cost": 0.0125,
            "tags": ("a", "b"),
        },
    )
    with contextlib.suppress(KeyError):
        spanreplay.boundary("tool", "refund", {"id": 7}, lambda: _raise(KeyError("order 7")))
    if fail:
        raise RuntimeError("the agent gave up")
    return str(reply["content"])


def _raise(exc: BaseException) -> Any:
    raise exc


# --- schema ------------------------------------------------------------------------------


def test_upgrade_applies_each_migration_once_even_from_several_processes_at_once(pg_server: str) -> None:
    import psycopg

    from spanreplay.postgres import LATEST, upgrade, version

    schema = f"sr_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = with_schema(pg_server, schema)
    try:
        assert version(dsn) == 0
        results: list[int] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                results.append(len(upgrade(dsn)))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        # Each migration is its own transaction: which process applies which one depends on
        # who takes the lock first, but every migration is applied exactly once.
        assert len(results) == 4
        assert sum(results) == LATEST
        assert version(dsn) == LATEST
        applied = query(dsn, "SELECT version FROM spanreplay_migrations ORDER BY version")
        assert applied == [(v,) for v in range(1, LATEST + 1)]
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_the_schema_has_the_step_columns_the_unique_step_key_and_the_run_totals(pg_dsn: str) -> None:
    columns = dict(query(
        pg_dsn,
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_name = 'agent_steps' AND table_schema = current_schema()",
    ))  # fmt: skip
    assert columns["id"] == "bigint"
    assert columns["input"] == columns["output"] == columns["error"] == "jsonb"
    assert columns["created_at"] == "timestamp with time zone"
    for name in ("run_id", "step_number", "step_type", "key", "call_id", "tokens_in", "tokens_out", "cost",
                 "trace_id", "span_id", "schema_version"):  # fmt: skip
        assert name in columns
    indexes = query(
        pg_dsn, "SELECT indexdef FROM pg_indexes WHERE tablename = 'agent_steps' AND schemaname = current_schema()"
    )
    assert any("UNIQUE" in d and "(run_id, step_number, run_day)" in d for (d,) in indexes)
    run_columns = {name for (name,) in query(
        pg_dsn,
        "SELECT column_name FROM information_schema.columns "
        "WHERE table_name = 'agent_runs' AND table_schema = current_schema()",
    )}  # fmt: skip
    assert {
        "status",
        "agent",
        "started_at",
        "ended_at",
        "steps_recorded",
        "tokens_in",
        "tokens_out",
        "cost",
    } <= run_columns


# --- recording ---------------------------------------------------------------------------


def test_each_step_is_committed_before_its_boundary_returns(recording: tuple[Path, str]) -> None:
    _, dsn = recording
    seen_inside: list[int] = []
    with spanreplay.record(agent="ahead") as run:
        for i in range(3):
            spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: i)
            # Another session, while the run is still going: the row is already committed.
            seen_inside.append(len(query(dsn, "SELECT 1 FROM agent_steps WHERE run_id = %s", (run.run_id,))))
        status_inside = query(dsn, "SELECT status FROM agent_runs WHERE run_id = %s", (run.run_id,))
    assert seen_inside == [1, 2, 3]
    assert status_inside == [("running",)]
    assert query(dsn, "SELECT status, steps_recorded, steps_started FROM agent_runs") == [("ok", 3, 3)]


def test_the_event_log_from_postgres_equals_the_one_from_the_trace_file(recording: tuple[Path, str]) -> None:
    directory, dsn = recording
    with spanreplay.record(agent="rich") as run:
        rich_agent()
    from_file = spanreplay.load(directory, run.run_id)
    from_postgres = spanreplay.load(dsn, run.run_id)
    assert len(from_file) == 7
    assert list(from_postgres) == list(from_file)
    assert from_postgres.run == from_file.run
    assert from_postgres == from_file
    assert spanreplay.runs(dsn) == spanreplay.runs(directory)
    # The queryable copies: JSONB where it can hold the value, the totals from the rows.
    rows = dict(query(dsn, "SELECT key, input FROM agent_steps WHERE run_id = %s", (run.run_id,)))
    assert rows["search"] == {"q": "refund", "z": 1, "a": [1.5, None]}
    assert rows["nul"] is None
    totals = query(dsn, "SELECT steps_recorded, steps_failed, tokens_in, tokens_out, cost FROM agent_runs")
    assert totals == [(7, 1, 120, 30, 0.0125)]


def test_replaying_from_postgres_runs_the_agent_against_the_recording(recording: tuple[Path, str]) -> None:
    directory, dsn = recording
    with spanreplay.record(agent="rich") as recorded:
        rich_agent()
    with spanreplay.replay(dsn, recorded.run_id) as from_postgres:
        assert rich_agent() == "hi"
    with spanreplay.replay(directory, recorded.run_id) as from_file:
        assert rich_agent() == "hi"
    assert from_postgres.outcome == from_file.outcome == "completed"


def test_a_recorded_failure_reproduces_from_postgres(recording: tuple[Path, str]) -> None:
    _, dsn = recording
    with pytest.raises(RuntimeError), spanreplay.record(agent="rich") as recorded:
        rich_agent(fail=True)
    log = spanreplay.load(dsn, recorded.run_id)
    assert log.run.status == "error"
    assert log.run.error is not None
    assert log.run.error.message == "the agent gave up"
    with pytest.raises(RuntimeError, match="the agent gave up"), spanreplay.replay(dsn, recorded.run_id) as replayed:
        rich_agent(fail=True)
    assert replayed.outcome == "reproduced"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**63 - 1)
        | st.floats(allow_nan=False)
        | st.text(alphabet=st.characters(codec="utf-8")),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
        max_leaves=20,
    )
)
@example(value={"ApiKey": []})
def test_any_json_payload_comes_back_from_postgres_byte_for_byte(pg_dsn: str, tmp_path: Path, value: Any) -> None:
    # Each value gets its own provider and pool, closed before Hypothesis draws the next:
    # psycopg_pool calls the global random() when it connects, in its own thread, and a
    # change to the global random state while a value is drawn is an error under Hypothesis.
    # Masking is off: this is about storage, and a drawn field named "ApiKey" or a
    # drawn email would otherwise come back masked, as it should.
    directory = tmp_path / "traces"
    provider = TracerProvider()
    spanreplay.configure(
        trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn, masking=False
    )
    try:
        with spanreplay.record(agent="any") as run:
            spanreplay.boundary("tool", "echo", {"v": value}, lambda: value)
        from_postgres = spanreplay.load(pg_dsn, run.run_id)
    finally:
        provider.shutdown()
    assert from_postgres == spanreplay.load(directory, run.run_id)
    (event,) = from_postgres
    assert event.output_json == orjson.dumps(value)


def test_batched_mode_commits_on_flush_and_equals_the_file(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    processor = PostgresSpanProcessor(pg_dsn, batch=True, flush_interval=60, batch_size=10_000)
    spanreplay.configure(
        trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True, postgres=processor
    )
    with spanreplay.record(agent="batched") as run:
        for i in range(50):
            spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: i * i)
    # Nothing is due yet (a minute's interval, a large batch): the rows wait in memory.
    assert query(pg_dsn, "SELECT count(*) FROM agent_steps") == [(0,)]
    assert processor.pending == 52  # the run's start and end, and 50 steps
    assert processor.force_flush(10_000)
    assert query(pg_dsn, "SELECT count(*) FROM agent_steps") == [(50,)]
    assert spanreplay.load(pg_dsn, run.run_id) == spanreplay.load(tmp_path / "traces", run.run_id)
    assert processor.stats.steps_written == 50


def test_batched_mode_writes_what_is_queued_when_the_provider_shuts_down(tmp_path: Path, pg_dsn: str) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    provider = TracerProvider()
    processor = PostgresSpanProcessor(pg_dsn, batch=True, flush_interval=60, batch_size=10_000)
    spanreplay.configure(
        trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True, postgres=processor
    )
    with spanreplay.record(agent="batched") as run:
        for i in range(20):
            spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: i)
    provider.shutdown()
    assert query(pg_dsn, "SELECT status, steps_recorded FROM agent_runs WHERE run_id = %s", (run.run_id,)) == [
        ("ok", 20)
    ]


def until(condition: Any, seconds: float = 60) -> bool:
    """Whether ``condition()`` came true within ``seconds`` (a bound for a stuck test, not a measure)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def _batched_far_bounds(pg_dsn: str, directory: Path, provider: TracerProvider) -> Any:
    """Batches of 5, configured: the writer's own bounds and the boundary's wait far off,
    so only a lock the test takes holds the writer back."""
    from spanreplay.postgres import PostgresSpanProcessor

    processor = PostgresSpanProcessor(
        pg_dsn, batch=True, batch_size=5, flush_interval=0.01, timeout=120, postgres_wait=120
    )
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=processor)
    return processor


def test_a_batched_writer_that_falls_behind_holds_the_agent_at_two_batches_and_every_row_lands(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    import psycopg

    directory = tmp_path / "traces"
    processor = _batched_far_bounds(pg_dsn, directory, provider)
    assert processor.high_water == 10
    done: list[int] = []
    run_ids: list[str] = []

    def agent() -> None:
        with spanreplay.record(agent="behind") as run:
            run_ids.append(run.run_id)
            for i in range(40):
                spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: {"i": i, "pad": "x" * 1000})
                done.append(i)

    blocker = psycopg.connect(pg_dsn)
    thread = threading.Thread(target=agent)
    try:
        # Another session holds the table: the writer's inserts wait, as behind a server under load.
        blocker.execute("LOCK TABLE agent_steps IN ACCESS EXCLUSIVE MODE")
        thread.start()
        assert until(lambda: processor.stats.held >= 1), "the agent was never held back"
        # No step row can be committed, so the agent stops where the backlog passed high_water:
        # the boundary whose row made it high_water + 1 has not returned.
        assert processor.pending <= processor.high_water + 1
        assert len(done) <= processor.high_water
        assert thread.is_alive()
    finally:
        blocker.rollback()  # the writer catches up
        blocker.close()
        thread.join(120)
    assert not thread.is_alive()
    assert len(done) == 40
    assert processor.force_flush(30_000)
    (run_id,) = run_ids
    assert query(pg_dsn, "SELECT count(*) FROM agent_steps WHERE run_id = %s", (run_id,)) == [(40,)]
    assert spanreplay.load(pg_dsn, run_id) == spanreplay.load(directory, run_id)
    assert (processor.stats.late, processor.stats.dropped) == (0, 0)


def test_agent_threads_held_back_together_all_go_on_once_the_writer_catches_up(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    import psycopg

    directory = tmp_path / "traces"
    processor = _batched_far_bounds(pg_dsn, directory, provider)
    agents, steps = 4, 25
    run_ids: list[str] = []

    def agent(n: int) -> None:
        with spanreplay.record(agent=f"behind-{n}") as run:
            run_ids.append(run.run_id)
            for i in range(steps):
                spanreplay.boundary("tool", "step", {"n": n, "i": i}, lambda i=i: i)

    blocker = psycopg.connect(pg_dsn)
    threads = [threading.Thread(target=agent, args=(n,)) for n in range(agents)]
    try:
        blocker.execute("LOCK TABLE agent_steps IN ACCESS EXCLUSIVE MODE")
        for thread in threads:
            thread.start()
        # Every thread ends up held: each adds at most the one row its held boundary queued.
        assert until(lambda: processor.stats.held >= agents), "the agent threads were not all held back"
        assert processor.pending <= processor.high_water + agents
        assert all(thread.is_alive() for thread in threads)
    finally:
        blocker.rollback()
        blocker.close()
        for thread in threads:
            thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert processor.force_flush(30_000)
    assert query(pg_dsn, "SELECT count(*) FROM agent_steps") == [(agents * steps,)]
    for run_id in run_ids:
        assert spanreplay.load(pg_dsn, run_id) == spanreplay.load(directory, run_id)
    assert (processor.stats.late, processor.stats.dropped) == (0, 0)


def test_a_batched_boundary_waits_for_the_writer_at_most_postgres_wait_and_keeps_its_row_queued(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    from spanreplay.postgres import PostgresSpanProcessor

    directory = tmp_path / "traces"
    processor = PostgresSpanProcessor(
        pg_dsn, batch=True, batch_size=5, flush_interval=0.01, timeout=120, postgres_wait=0.01
    )
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=processor)
    caplog.set_level(logging.WARNING, logger="spanreplay")
    blocker = psycopg.connect(pg_dsn)
    try:
        blocker.execute("LOCK TABLE agent_steps IN ACCESS EXCLUSIVE MODE")
        with spanreplay.record(agent="late") as run:
            for i in range(30):
                spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: i)
        # Every boundary over high_water waited in vain and returned; its row is still queued, not dropped.
        assert processor.stats.late >= 30 - processor.high_water
        assert processor.pending >= 30
    finally:
        blocker.rollback()
        blocker.close()
    assert processor.force_flush(30_000)
    assert spanreplay.load(pg_dsn, run.run_id) == spanreplay.load(directory, run.run_id)
    assert processor.stats.dropped == 0
    logged = [r.getMessage() for r in caplog.records if r.name == "spanreplay" and r.levelno >= logging.WARNING]
    assert len([m for m in logged if "more slowly than the agent" in m]) == 1


def test_a_held_boundary_makes_a_batch_due_before_its_interval(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    # An hour's interval and batches larger than the backlog may grow: only a held boundary makes one due.
    processor = PostgresSpanProcessor(
        pg_dsn, batch=True, batch_size=100, flush_interval=3600, max_pending=10, postgres_wait=20
    )
    assert processor.high_water == 5
    spanreplay.configure(
        trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True, postgres=processor
    )
    with spanreplay.record(agent="due"):
        for i in range(7):
            spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: i)
        assert processor.pending <= processor.high_water
        # Committed with no flush, no full batch and the interval far off.
        assert query(pg_dsn, "SELECT count(*) FROM agent_steps")[0][0] >= 1
    assert processor.stats.held >= 1
    assert (processor.stats.late, processor.stats.dropped) == (0, 0)
    assert processor.force_flush(30_000)
    assert query(pg_dsn, "SELECT count(*) FROM agent_steps") == [(7,)]


def test_the_environment_variable_turns_the_exporter_on(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPANREPLAY_POSTGRES_DSN", pg_dsn)
    config = spanreplay.configure(trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True)
    assert config.postgres_processor is not None
    with spanreplay.record(agent="env") as run:
        spanreplay.boundary("random", "draw", None, lambda: 4)
    assert query(pg_dsn, "SELECT run_id, step_type FROM agent_steps") == [(run.run_id, "random")]


def test_configuring_again_without_postgres_stops_the_rows(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    spanreplay.configure(
        trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn
    )
    config = spanreplay.configure(trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True)
    assert config.postgres_processor is None
    with spanreplay.record(agent="quiet"):
        spanreplay.boundary("random", "draw", None, lambda: 4)
    assert query(pg_dsn, "SELECT count(*) FROM agent_steps") == [(0,)]


# --- a database that is down or slow ---------------------------------------------------------


def test_a_database_that_is_down_never_breaks_the_agent_and_export_fills_the_rows_in(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    from spanreplay.postgres import PostgresSpanProcessor
    from spanreplay.recording.postgres.backfill import export

    directory = tmp_path / "traces"
    processor = PostgresSpanProcessor(DOWN_DSN, timeout=0.5)
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=processor)
    caplog.set_level(logging.DEBUG, logger="spanreplay")
    started = time.monotonic()
    with spanreplay.record(agent="offline") as run:
        assert rich_agent() == "hi"
        for i in range(30):
            spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: i)
    elapsed = time.monotonic() - started
    # Bounded: the first boundary waits postgres_wait at most, the others not at all.
    assert elapsed < 3.0
    wait_for_error(caplog)  # the writer thread finds it in the background
    assert processor.stats.failures >= 1
    assert processor.stats.steps_written == 0
    errors = [r for r in caplog.records if r.name == "spanreplay" and r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "127.0.0.1:1" in errors[0].getMessage()
    assert "trace files keep every step" in errors[0].getMessage()
    assert not [r for r in caplog.records if r.name.startswith("psycopg") and r.levelno >= logging.WARNING]
    # The trace file has every step, and a later export puts them all in Postgres.
    from_file = spanreplay.load(directory, run.run_id)
    assert len(from_file) == 37
    result = export(directory, pg_dsn)
    assert result.steps_added == 37
    assert spanreplay.load(pg_dsn, run.run_id) == from_file


def test_a_slow_database_delays_a_step_at_most_postgres_wait_and_the_rows_arrive_later(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    import psycopg

    from spanreplay.postgres import PostgresSpanProcessor

    directory = tmp_path / "traces"
    processor = PostgresSpanProcessor(pg_dsn, timeout=0.5)
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=processor)
    caplog.set_level(logging.WARNING, logger="spanreplay")
    blocker = psycopg.connect(pg_dsn)
    try:
        with spanreplay.record(agent="slow") as run:
            spanreplay.boundary("tool", "before", {}, lambda: 1)
            # Another session holds the table: inserts wait on its lock, as on a server under load.
            blocker.execute("LOCK TABLE agent_steps IN ACCESS EXCLUSIVE MODE")
            latencies = []
            for i in range(10):
                start = time.monotonic()
                spanreplay.boundary("tool", "during", {"i": i}, lambda i=i: i)
                latencies.append(time.monotonic() - start)
            blocker.rollback()  # the server is fast again
            spanreplay.boundary("tool", "after", {}, lambda: 2)
        assert max(latencies) < processor.postgres_wait + 1.0  # postgres_wait bounds the one step that waited
        assert sum(latencies) < 2.0  # and the others did not wait at all
        assert processor.force_flush(10_000)
    finally:
        blocker.close()
    assert spanreplay.load(pg_dsn, run.run_id) == spanreplay.load(directory, run.run_id)
    assert processor.stats.late == 1
    logged = [r.getMessage() for r in caplog.records if r.name == "spanreplay" and r.levelno >= logging.WARNING]
    assert len([m for m in logged if "postgres_wait" in m]) == 1


# --- crashes and concurrency --------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import sys, time
    from opentelemetry.sdk.trace import TracerProvider
    import spanreplay

    dsn, trace_dir, run_id, steps, hang = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=TracerProvider(), postgres=dsn)
    with spanreplay.record(agent="child", run_id=run_id):
        for i in range(steps):
            spanreplay.boundary("tool", "step", {"i": i}, lambda: {"i": i, "pad": "x" * 300})
            print(i + 1, flush=True)
        if hang == "hang":
            spanreplay.boundary("tool", "hang", {}, lambda: time.sleep(120))
    """
)


def _child(dsn: str, trace_dir: Path, run_id: str, steps: int, hang: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, dsn, str(trace_dir), run_id, str(steps), "hang" if hang else "end"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SPANREPLAY_POSTGRES_WAIT": GENEROUS_WAIT},
    )


def _run_id(when: datetime | None = None) -> str:
    when = when or datetime.now(UTC)
    return f"run_{when:%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"


@pytest.mark.slow
def test_a_process_killed_mid_run_leaves_every_completed_step_committed_and_the_run_crashed(
    tmp_path: Path, pg_dsn: str
) -> None:
    run_id = _run_id()
    child = _child(pg_dsn, tmp_path, run_id, 12, hang=True)
    assert child.stdout is not None
    lines = [child.stdout.readline() for _ in range(12)]
    assert lines[-1].strip() == "12"
    time.sleep(0.2)  # inside the hanging step
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    child.stdout.close()
    log = spanreplay.load(pg_dsn, run_id)
    assert log.run.status == "crashed"
    assert [e.seq for e in log] == list(range(1, 13))
    assert log == spanreplay.load(tmp_path, run_id)
    (summary,) = spanreplay.runs(pg_dsn)
    assert (summary.status, summary.steps) == ("crashed", 12)


@pytest.mark.slow
def test_a_kill_at_any_point_keeps_every_step_whose_boundary_returned(tmp_path: Path, pg_dsn: str) -> None:
    run_id = _run_id()
    child = _child(pg_dsn, tmp_path, run_id, 100_000, hang=False)
    assert child.stdout is not None
    returned = 0
    while returned < 40:
        returned = int(child.stdout.readline())
    child.send_signal(signal.SIGKILL)  # somewhere in the middle of the next steps
    child.wait(10)
    child.stdout.close()
    log = spanreplay.load(pg_dsn, run_id)
    seqs = [e.seq for e in log]
    assert seqs == list(range(1, len(seqs) + 1))  # no hole: steps commit in order
    assert len(seqs) >= returned
    assert log.run.status == "crashed"
    # The file is written first: it holds the same steps, or one more that Postgres never got.
    file_events = list(spanreplay.load(tmp_path, run_id))
    assert file_events[: len(seqs)] == list(log)
    assert len(file_events) - len(seqs) in (0, 1)


@pytest.mark.slow
def test_eight_agent_processes_writing_at_once_lose_no_row(tmp_path: Path, pg_dsn: str) -> None:
    run_ids = [_run_id() for _ in range(8)]
    children = [_child(pg_dsn, tmp_path / f"p{n}", run_id, 60, hang=False) for n, run_id in enumerate(run_ids)]
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        assert out.split()[-1] == "60"
    counts = dict(query(pg_dsn, "SELECT run_id, count(*) FROM agent_steps GROUP BY run_id"))
    assert counts == dict.fromkeys(run_ids, 60)
    assert query(pg_dsn, "SELECT DISTINCT status, steps_recorded, steps_started FROM agent_runs") == [("ok", 60, 60)]
    for n, run_id in enumerate(run_ids):
        assert spanreplay.load(pg_dsn, run_id) == spanreplay.load(tmp_path / f"p{n}", run_id)


def test_eight_agent_threads_sharing_a_small_pool_lose_no_row(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    processor = PostgresSpanProcessor(pg_dsn, pool_size=3)
    spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, raise_internal_errors=True, postgres=processor)
    run_ids: list[str] = []
    errors: list[BaseException] = []
    gate = threading.Barrier(8)

    def agent(n: int) -> None:
        try:
            gate.wait()
            with spanreplay.record(agent=f"agent-{n}") as run:
                run_ids.append(run.run_id)
                for i in range(40):
                    spanreplay.boundary("tool", "step", {"agent": n, "i": i}, lambda i=i: i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # On a loaded machine a boundary may outwait postgres_wait and leave its row queued: the
    # rows are all written once the queue drains, which is what this test is about.
    assert processor.force_flush()
    assert processor.stats.failures == 0
    assert query(pg_dsn, "SELECT count(*), count(DISTINCT run_id) FROM agent_steps") == [(320, 8)]
    for run_id in run_ids:
        assert spanreplay.load(pg_dsn, run_id) == spanreplay.load(tmp_path, run_id)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_process_forked_after_configure_writes_through_a_pool_of_its_own(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    config = spanreplay.configure(
        trace_dir=tmp_path, tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn
    )
    with spanreplay.record(agent="parent"):
        spanreplay.boundary("tool", "t", {}, lambda: 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork of a process with threads
        pid = os.fork()
    if pid == 0:  # the child: record, then leave without running the parent's exit handlers
        code = 1
        try:
            with spanreplay.record(agent="child"):
                for i in range(5):
                    spanreplay.boundary("tool", "t", {"i": i}, lambda i=i: i)
            assert config.postgres_processor is not None
            code = 0 if config.postgres_processor.stats.steps_written == 5 else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's own connections were left alone by the child.
    with spanreplay.record(agent="parent-again"):
        spanreplay.boundary("tool", "t", {}, lambda: 0)
    assert config.postgres_processor is not None
    assert config.postgres_processor.stats.failures == 0
    rows = query(pg_dsn, "SELECT agent, status, steps_recorded FROM agent_runs ORDER BY agent")
    assert rows == [("child", "ok", 5), ("parent", "ok", 1), ("parent-again", "ok", 1)]


# --- export ---------------------------------------------------------------------------------


def _record_runs(directory: Path, provider: TracerProvider, count: int) -> list[str]:
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    ids = []
    for n in range(count):
        with spanreplay.record(agent=f"a{n}") as run:
            rich_agent()
        ids.append(run.run_id)
    return ids


def test_a_retried_export_writes_no_duplicate(pg_dsn: str, tmp_path: Path, provider: TracerProvider) -> None:
    from spanreplay.recording.postgres.backfill import export

    directory = tmp_path / "traces"
    ids = _record_runs(directory, provider, 3)
    first = export(directory, pg_dsn)
    assert (sorted(first.runs), first.steps_seen, first.steps_added) == (sorted(ids), 21, 21)
    before = query(pg_dsn, "SELECT * FROM agent_runs ORDER BY run_id")
    second = export(directory, pg_dsn)
    assert (second.steps_seen, second.steps_added, second.steps_present) == (21, 0, 21)
    assert query(pg_dsn, "SELECT count(*) FROM agent_steps") == [(21,)]
    assert query(pg_dsn, "SELECT * FROM agent_runs ORDER BY run_id") == before  # totals not counted twice
    for run_id in ids:
        assert spanreplay.load(pg_dsn, run_id) == spanreplay.load(directory, run_id)


def test_export_of_a_source_that_holds_every_span_twice_adds_each_step_once(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.recording.postgres.backfill import export

    directory = tmp_path / "traces"
    (run_id,) = _record_runs(directory, provider, 1)
    twice = tmp_path / "twice.jsonl"
    text = (directory / f"{run_id}.jsonl").read_bytes()
    twice.write_bytes(text + text)  # what an exporter retry leaves in a Collector file
    result = export(twice, pg_dsn, batch_size=3)
    assert (result.steps_seen, result.steps_added) == (14, 7)
    assert query(pg_dsn, "SELECT steps_recorded FROM agent_runs") == [(7,)]
    assert spanreplay.load(pg_dsn, run_id) == spanreplay.load(directory, run_id)


def test_export_from_a_jaeger_trace_gives_the_same_run(pg_dsn: str, tmp_path: Path, provider: TracerProvider) -> None:
    from spanreplay.recording.postgres.backfill import export

    directory = tmp_path / "traces"
    (run_id,) = _record_runs(directory, provider, 1)
    log = spanreplay.load(directory, run_id)
    jaeger = tmp_path / "jaeger.json"
    jaeger.write_bytes(orjson.dumps(_as_jaeger(directory / f"{run_id}.jsonl")))
    export(jaeger, pg_dsn)
    from_postgres = spanreplay.load(pg_dsn, run_id)
    assert [(e.seq, e.call_id, e.input_json, e.output_json, e.error) for e in from_postgres] == [
        (e.seq, e.call_id, e.input_json, e.output_json, e.error) for e in log
    ]
    assert from_postgres.run.status == "ok"


def _as_jaeger(path: Path) -> dict[str, Any]:
    """The run's OTLP/JSON lines rewritten the way Jaeger's query API returns them."""
    spans = []
    for line in path.read_bytes().splitlines():
        span = orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        if "endTimeUnixNano" not in span:
            continue  # Jaeger only ever receives ended spans
        tags = []
        for attr in span["attributes"]:
            value = attr["value"]
            if "stringValue" in value:
                tags.append({"key": attr["key"], "type": "string", "value": value["stringValue"]})
            elif "intValue" in value:
                tags.append({"key": attr["key"], "type": "int64", "value": int(value["intValue"])})
            elif "doubleValue" in value:
                tags.append({"key": attr["key"], "type": "float64", "value": value["doubleValue"]})
            elif "boolValue" in value:
                tags.append({"key": attr["key"], "type": "bool", "value": value["boolValue"]})
            else:  # arrays: Jaeger stores them as JSON text
                items = [next(iter(v.values())) for v in value["arrayValue"]["values"]]
                tags.append({"key": attr["key"], "type": "string", "value": orjson.dumps(items).decode()})
        start_us = int(span["startTimeUnixNano"]) // 1000
        spans.append(
            {
                "traceID": span["traceId"],
                "spanID": span["spanId"],
                "operationName": span["name"],
                "references": [{"refType": "CHILD_OF", "traceID": span["traceId"], "spanID": span["parentSpanId"]}]
                if span.get("parentSpanId")
                else [],
                "startTime": start_us,
                "duration": int(span["endTimeUnixNano"]) // 1000 - start_us,
                "tags": tags,
                "processID": "p1",
            }
        )
    return {
        "data": [
            {"traceID": spans[0]["traceID"], "spans": spans, "processes": {"p1": {"serviceName": "agent", "tags": []}}}
        ]
    }


# --- the loader source -----------------------------------------------------------------------


def test_loading_an_unknown_run_names_the_runs_the_database_holds(recording: tuple[Path, str]) -> None:
    _, dsn = recording
    with spanreplay.record(agent="one") as run:
        spanreplay.boundary("random", "draw", None, lambda: 1)
    with pytest.raises(RunNotFoundError, match=r"Run run_nope is not in postgresql://postgres@127\.0\.0\.1") as info:
        spanreplay.load(dsn, "run_nope")
    assert run.run_id in str(info.value)
    assert info.value.available == (run.run_id,)
    assert spanreplay.load(dsn).run_id == run.run_id  # the only run needs no id


def test_a_database_without_the_tables_says_to_run_db_upgrade(pg_server: str) -> None:
    from spanreplay.postgres import PostgresError

    schema = f"sr_test_{uuid.uuid4().hex[:12]}"  # never created: an empty search_path
    with pytest.raises(PostgresError, match="spanreplay db upgrade"):
        spanreplay.runs(with_schema(pg_server, schema))


def test_recording_into_a_database_without_the_tables_logs_the_upgrade_command_once(
    pg_server: str, tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    dsn = with_schema(pg_server, f"sr_test_{uuid.uuid4().hex[:12]}")  # no such schema: no tables
    processor = PostgresSpanProcessor(dsn, timeout=0.5)
    spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, raise_internal_errors=True, postgres=processor)
    caplog.set_level(logging.WARNING, logger="spanreplay")
    with spanreplay.record(agent="early") as run:
        for i in range(5):
            spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: i)
    assert len(spanreplay.load(tmp_path, run.run_id)) == 5
    wait_for_error(caplog)  # the writer thread finds it in the background
    errors = [r.getMessage() for r in caplog.records if r.name == "spanreplay" and r.levelno >= logging.ERROR]
    assert len(errors) == 1
    assert "The spanreplay tables are missing: run `spanreplay db upgrade postgresql://" in errors[0]


def test_a_completed_run_with_a_lost_step_row_names_the_seq_and_the_export_that_fills_it(
    recording: tuple[Path, str],
) -> None:
    from spanreplay import TraceFormatError

    directory, dsn = recording
    with spanreplay.record(agent="holey") as run:
        for i in range(4):
            spanreplay.boundary("tool", "step", {"i": i}, lambda i=i: i)
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM agent_steps WHERE run_id = %s AND step_number = 3", (run.run_id,))
    with pytest.raises(
        TraceFormatError, match=rf"Run {run.run_id} in postgresql://\S+ is missing the steps at seq 3 of 4"
    ):
        spanreplay.load(dsn, run.run_id)
    from spanreplay.recording.postgres.backfill import export

    assert export(directory, dsn).steps_added == 1
    assert spanreplay.load(dsn, run.run_id) == spanreplay.load(directory, run.run_id)


def test_an_error_payload_edited_in_the_table_is_refused_naming_the_run_and_seq(recording: tuple[Path, str]) -> None:
    from spanreplay import TraceFormatError

    _, dsn = recording
    with spanreplay.record(agent="edited") as run, contextlib.suppress(KeyError):
        spanreplay.boundary("tool", "lookup", {}, lambda: _raise(KeyError("gone")))
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE agent_steps SET error_text = %s WHERE run_id = %s", ("not json", run.run_id))
    with pytest.raises(TraceFormatError, match=rf"run {run.run_id} seq 1"):
        spanreplay.load(dsn, run.run_id)


def test_a_dsn_libpq_cannot_parse_is_refused_when_configuring(
    psycopg_installed: None, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay import ConfigurationError

    with pytest.raises(
        ConfigurationError, match=r'The Postgres DSN is not valid \(invalid URI query parameter: "colour"\)'
    ):
        spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, postgres="postgresql://h/db?colour=red")


def test_an_unreachable_database_is_one_sentence_naming_it_without_its_password(psycopg_installed: None) -> None:
    from spanreplay.postgres import PostgresError

    with pytest.raises(PostgresError, match=r"Cannot connect to postgresql://postgres@127\.0\.0\.1:1/test") as info:
        spanreplay.runs("postgresql://postgres:s3cret@127.0.0.1:1/test")
    assert "s3cret" not in str(info.value)


def test_the_cli_lists_shows_and_exports_runs_in_postgres(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.cli import cli

    directory = tmp_path / "traces"
    (run_id,) = _record_runs(directory, provider, 1)
    runner = CliRunner()
    exported = runner.invoke(cli, ["export", str(directory), pg_dsn])
    assert exported.exit_code == 0, exported.output
    assert "1 run(s)" in exported.output
    assert "7 step(s) added, 0 already there" in exported.output
    again = runner.invoke(cli, ["export", str(directory), pg_dsn])
    assert "0 step(s) added, 7 already there" in again.output
    listed = runner.invoke(cli, ["runs", pg_dsn, "--json"])
    assert listed.exit_code == 0, listed.output
    assert [r["run_id"] for r in orjson.loads(listed.output)] == [run_id]
    shown = runner.invoke(cli, ["show", pg_dsn, run_id])
    assert shown.exit_code == 0, shown.output
    assert "refund" in shown.output
    status = runner.invoke(cli, ["db", "status", pg_dsn])
    assert status.exit_code == 0
    assert "up to date" in status.output


def test_db_upgrade_on_the_command_line_creates_the_tables_and_is_safe_to_repeat(pg_server: str) -> None:
    import psycopg

    from spanreplay.cli import cli

    schema = f"sr_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = with_schema(pg_server, schema)
    try:
        runner = CliRunner()
        before = runner.invoke(cli, ["db", "status", dsn])
        assert before.exit_code == 1
        assert "has no spanreplay tables" in before.output
        first = runner.invoke(cli, ["db", "upgrade", dsn])
        assert first.exit_code == 0
        assert "applied migration 1" in first.output
        second = runner.invoke(cli, ["db", "upgrade", dsn])
        assert second.exit_code == 0
        assert "nothing to do" in second.output
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


# --- prune ------------------------------------------------------------------------------------


def _dated_run(directory: Path, days_ago: float, outcome: str) -> str:
    """A run recorded with an id dated ``days_ago``: ok, error, or crashed (its root never ended)."""
    run_id = _run_id(datetime.now(UTC) - timedelta(days=days_ago))
    try:
        with spanreplay.record(agent="dated", run_id=run_id):
            spanreplay.boundary("tool", "t", {"n": 1}, lambda: 1)
            if outcome == "error":
                raise ValueError("bad")
    except ValueError:
        pass
    if outcome == "crashed":
        path = directory / f"{run_id}.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))  # the ended copy of the run span never got written
    return run_id


@pytest.mark.usefixtures("edge_date_now")
def test_prune_removes_exactly_the_runs_past_their_retention_in_postgres(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.cli import cli
    from spanreplay.recording.postgres.backfill import export

    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    keep = [_dated_run(directory, 3, "ok"), _dated_run(directory, 30, "error"), _dated_run(directory, 60, "crashed")]
    drop = [_dated_run(directory, 10, "ok"), _dated_run(directory, 100, "error"), _dated_run(directory, 95, "crashed")]
    export(directory, pg_dsn)
    assert {r.run_id: r.status for r in spanreplay.runs(pg_dsn)}[drop[2]] == "crashed"
    runner = CliRunner()
    dry = runner.invoke(cli, ["prune", pg_dsn, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert {line.split()[2] for line in dry.output.splitlines() if line.startswith("would remove")} == set(drop)
    assert len(spanreplay.runs(pg_dsn)) == 6
    done = runner.invoke(cli, ["prune", pg_dsn])
    assert done.exit_code == 0, done.output
    assert {line.split()[1] for line in done.output.splitlines() if line.startswith("removed ")} == set(drop)
    assert "Removed 3 run(s) (1 ok older than 7d, 2 failed or crashed older than 90d); kept 3." in done.output
    assert {r.run_id for r in spanreplay.runs(pg_dsn)} == set(keep)
    assert query(pg_dsn, "SELECT DISTINCT run_id FROM agent_steps ORDER BY run_id") == [(r,) for r in sorted(keep)]


def test_upgrade_brings_a_version_1_database_to_the_latest_and_keeps_its_runs(pg_server: str) -> None:
    import psycopg

    from spanreplay.postgres import LATEST, MIGRATIONS, upgrade, version
    from spanreplay.sources.postgres.schema import MIGRATIONS_TABLE

    schema = f"sr_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    dsn = with_schema(pg_server, schema)
    try:
        # A database left at version 1 by an earlier release, holding one run.
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(
                f"CREATE TABLE {MIGRATIONS_TABLE} (version INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            conn.execute(MIGRATIONS[0].sql)
            conn.execute(f"INSERT INTO {MIGRATIONS_TABLE} (version, name) VALUES (1, 'v1')")
            conn.execute(
                "INSERT INTO agent_runs (run_id, status, schema_version) VALUES (%s, 'ok', 1)",
                ("run_20260101_000000_00000001",),
            )
        assert version(dsn) == 1
        applied = upgrade(dsn)
        assert [m.version for m in applied] == list(range(2, LATEST + 1))
        assert version(dsn) == LATEST
        with psycopg.connect(dsn) as conn:
            row = conn.execute("SELECT run_id, masking FROM agent_runs").fetchone()
        assert row == ("run_20260101_000000_00000001", None)
    finally:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

"""The Postgres exporter against a server that freezes, slows down, is down, or refuses a row.

The server faults are done to a cluster each test starts itself (initdb in a
temporary directory, on a free port), never to the shared server: it is frozen
with SIGSTOP, slowed with a ``pg_sleep`` trigger, and stopped. The boundary
bounds are relative to ``postgres_wait``, with a margin for a busy machine.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.pg_cluster import Cluster, own_cluster, require_server_binaries

WAIT = 0.2
MARGIN = 1.5  # what a loaded machine may add to a bound; a blocked boundary takes many times more


@pytest.fixture
def cluster(psycopg_installed: None) -> Iterator[Cluster]:
    require_server_binaries()
    from spanreplay.postgres import upgrade

    with own_cluster() as started:
        upgrade(started.dsn)
        yield started


def query(dsn: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn, connect_timeout=5) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def timed_boundary(i: int) -> float:
    start = time.monotonic()
    spanreplay.boundary("tool", "step", {"i": i}, lambda: {"i": i})
    return time.monotonic() - start


def processor_for(dsn: str, directory: Path, provider: TracerProvider, **options: Any) -> Any:
    from spanreplay.postgres import PostgresSpanProcessor

    processor = PostgresSpanProcessor(dsn, postgres_wait=WAIT, **options)
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=processor)
    return processor


def test_a_frozen_server_holds_a_boundary_at_most_postgres_wait_and_gets_the_row_when_it_wakes(
    cluster: Cluster, tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "traces"
    processor = processor_for(cluster.dsn, directory, provider, timeout=1.0)
    caplog.set_level(logging.WARNING, logger="spanreplay")
    with spanreplay.record(agent="frozen") as run:
        timed_boundary(0)
        assert query(cluster.dsn, "SELECT count(*) FROM agent_steps") == [(1,)]  # written before it returned
        cluster.freeze()
        # A boundary that blocks on the frozen server fails the test instead of hanging it.
        safety = threading.Timer(15, cluster.thaw)
        safety.start()
        try:
            latencies = [timed_boundary(i) for i in range(1, 6)]
            time.sleep(2.0)  # frozen for longer than the writer's timeout
        finally:
            safety.cancel()
            cluster.thaw()
        timed_boundary(6)
    # The first boundary after the freeze waited postgres_wait, the later ones not at all.
    assert latencies[0] < WAIT + MARGIN
    assert sum(latencies[1:]) < MARGIN
    assert processor.stats.late >= 1
    assert processor.force_flush(20_000)
    assert spanreplay.load(cluster.dsn, run.run_id) == spanreplay.load(directory, run.run_id)
    assert processor.stats.dropped == 0
    logged = [r.getMessage() for r in caplog.records if r.name == "spanreplay" and "postgres_wait" in r.getMessage()]
    assert len(logged) == 1
    assert "SPANREPLAY_POSTGRES_WAIT" in logged[0]


def test_a_frozen_server_holds_a_batched_agent_back_only_until_the_commit_outlasts_the_timeout(
    cluster: Cluster, tmp_path: Path, provider: TracerProvider
) -> None:
    directory = tmp_path / "traces"
    processor = processor_for(
        cluster.dsn, directory, provider, batch=True, batch_size=5, flush_interval=0.01, timeout=1.0
    )
    steps = 60
    with spanreplay.record(agent="frozen-batch") as run:
        timed_boundary(0)
        assert processor.force_flush(10_000)
        cluster.freeze()
        safety = threading.Timer(30, cluster.thaw)
        safety.start()
        try:
            for i in range(1, steps + 1):
                timed_boundary(i)
            late, pending = processor.stats.late, processor.pending
        finally:
            safety.cancel()
            cluster.thaw()
    # Past high_water each boundary waits for the writer, but once its commit has been under way
    # longer than timeout the server counts as frozen and none waits: each wait in vain takes
    # postgres_wait, so at most timeout / postgres_wait of them fit before that.
    assert late <= processor.timeout / WAIT + 1
    assert pending >= steps  # every row of the freeze still queued, none dropped
    assert processor.force_flush(30_000)
    assert spanreplay.load(cluster.dsn, run.run_id) == spanreplay.load(directory, run.run_id)
    assert processor.stats.dropped == 0


def test_a_slow_server_does_not_hold_every_boundary_for_its_insert(
    cluster: Cluster, tmp_path: Path, provider: TracerProvider
) -> None:
    import psycopg

    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION slow_insert() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN PERFORM pg_sleep(0.3); RETURN NEW; END $$"
        )
        conn.execute("CREATE TRIGGER slow BEFORE INSERT ON agent_steps FOR EACH ROW EXECUTE FUNCTION slow_insert()")
    directory = tmp_path / "traces"
    processor = processor_for(cluster.dsn, directory, provider)
    steps = 10
    with spanreplay.record(agent="slow") as run:
        latencies = [timed_boundary(i) for i in range(steps)]
    # Held per insert, the boundaries would take steps * 0.3 s; only the first waits, and at most postgres_wait.
    assert max(latencies) < WAIT + MARGIN
    assert sum(latencies) < WAIT + MARGIN
    assert processor.stats.late >= 1
    assert processor.force_flush(30_000)
    assert spanreplay.load(cluster.dsn, run.run_id) == spanreplay.load(directory, run.run_id)


def test_a_server_down_at_start_costs_no_stall_and_gets_the_rows_when_it_comes_up(
    cluster: Cluster, tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.stop()
    directory = tmp_path / "traces"
    caplog.set_level(logging.WARNING, logger="spanreplay")
    started = time.monotonic()
    processor = processor_for(cluster.dsn, directory, provider, timeout=0.5)
    with spanreplay.record(agent="early") as run:
        latencies = [timed_boundary(i) for i in range(5)]
    elapsed = time.monotonic() - started
    assert elapsed < WAIT + MARGIN
    assert sum(latencies) < WAIT + MARGIN
    cluster.start()
    assert processor.force_flush(30_000)
    assert spanreplay.load(cluster.dsn, run.run_id) == spanreplay.load(directory, run.run_id)
    assert processor.stats.dropped == 0
    assert any("writes to" in r.getMessage() and "again" in r.getMessage() for r in caplog.records)


def test_a_stopped_server_leaves_the_rows_counted_and_reported_once_at_shutdown(
    cluster: Cluster, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    directory = tmp_path / "traces"
    processor = processor_for(cluster.dsn, directory, provider, timeout=0.5)
    caplog.set_level(logging.ERROR, logger="spanreplay")
    cluster.stop()
    with spanreplay.record(agent="gone") as run:
        for i in range(5):
            timed_boundary(i)
    caplog.clear()
    provider.shutdown()
    assert processor.stats.dropped == 7  # the run row when it started and ended, and the 5 steps
    reports = [r.getMessage() for r in caplog.records if "before shutdown" in r.getMessage()]
    assert len(reports) == 1
    assert reports[0].startswith(f"spanreplay: 7 rows could not be written to {cluster.dsn}")
    assert "spanreplay export traces/" in reports[0]
    assert len(spanreplay.load(directory, run.run_id)) == 5  # the trace file has them all


# --- rows the server refuses: on the shared server, in a schema of the test's own -------------------


@pytest.mark.parametrize("batch", [False, True], ids=["per-step", "batched"])
def test_a_nul_in_a_name_is_escaped_and_every_later_row_arrives(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, batch: bool
) -> None:
    directory = tmp_path / "traces"
    processor = processor_for(pg_dsn, directory, provider, batch=batch)
    with spanreplay.record(agent="support\x00agent") as odd:
        for i in range(100):
            spanreplay.boundary("tool", "look\x00up", {"i": i}, lambda i=i: i)
    with spanreplay.record(agent="plain") as plain:
        spanreplay.boundary("tool", "step", {}, lambda: 1)
    assert processor.force_flush(30_000)
    assert processor.stats.refused == 0
    assert processor.stats.steps_written == 101
    for run in (odd, plain):
        assert spanreplay.load(pg_dsn, run.run_id) == spanreplay.load(directory, run.run_id)
    assert spanreplay.load(pg_dsn, odd.run_id).run.agent == "support\x00agent"
    assert query(pg_dsn, "SELECT agent FROM agent_runs WHERE run_id = %s", (odd.run_id,)) == [("support\\u0000agent",)]
    assert [r.agent for r in spanreplay.runs(pg_dsn) if r.run_id == odd.run_id] == ["support\x00agent"]


@pytest.mark.parametrize("batch", [False, True], ids=["per-step", "batched"])
def test_a_row_the_server_refuses_is_set_aside_with_its_reason_and_the_others_go_on(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture, batch: bool
) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE agent_steps ADD CONSTRAINT no_forbidden CHECK (key <> 'forbidden')")
    directory = tmp_path / "traces"
    processor = processor_for(pg_dsn, directory, provider, batch=batch)
    caplog.set_level(logging.DEBUG, logger="spanreplay")
    started = time.monotonic()
    with spanreplay.record(agent="refused") as run:
        for i in range(20):
            spanreplay.boundary("tool", "forbidden" if i in (3, 11) else "fine", {"i": i}, lambda i=i: i)
    assert processor.force_flush(30_000)
    assert time.monotonic() - started < 10  # not retried with backoff
    assert processor.stats.refused == 2
    assert processor.stats.steps_written == 18
    assert processor.stats.dropped == 0
    assert processor.pending == 0
    seqs = [seq for (seq,) in query(pg_dsn, "SELECT step_number FROM agent_steps ORDER BY step_number")]
    assert seqs == [e.seq for e in spanreplay.load(directory, run.run_id) if e.key == "fine"]
    errors = [r.getMessage() for r in caplog.records if r.name == "spanreplay" and r.levelno >= logging.ERROR]
    assert len(errors) == 1  # the second refusal of the same kind is only counted
    first_refused = next(e.seq for e in spanreplay.load(directory, run.run_id) if e.key == "forbidden")
    assert f"refused the agent_steps row of run {run.run_id} step {first_refused}: " in errors[0]
    assert "no_forbidden" in errors[0]
    assert "set aside and not retried" in errors[0]
    assert "spanreplay export traces/" in errors[0]


# --- the setting ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [("0", 0.0), ("1.5", 1.5), ("", 0.2), ("soon", 0.2), ("-1", 0.2)])
def test_the_wait_comes_from_the_environment_for_a_dsn(
    psycopg_installed: None,
    tmp_path: Path,
    provider: TracerProvider,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    expected: float,
) -> None:
    monkeypatch.setenv("SPANREPLAY_POSTGRES_WAIT", value)
    config = spanreplay.configure(
        trace_dir=tmp_path, tracer_provider=provider, postgres="postgresql://postgres@127.0.0.1:1/test"
    )
    assert config.postgres_processor is not None
    assert config.postgres_processor.postgres_wait == expected


def test_a_negative_wait_is_refused(psycopg_installed: None) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    with pytest.raises(ValueError, match="postgres_wait"):
        PostgresSpanProcessor("postgresql://postgres@127.0.0.1:1/test", postgres_wait=-1)


def test_a_zero_wait_never_holds_a_boundary_and_every_row_still_arrives(
    cluster: Cluster, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    directory = tmp_path / "traces"
    processor = PostgresSpanProcessor(cluster.dsn, postgres_wait=0)
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=processor)
    cluster.freeze()
    safety = threading.Timer(15, cluster.thaw)
    safety.start()
    try:
        with spanreplay.record(agent="no-wait") as run:
            latencies = [timed_boundary(i) for i in range(20)]
    finally:
        safety.cancel()
        cluster.thaw()
    assert sum(latencies) < MARGIN
    assert processor.stats.late == 0
    assert processor.force_flush(20_000)
    assert spanreplay.load(cluster.dsn, run.run_id) == spanreplay.load(directory, run.run_id)

"""The keep policy: an unkept successful run loses its file, salt and rows; a failed or crashed one never does."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.cli import cli
from spanreplay.errors import ConfigurationError
from spanreplay.postgres import PostgresSpanProcessor
from spanreplay.recording.keep import KeepPolicy, keep_share
from spanreplay.run.salts import SALT_DIR, salt_path

SHARE = 0.5


def _ids(kept: bool, count: int = 1, share: float = SHARE) -> list[str]:
    """Run ids the share keeps (or drops), found by the hash itself."""
    found = []
    n = 0
    while len(found) < count:
        run_id = f"run_20260101_000000_{n:08x}"
        if (keep_share(run_id) < share) == kept:
            found.append(run_id)
        n += 1
    return found


KEPT, KEPT_2 = _ids(True, 2)
DROPPED, DROPPED_2, DROPPED_3 = _ids(False, 3)


@spanreplay.tool
def lookup(email: str) -> dict[str, Any]:
    return {"found": email.split("@")[0]}


def _record(run_id: str, *, steps: int = 2, fail: bool = False) -> None:
    try:
        with spanreplay.record(agent="keeper", run_id=run_id):
            for n in range(steps):
                lookup(f"user{n}@example.com")  # masked: the run gets a salt
            if fail:
                raise ValueError("the agent failed")
    except ValueError:
        pass


@pytest.fixture
def configured(tmp_path: Path) -> Callable[..., Path]:
    providers: list[TracerProvider] = []

    def configure(**kwargs: Any) -> Path:
        provider = TracerProvider()
        providers.append(provider)
        directory = tmp_path / "traces"
        spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, **kwargs)
        return directory

    yield configure
    spanreplay.reset()
    for provider in providers:
        provider.shutdown()


# --- the decision -----------------------------------------------------------------------------


@given(st.text(min_size=1, max_size=80))
def test_the_share_is_the_first_64_bits_of_the_run_ids_sha256(run_id: str) -> None:
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).digest()
    expected = int.from_bytes(digest[:8], "big") / 2**64
    assert keep_share(run_id) == expected
    assert 0.0 <= keep_share(run_id) < 1.0


def test_another_process_keeps_and_drops_the_same_runs() -> None:
    ids = [f"run_20260101_000000_{n:08x}" for n in range(400)]
    here = [KeepPolicy(0.3).kept_by_share(run_id) for run_id in ids]
    code = textwrap.dedent(
        """
        import sys
        from spanreplay.recording.keep import KeepPolicy
        ids = [f"run_20260101_000000_{n:08x}" for n in range(400)]
        print("".join("1" if KeepPolicy(0.3).kept_by_share(i) else "0" for i in ids))
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.strip() == "".join("1" if k else "0" for k in here)
    # The share is what was asked, near enough over 400 ids.
    assert 0.23 < sum(here) / len(ids) < 0.37


def test_the_share_bounds_keep_all_and_none() -> None:
    assert all(KeepPolicy(1.0).kept_by_share(i) for i in _ids(False, 5, 0.999))
    assert not any(KeepPolicy(0.0).kept_by_share(i) for i in _ids(True, 5, 0.001))


def test_a_bad_share_names_where_it_came_from(configured: Callable[..., Path], monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigurationError, match=r"configure\(keep_ok=\) is 1.5, not a share"):
        configured(keep_ok=1.5)
    monkeypatch.setenv("SPANREPLAY_KEEP_OK", "ten percent")
    with pytest.raises(ConfigurationError, match="SPANREPLAY_KEEP_OK is 'ten percent'"):
        configured()
    with pytest.raises(ConfigurationError, match="is not callable"):
        configured(keep=0.5)


# --- files --------------------------------------------------------------------------------------


def test_an_unkept_successful_run_loses_its_file_and_salt_and_a_kept_one_does_not(
    configured: Callable[..., Path],
) -> None:
    directory = configured(keep_ok=SHARE)
    _record(KEPT)
    _record(DROPPED)
    assert (directory / f"{KEPT}.jsonl").is_file()
    assert salt_path(directory, KEPT).is_file()
    assert not (directory / f"{DROPPED}.jsonl").exists()
    assert not salt_path(directory, DROPPED).exists()
    assert [run.run_id for run in spanreplay.runs(directory)] == [KEPT]


def test_a_failed_run_is_kept_whatever_its_share(configured: Callable[..., Path]) -> None:
    directory = configured(keep_ok=0.0)
    _record(DROPPED, fail=True)
    _record(DROPPED_2)
    [run] = spanreplay.runs(directory)
    assert (run.run_id, run.status) == (DROPPED, "error")
    assert salt_path(directory, DROPPED).is_file()
    assert spanreplay.load(directory, DROPPED).run.status == "error"


def test_the_environment_variable_sets_the_share(
    configured: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPANREPLAY_KEEP_OK", str(SHARE))
    directory = configured()
    _record(KEPT)
    _record(DROPPED)
    assert sorted(p.name for p in directory.glob("*.jsonl")) == [f"{KEPT}.jsonl"]


def test_without_a_policy_every_run_is_kept(configured: Callable[..., Path]) -> None:
    directory = configured()
    _record(DROPPED)
    _record(DROPPED_2)
    assert len(spanreplay.runs(directory)) == 2


def test_a_run_id_recorded_again_keeps_the_file_it_shares_with_the_earlier_run(
    configured: Callable[..., Path],
) -> None:
    directory = configured(keep_ok=0.0)
    _record(DROPPED, fail=True)
    _record(DROPPED)  # succeeds, not kept: but the file also holds the failed run
    assert (directory / f"{DROPPED}.jsonl").is_file()
    assert salt_path(directory, DROPPED).is_file()


def test_other_runs_files_in_the_directory_are_untouched(configured: Callable[..., Path]) -> None:
    directory = configured(keep_ok=0.0)
    directory.mkdir(parents=True, exist_ok=True)
    shared = directory / "collector-export.jsonl"
    shared.write_bytes(b"{}\n")
    _record(DROPPED)
    assert shared.read_bytes() == b"{}\n"
    assert not (directory / f"{DROPPED}.jsonl").exists()
    assert (directory / SALT_DIR).is_dir()  # the directory stays; only the run's salt went


def test_a_fork_is_kept_whatever_its_share(configured: Callable[..., Path]) -> None:
    directory = configured()
    _record(KEPT, steps=3)
    configured(keep_ok=0.0)
    with spanreplay.fork(directory, KEPT, at=2) as run:
        for n in range(3):
            lookup(f"user{n}@example.com")
    assert run.run_id != KEPT
    forked = {r.run_id: r for r in spanreplay.runs(directory)}
    assert forked[run.run_id].status == "ok"
    assert spanreplay.load(directory, run.run_id).run.forked_from == KEPT


# --- keep= callables ---------------------------------------------------------------------------


def test_a_callable_keeps_runs_with_more_steps(configured: Callable[..., Path]) -> None:
    seen: list[spanreplay.RunSummary] = []

    def long_runs(run: spanreplay.RunSummary) -> bool:
        seen.append(run)
        return run.steps > 3

    directory = configured(keep=long_runs)
    _record(DROPPED, steps=5)
    _record(DROPPED_2, steps=2)
    _record(DROPPED_3, steps=1, fail=True)  # failed: kept without asking
    assert sorted(run.run_id for run in spanreplay.runs(directory)) == sorted([DROPPED, DROPPED_3])
    assert [(s.run_id, s.steps, s.status, s.agent) for s in seen] == [
        (DROPPED, 5, "ok", "keeper"),
        (DROPPED_2, 2, "ok", "keeper"),
    ]
    assert all(len(s.trace_id) == 32 and s.end_ns >= s.start_ns > 0 for s in seen)


def _model_call(model: str, tokens_in: int, tokens_out: int) -> str:
    attributes = {
        "gen_ai.request.model": model,
        "gen_ai.usage.input_tokens": tokens_in,
        "gen_ai.usage.output_tokens": tokens_out,
    }
    return spanreplay.boundary("model", model, {"prompt": "hi"}, lambda: "answer", attributes=attributes)


def test_a_callable_keeps_runs_over_a_dollar_from_the_calls_tallied_as_they_ended(
    configured: Callable[..., Path],
) -> None:
    seen: dict[str, spanreplay.RunSummary] = {}

    def expensive(run: spanreplay.RunSummary) -> bool:
        seen[run.run_id] = run
        return run.usd > 1.0

    directory = configured(keep=expensive)
    with spanreplay.record(agent="keeper", run_id=DROPPED):
        _model_call("claude-fable-5", 1_000_000, 1_000_000)
        _model_call("claude-fable-5", 1_000_000, 0)
        _model_call("no-such-model", 10, 10)
    with spanreplay.record(agent="keeper", run_id=DROPPED_2):
        _model_call("claude-fable-5", 10, 10)
        spanreplay.boundary("model", "claude-fable-5", {"prompt": "x"}, lambda: "no usage")
    big, small = seen[DROPPED], seen[DROPPED_2]
    expected = spanreplay.cost.price_table().usd(
        "claude-fable-5", spanreplay.cost.Usage(input=2_000_000, output=1_000_000)
    )
    assert expected is not None
    assert expected > 1.0
    assert big.usd == pytest.approx(expected)
    assert (big.model_calls, big.tokens, big.unpriced_calls, big.calls_without_usage) == (3, 3_000_020, 1, 0)
    assert small.usd < 1.0
    assert (small.model_calls, small.calls_without_usage) == (2, 1)
    assert [run.run_id for run in spanreplay.runs(directory)] == [DROPPED]


def test_a_callable_that_raises_keeps_the_run_and_says_so(
    configured: Callable[..., Path], caplog: pytest.LogCaptureFixture
) -> None:
    def broken(run: spanreplay.RunSummary) -> bool:
        raise KeyError("usd")

    directory = configured(keep=broken)
    with caplog.at_level(logging.ERROR, logger="spanreplay"):
        _record(DROPPED)
    assert [run.run_id for run in spanreplay.runs(directory)] == [DROPPED]
    assert f"the keep= callable raised for run {DROPPED}; the run is kept" in caplog.text


def test_the_share_keeps_a_run_the_callable_would_drop(configured: Callable[..., Path]) -> None:
    asked: list[str] = []

    def never(run: spanreplay.RunSummary) -> bool:
        asked.append(run.run_id)
        return False

    directory = configured(keep_ok=SHARE, keep=never)
    _record(KEPT)
    _record(DROPPED)
    assert [run.run_id for run in spanreplay.runs(directory)] == [KEPT]
    assert asked == [DROPPED]  # a run the share keeps is not asked about


# --- Postgres ------------------------------------------------------------------------------------


def _rows(dsn: str) -> dict[str, tuple[str, int]]:
    with psycopg.connect(dsn) as conn:
        runs = conn.execute(
            "SELECT r.run_id, r.status, count(s.run_id) FROM agent_runs r "
            "LEFT JOIN agent_steps s ON s.run_id = r.run_id GROUP BY r.run_id, r.status"
        ).fetchall()
        orphans = conn.execute(
            "SELECT count(*) FROM agent_steps WHERE run_id NOT IN (SELECT run_id FROM agent_runs)"
        ).fetchone()
    assert orphans == (0,)
    return {run_id: (status, steps) for run_id, status, steps in runs}


@pytest.mark.parametrize("batch", [False, True], ids=["per-step", "batched"])
def test_an_unkept_run_loses_its_postgres_rows_and_a_failed_one_keeps_them(
    configured: Callable[..., Path], pg_dsn: str, batch: bool
) -> None:
    processor = PostgresSpanProcessor(pg_dsn, batch=batch, flush_interval=5.0)
    directory = configured(keep_ok=SHARE, postgres=processor)
    _record(KEPT, steps=3)
    _record(DROPPED, steps=4)
    _record(DROPPED_2, steps=2, fail=True)
    _record(KEPT_2, steps=1)
    assert processor.force_flush(10_000)
    assert _rows(pg_dsn) == {KEPT: ("ok", 3), DROPPED_2: ("error", 2), KEPT_2: ("ok", 1)}
    assert processor.stats.runs_removed == 1
    assert sorted(p.stem for p in directory.glob("*.jsonl")) == sorted([KEPT, DROPPED_2, KEPT_2])


# --- crashes -------------------------------------------------------------------------------------

CRASHING = textwrap.dedent(
    """
    import sys
    import time

    from opentelemetry.sdk.trace import TracerProvider

    import spanreplay

    @spanreplay.tool
    def step(n: int) -> int:
        return n

    spanreplay.configure(trace_dir=sys.argv[1], tracer_provider=TracerProvider(), raise_internal_errors=True)
    with spanreplay.record(agent="crashy", run_id=sys.argv[2]):
        step(1)
    with spanreplay.record(agent="crashy", run_id=sys.argv[3]):
        step(1)
        step(2)
        print("HANGING", flush=True)
        time.sleep(120)
    """
)


def test_a_crashed_run_is_kept_even_when_nothing_successful_is(tmp_path: Path) -> None:
    script = tmp_path / "crashing.py"
    script.write_text(CRASHING)
    directory = tmp_path / "traces"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "SPANREPLAY_KEEP_OK": "0"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(directory), DROPPED, DROPPED_2],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == b"HANGING\n", (line, proc.stderr.read() if proc.stderr else b"")
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    # The successful run before it went (the policy was in force); the crashed one stayed.
    [run] = spanreplay.runs(directory)
    assert (run.run_id, run.status, run.steps) == (DROPPED_2, "crashed", 2)
    assert not (directory / f"{DROPPED}.jsonl").exists()


# --- spanreplay runs ------------------------------------------------------------------------------


def test_spanreplay_runs_shows_the_policy_of_its_environment(
    configured: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = configured()
    _record(KEPT)
    spanreplay.reset()
    runner = CliRunner()
    shown = runner.invoke(cli, ["runs", str(directory)], env={"SPANREPLAY_KEEP_OK": "0.25"})
    assert shown.exit_code == 0, shown.output
    assert (
        "keep policy: 0.25 of successful runs by run id; failed and crashed runs always (SPANREPLAY_KEEP_OK=0.25)"
        in shown.output
    )
    monkeypatch.delenv("SPANREPLAY_KEEP_OK", raising=False)
    unset = runner.invoke(cli, ["runs", str(directory)])
    assert "keep policy: every run is kept (SPANREPLAY_KEEP_OK unset)" in unset.output
    bad = runner.invoke(cli, ["runs", str(directory)], env={"SPANREPLAY_KEEP_OK": "2"})
    assert bad.exit_code == 2
    assert "SPANREPLAY_KEEP_OK is '2', not a share of runs" in bad.output

"""The pytest plugin under pytest-xdist: ``pytest -n 2`` records each trace once and replays it offline.

A generated suite runs in a child pytest with two workers. ``--dist each`` runs
every test on both workers at about the same time, so each missing trace has two
would-be recorders; ``--dist load`` spreads the tests, and the two tests that
name one trace file land on either worker. The tool appends a line to a log each
time it really runs: a trace recorded twice shows as two lines.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import spanreplay
from spanreplay.model.private_files import TraceFileLinkError
from spanreplay.recording.trace_claims import claim_trace, lock_path, publish_trace

pytest_plugins = ["pytester"]

SHOP = """
import os
import time

import pytest

import spanreplay


@spanreplay.tool
def lookup(order_id):
    if os.environ.get("OFFLINE"):
        raise ConnectionError("no network in this run: the tool must not be called")
    with open(os.environ["CALLS_LOG"], "a") as out:
        out.write(f"{order_id} {os.getpid()}\\n")
    time.sleep(0.2)  # the other worker reaches the same trace while this one records it
    return {"order_id": order_id, "status": "shipped"}


@pytest.mark.spanreplay
@pytest.mark.parametrize("order", ["A-1", "A-2", "A-3"])
def test_own_trace(order):
    assert lookup(order)["status"] == "shipped"


@pytest.mark.spanreplay(trace="traces/shared.jsonl")
def test_shared_first():
    assert lookup("S-1")["order_id"] == "S-1"


@pytest.mark.spanreplay(trace="traces/shared.jsonl")
def test_shared_second():
    assert lookup("S-1")["order_id"] == "S-1"
"""

# Its own module in a folder below: its traces are beside it, not beside the first module or the cwd.
NESTED = """
import os

import pytest

import spanreplay


@spanreplay.tool
def lookup(order_id):
    if os.environ.get("OFFLINE"):
        raise ConnectionError("no network in this run: the tool must not be called")
    with open(os.environ["CALLS_LOG"], "a") as out:
        out.write(f"{order_id} {os.getpid()}\\n")
    return {"order_id": order_id, "status": "shipped"}


@pytest.mark.spanreplay
def test_nested():
    assert lookup("N-1")["status"] == "shipped"
"""

# Where each trace is (beside its test module), and the one order its run looks up.
TRACES = {
    "tests/traces/test_shop/test_own_trace[A-1].jsonl": "A-1",
    "tests/traces/test_shop/test_own_trace[A-2].jsonl": "A-2",
    "tests/traces/test_shop/test_own_trace[A-3].jsonl": "A-3",
    "tests/traces/shared.jsonl": "S-1",
    "tests/nested/traces/test_nested/test_nested.jsonl": "N-1",
}


def child_pytest(suite: Path, cwd: Path, *args: str, offline: bool = False) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "SPANREPLAY_"))}
    here = str(Path(spanreplay.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [env.get("PYTHONPATH")])])
    env["CALLS_LOG"] = str(suite / "calls.log")
    if offline:
        env["OFFLINE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.slow
@pytest.mark.parametrize("dist", ["each", "load"])
def test_two_workers_record_each_trace_once_then_replay_it_offline(tmp_path: Path, dist: str) -> None:
    pytest.importorskip("xdist")
    suite = tmp_path / "suite"
    (suite / "tests" / "nested").mkdir(parents=True)
    (suite / "tests" / "test_shop.py").write_text(SHOP)
    (suite / "tests" / "nested" / "test_nested.py").write_text(NESTED)
    (suite / "pytest.ini").write_text("[pytest]\n")
    tests = 6

    recorded = child_pytest(suite, suite, "--dist", dist, "tests")
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    # --dist each runs every test on both workers.
    assert f"{tests * (2 if dist == 'each' else 1)} passed" in recorded.stdout, recorded.stdout
    calls = [line.split()[0] for line in (suite / "calls.log").read_text().splitlines()]
    # One live call per trace: the shared trace and the ones both workers ran were recorded once.
    assert sorted(calls) == sorted(TRACES.values())
    saved = {}
    for name, order in TRACES.items():
        trace = suite / name
        (run,) = spanreplay.runs(trace)
        log = spanreplay.load(trace, run.run_id)
        assert [(e.kind, e.key) for e in log] == [("tool", "lookup")]
        assert order in log.events[0].input_json.decode()
        saved[name] = trace.read_bytes()
    assert list(suite.rglob(".spanreplay-*")) == []  # no scratch folder, no lock file

    # Replay only, no network, from another directory: each worker still finds each test's trace.
    replayed = child_pytest(suite, suite / "tests", "--dist", dist, "--spanreplay-mode=replay", ".", offline=True)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert len((suite / "calls.log").read_text().splitlines()) == len(TRACES)
    assert {name: (suite / name).read_bytes() for name in TRACES} == saved


# --- the claim, in one process ---------------------------------------------------------------------


def test_a_second_claim_on_a_trace_waits_for_the_first_and_no_lock_file_is_left(tmp_path: Path) -> None:
    if sys.platform == "win32":
        pytest.skip("no flock: a claim waits for nothing there")
    trace = tmp_path / "traces" / "t.jsonl"
    first = claim_trace(trace)
    assert lock_path(trace).exists()
    order: list[str] = []
    second_holds = threading.Event()

    def second() -> None:
        claim = claim_trace(trace)  # blocks until the first is released
        order.append("second")
        second_holds.set()
        claim.release()

    waiter = threading.Thread(target=second)
    waiter.start()
    # The second cannot hold the claim while the first does: it has not run by the time the first lets go.
    assert not second_holds.wait(0.5)
    order.append("first")
    first.release()
    waiter.join(60)
    assert order == ["first", "second"]
    first.release()  # twice: harmless
    assert not lock_path(trace).exists()
    assert list(trace.parent.iterdir()) == []


def test_a_claim_makes_the_trace_folder_and_names_its_lock_file_in_a_fixed_length(tmp_path: Path) -> None:
    trace = tmp_path / "a" / "b" / "t.jsonl"
    claim = claim_trace(trace)
    claim.release()
    assert trace.parent.is_dir()
    assert lock_path(trace).name.startswith(".spanreplay-lock-")
    assert len(lock_path(trace.with_name("x" * 250 + ".jsonl")).name) == len(lock_path(trace).name)


def test_publishing_never_overwrites_a_trace_saved_first_but_in_rewrite(tmp_path: Path) -> None:
    trace = tmp_path / "t.jsonl"
    mine, theirs = tmp_path / "mine.jsonl", tmp_path / "theirs.jsonl"
    theirs.write_text("theirs\n")
    mine.write_text("mine\n")
    assert publish_trace(theirs, trace, replace=False)
    assert not theirs.exists()
    assert not publish_trace(mine, trace, replace=False)
    assert trace.read_text() == "theirs\n"
    assert publish_trace(mine, trace, replace=True)
    assert trace.read_text() == "mine\n"


def test_a_link_planted_at_the_lock_file_is_refused_and_its_target_left_alone(tmp_path: Path) -> None:
    if sys.platform == "win32":
        pytest.skip("no links to plant")
    trace = tmp_path / "traces" / "t.jsonl"
    trace.parent.mkdir()
    target = tmp_path / "profile"
    target.write_text("kept\n")
    lock_path(trace).symlink_to(target)
    with pytest.raises(TraceFileLinkError, match="is a symbolic link"):
        claim_trace(trace)
    assert target.read_text() == "kept\n"


def test_a_planted_lock_link_fails_the_test_that_would_record_with_one_sentence(
    pytester: pytest.Pytester, pytestconfig: pytest.Config
) -> None:
    if sys.platform == "win32":
        pytest.skip("no links to plant")
    plugin = [] if pytestconfig.pluginmanager.has_plugin("spanreplay") else ["-p", "spanreplay.pytest_plugin"]
    pytester.makepyfile(test_x="import pytest\n\n@pytest.mark.spanreplay\ndef test_it():\n    pass\n")
    trace = pytester.path / "traces" / "test_x" / "test_it.jsonl"
    trace.parent.mkdir(parents=True)
    lock_path(trace).symlink_to(pytester.path / "target")
    result = pytester.runpytest("-p", "no:cacheprovider", *plugin)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*spanreplay: cannot record traces/test_x/test_it.jsonl: *is a symbolic link*"])
    assert not (pytester.path / "target").exists()
    assert not trace.exists()

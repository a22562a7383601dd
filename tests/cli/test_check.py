"""``spanreplay check``: many recorded runs replayed against the current code, each in a process of its own.

The runs are recorded in this process with one version of an agent module; the
module's file is then rewritten, the way a deploy changes the code, and
``check`` replays the runs against the file as it is now.
"""

from __future__ import annotations

import importlib
import json
import sys
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanreplay
from spanreplay import semconv as sc
from spanreplay.cli import EXIT_INTERNAL, CliState, cli

# The agent checked. Each run asks next_order() which item to buy (recorded, so a
# replay gets the same item); {placeholders} are the code's version.
AGENT_TEMPLATE = '''
import os
import time

import spanreplay

ORDERS = []
FAIL_ON = {fail_on!r}
CHANGED_FOR = {changed_for!r}
USE_MARKER = {use_marker!r}
EXIT_ON = {exit_on!r}
SLEEP_ON = {sleep_on!r}
CATCH = {catch!r}
KILL_SERVER_ON = {kill_server_on!r}
STATE = []


class QuotaExceeded(Exception):
    """The upstream API refused the call."""


@spanreplay.tool
def next_order() -> str:
    return ORDERS.pop(0)


@spanreplay.tool
def fetch(item: str, limit: int = 3) -> dict:
    if item == FAIL_ON:
        raise QuotaExceeded(f"quota exceeded while fetching {{item}}")
    return {{"item": item, "price": 3}}


@spanreplay.tool
def fetch_with_retry(item: str, tries: int) -> dict:
    return {{"item": item, "price": 3, "tries": tries}}


@spanreplay.tool
def store(record: dict) -> str:
    return "stored " + record["item"]


def main():
    # Module state: a second run in the same process would take another path.
    STATE.append(1)
    stamp = spanreplay.now().isoformat()
    item = next_order()
    if item == EXIT_ON:
        os._exit(3)
    if item == SLEEP_ON:
        time.sleep(60)
    if item == KILL_SERVER_ON:
        os.kill(os.getppid(), 9)
    try:
        if USE_MARKER and spanreplay.patched("retry-v2"):
            got = fetch_with_retry(item, 3)
        else:
            got = fetch(item, limit=9 if item == CHANGED_FOR else 3)
    except QuotaExceeded:
        if CATCH:
            return "gave up"
        raise
    if len(STATE) > 1:
        fetch("again")
    return store({{"item": got["item"], "at": stamp}})
'''


def agent_source(
    *,
    fail_on: str = "",
    changed_for: str = "",
    use_marker: bool = False,
    exit_on: str = "",
    sleep_on: str = "",
    catch: bool = False,
    kill_server_on: str = "",
) -> str:
    return AGENT_TEMPLATE.format(
        fail_on=fail_on,
        changed_for=changed_for,
        use_marker=use_marker,
        exit_on=exit_on,
        sleep_on=sleep_on,
        catch=catch,
        kill_server_on=kill_server_on,
    )


class Agent:
    """The agent module on disk and imported here, to record runs with and to rewrite."""

    def __init__(self, directory: Path) -> None:
        self.name = f"checked_{uuid.uuid4().hex[:10]}"
        self.path = directory / f"{self.name}.py"
        self.module: ModuleType | None = None

    @property
    def entry(self) -> str:
        return f"{self.name}:main"

    def write(self, **version: Any) -> None:
        """The code as it is now: what check replays against (and records with, after reload)."""
        self.path.write_text(agent_source(**version))
        if self.module is None:
            self.module = importlib.import_module(self.name)
        else:
            self.module = importlib.reload(self.module)

    def record(self, item: str, agent: str = "shop") -> str:
        module = self.module
        assert module is not None
        module.ORDERS[:] = [item]
        module.STATE.clear()
        run_id = ""
        try:
            with spanreplay.record(agent=agent) as run:
                run_id = run.run_id
                module.main()
        except module.QuotaExceeded:
            pass
        return run_id


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace_dir: Path) -> Iterator[Agent]:
    # Rewritten within the same second at times: stale bytecode would replay the old code.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    agent = Agent(tmp_path)
    agent.write()
    yield agent
    sys.modules.pop(agent.name, None)


@pytest.fixture(params=["fork", "interpreter"])
def launcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each run forked from a server that imported spanreplay once, or started as a new interpreter."""
    from spanreplay.cli import _check_processes

    if request.param == "fork" and not _check_processes.use_fork_server:
        pytest.skip("this platform cannot fork")
    monkeypatch.setattr(_check_processes, "use_fork_server", request.param == "fork")
    return str(request.param)


def check(*args: str, clock: datetime | None = None) -> Result:
    state = CliState() if clock is None else CliState(clock=lambda: clock)
    return CliRunner().invoke(cli, ["check", "traces", *args], obj=state, prog_name="spanreplay")


def verdict_lines(result: Result) -> dict[str, str]:
    """Each run's line: ``run id -> "diverged at seq 3: ..."``."""
    lines = {}
    for line in result.stdout.splitlines():
        head, _, rest = line.partition("  ")
        if head.startswith("run_"):
            lines[head] = rest.rsplit("  (", 1)[0]
    return lines


def junit_cases(path: Path) -> dict[str, ET.Element]:
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    (suite,) = root
    return {case.attrib["name"]: case for case in suite.iter("testcase")}


# --- the gate ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_check_writes_one_junit_testcase_per_run_and_exits_1_when_one_diverges(
    shop: Agent, tmp_path: Path, launcher: str
) -> None:
    shop.write(fail_on="pear")
    apple, pear, banana = shop.record("apple"), shop.record("pear"), shop.record("banana")
    shop.write(fail_on="pear", changed_for="banana")  # the deploy: banana's fetch now asks for 9
    report = tmp_path / "check.xml"
    result = check("--entry", shop.entry, "--junit-xml", str(report))
    assert result.exit_code == 1, result.output
    lines = verdict_lines(result)
    assert lines[apple] == "completed: all 4 recorded steps served"
    assert lines[pear].startswith("reproduced at seq 3: ")
    assert "QuotaExceeded: quota exceeded while fetching pear" in lines[pear]
    expected = f"diverged at seq 3: Replay of run {banana} diverged at seq 3 (call id tool:fetch#0)"
    assert lines[banana].startswith(expected)
    assert "\n" not in lines[banana]
    assert "3 run(s) checked" in result.stdout
    assert "1 completed, 1 reproduced, 1 diverged" in result.stdout

    cases = junit_cases(report)
    assert set(cases) == {apple, pear, banana}
    assert [child.tag for child in cases[apple]] == []
    assert [child.tag for child in cases[pear]] == []
    (failure,) = cases[banana].findall("failure")
    assert failure.attrib["type"] == "InputChangedError"
    assert failure.attrib["message"].startswith("diverged at seq 3: ")
    assert failure.text is not None
    assert '-  "limit": 3' in failure.text
    assert '+  "limit": 9' in failure.text
    assert cases[banana].attrib["classname"] == "spanreplay.shop"
    suite = ET.parse(report).getroot()[0]
    assert (suite.attrib["tests"], suite.attrib["failures"], suite.attrib["errors"]) == ("3", "1", "0")


@pytest.mark.slow
def test_a_failed_run_that_no_longer_fails_diverges_at_the_end(shop: Agent) -> None:
    shop.write(fail_on="pear")
    pear = shop.record("pear")
    shop.write(fail_on="pear", catch=True)  # the fix: the agent now gives up instead of failing
    result = check("--entry", shop.entry, "--json")
    assert result.exit_code == 1, result.output
    (verdict,) = json.loads(result.stdout)["runs"]
    assert (verdict["run_id"], verdict["outcome"], verdict["seq"]) == (pear, "diverged", None)
    assert verdict["error_type"] == "OutcomeChangedError"
    assert verdict["reason"].startswith(f"Replay of run {pear} completed, but the recorded run failed with ")


@pytest.mark.slow
def test_unchanged_code_passes_with_parallel_jobs_and_json_keeps_the_run_order(shop: Agent) -> None:
    shop.write(fail_on="pear")
    run_ids = [shop.record(item) for item in ("apple", "pear", "banana", "cherry")]
    result = check("--entry", shop.entry, "-j", "2", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [r["run_id"] for r in report["runs"]] == run_ids
    assert [r["outcome"] for r in report["runs"]] == ["completed", "reproduced", "completed", "completed"]
    assert report["runs"][1]["seq"] == 3
    assert report["runs"][1]["recorded_status"] == "error"
    assert report["totals"] == {"completed": 3, "reproduced": 1, "diverged": 0, "error": 0}


@pytest.mark.slow
def test_each_run_is_replayed_in_a_fresh_process_so_module_state_does_not_leak(shop: Agent, launcher: str) -> None:
    # main() takes another path the second time it runs in one process (see STATE).
    run_ids = [shop.record(item) for item in ("apple", "banana", "cherry")]
    result = check("--entry", shop.entry, "--json")
    assert result.exit_code == 0, result.output
    assert [r["outcome"] for r in json.loads(result.stdout)["runs"]] == ["completed"] * 3
    # The same three replays in this one process do leak it: the second diverges.
    module = shop.module
    assert module is not None
    module.STATE.clear()
    outcomes = []
    for run_id in run_ids:
        try:
            with spanreplay.replay("traces", run_id) as run:
                module.main()
        except spanreplay.ReplayDivergenceError:
            pass
        outcomes.append(run.outcome)
    assert outcomes == ["completed", "diverged", "diverged"]


@pytest.mark.slow
def test_each_run_replays_with_the_environment_check_was_called_with(
    shop: Agent, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: Any, launcher: str
) -> None:
    # The masker the fork server prepared (with the key) must not serve a run replayed without it.
    monkeypatch.setenv("SPANREPLAY_MASK_KEY", "k" * 32)
    spanreplay.configure(trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True)
    run_id = shop.record("ann.lee@example.com")
    fetched = next(e for e in spanreplay.load("traces", run_id) if e.key == "fetch")
    assert "ann.lee@example.com" not in fetched.input_json.decode()
    keyed = check("--entry", shop.entry, "--json")
    assert keyed.exit_code == 0, keyed.output
    assert [r["outcome"] for r in json.loads(keyed.stdout)["runs"]] == ["completed"]
    monkeypatch.delenv("SPANREPLAY_MASK_KEY")
    unkeyed = check("--entry", shop.entry, "--json")
    assert unkeyed.exit_code == 2, unkeyed.output
    (verdict,) = json.loads(unkeyed.stdout)["runs"]
    assert verdict["outcome"] == "error"
    assert "with the mask key whose id is" in verdict["reason"]


@pytest.mark.slow
def test_check_replays_runs_kept_in_postgres(pg_dsn: str, shop: Agent, tmp_path: Path, provider: Any) -> None:
    spanreplay.configure(
        trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn
    )
    shop.write(fail_on="pear")
    apple, pear, banana = shop.record("apple"), shop.record("pear"), shop.record("banana")
    shop.write(fail_on="pear", changed_for="banana")
    result = CliRunner().invoke(
        cli, ["check", pg_dsn, "--entry", shop.entry, "-j", "2", "--json"], obj=CliState(), prog_name="spanreplay"
    )
    assert result.exit_code == 1, result.output
    outcomes = {r["run_id"]: (r["outcome"], r["seq"]) for r in json.loads(result.stdout)["runs"]}
    assert outcomes == {apple: ("completed", None), pear: ("reproduced", 3), banana: ("diverged", 3)}


# --- version markers through check ------------------------------------------------------------


@pytest.mark.slow
def test_runs_recorded_before_and_after_a_marker_both_pass_the_gate(shop: Agent) -> None:
    old = shop.record("apple")
    shop.write(use_marker=True)
    new = shop.record("apple")
    steps = [(e.kind, e.key) for e in spanreplay.load("traces", new)]
    assert (sc.KIND_MARKER, "retry-v2") in steps
    assert (sc.KIND_TOOL, "fetch_with_retry") in steps
    assert (sc.KIND_MARKER, "retry-v2") not in [(e.kind, e.key) for e in spanreplay.load("traces", old)]

    result = check("--entry", shop.entry, "--json")
    assert result.exit_code == 0, result.output
    assert {r["run_id"]: r["outcome"] for r in json.loads(result.stdout)["runs"]} == {
        old: "completed",
        new: "completed",
    }

    # Rolled back to code without the marker: the old run passes, the new one diverges at its marker.
    shop.write(use_marker=False)
    result = check("--entry", shop.entry, "--json")
    assert result.exit_code == 1, result.output
    verdicts = {r["run_id"]: r for r in json.loads(result.stdout)["runs"]}
    assert verdicts[old]["outcome"] == "completed"
    assert (verdicts[new]["outcome"], verdicts[new]["seq"]) == ("diverged", 3)
    assert "Recorded: marker 'retry-v2'" in verdicts[new]["reason"]


# --- selecting runs ------------------------------------------------------------------------------


@pytest.mark.slow
def test_status_and_agent_select_the_runs_replayed(shop: Agent) -> None:
    shop.write(fail_on="pear")
    apple = shop.record("apple")
    pear = shop.record("pear")
    other = shop.record("banana", agent="billing")
    failed = json.loads(check("--entry", shop.entry, "--status", "failed", "--json").stdout)
    assert [r["run_id"] for r in failed["runs"]] == [pear]
    ok = check("--entry", shop.entry, "--status", "ok", "--agent", "shop")
    assert set(verdict_lines(ok)) == {apple}
    assert "2 left out: 1 of another agent, 1 of another --status" in ok.stdout
    billing = json.loads(check("--entry", shop.entry, "--agent", "billing", "--json").stdout)
    assert [r["run_id"] for r in billing["runs"]] == [other]


@pytest.mark.slow
def test_since_counts_back_from_the_injected_clock(shop: Agent) -> None:
    run_id = shop.record("apple")
    (summary,) = spanreplay.runs("traces")
    assert summary.started is not None
    three_days_later = summary.started + timedelta(days=3)
    kept = check("--entry", shop.entry, "--since", "7d", clock=three_days_later)
    assert kept.exit_code == 0, kept.output
    assert set(verdict_lines(kept)) == {run_id}
    dropped = check("--entry", shop.entry, "--since", "2d", clock=three_days_later)
    assert dropped.exit_code == 0, dropped.output
    assert verdict_lines(dropped) == {}
    assert "no runs to check (1 left out: 1 started before --since)" in dropped.stdout
    after = (summary.started + timedelta(hours=1)).isoformat()
    assert verdict_lines(check("--entry", shop.entry, "--since", after, clock=three_days_later)) == {}


def test_parse_since_takes_ages_and_dates() -> None:
    from spanreplay.cli._check_select import parse_since

    now = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)
    assert parse_since("7d", now) == datetime(2027, 2, 22, 9, 0, tzinfo=UTC)
    assert parse_since("12h", now) == datetime(2027, 2, 28, 21, 0, tzinfo=UTC)
    assert parse_since("2w", now) == datetime(2027, 2, 15, 9, 0, tzinfo=UTC)
    assert parse_since("30m", now) == datetime(2027, 3, 1, 8, 30, tzinfo=UTC)
    assert parse_since("2026-11-24", now) == datetime(2026, 11, 24, tzinfo=UTC)
    assert parse_since("2026-11-24T08:00+02:00", now) == datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


# --- runs that end badly ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_replay_that_kills_its_process_is_a_divergence_of_that_run_only(shop: Agent, launcher: str) -> None:
    fine, dying = shop.record("apple"), shop.record("plum")
    shop.write(exit_on="plum")
    result = check("--entry", shop.entry, "-j", "2")
    assert result.exit_code == 1, result.output
    lines = verdict_lines(result)
    assert lines[fine] == "completed: all 4 recorded steps served"
    assert lines[dying] == (
        "diverged at the end of the run: the replay's process ended with exit code 3 before it gave a verdict; "
        "it wrote nothing to stderr"
    )


@pytest.mark.slow
def test_a_replay_that_outlives_the_timeout_is_killed_and_counted_as_diverged(shop: Agent) -> None:
    hanging = shop.record("fig", agent="slow")
    shop.write(sleep_on="fig")  # sleeps a minute: far past the timeout, however loaded the machine
    result = check("--entry", shop.entry, "--agent", "slow", "--timeout", "8")
    assert result.exit_code == 1, result.output
    assert verdict_lines(result)[hanging] == (
        "diverged at the end of the run: the replay did not finish within --timeout 8 s; its process was killed"
    )


@pytest.mark.slow
def test_a_fork_server_that_dies_fails_the_command_instead_of_judging_runs(shop: Agent) -> None:
    from spanreplay.cli import _check_processes

    if not _check_processes.use_fork_server:
        pytest.skip("this platform cannot fork")
    shop.record("apple")
    shop.write(kill_server_on="apple")
    result = check("--entry", shop.entry)
    assert result.exit_code == EXIT_INTERNAL, result.output
    assert "The process spanreplay check forks its runs from ended" in result.stderr
    assert "completed" not in result.stdout


@pytest.mark.slow
def test_an_entry_that_cannot_be_imported_is_bad_input(shop: Agent) -> None:
    shop.record("apple")
    result = check("--entry", "no_such_module_here:main")
    assert result.exit_code == 2, result.output
    assert "error: --entry no_such_module_here:main: module no_such_module_here was not found" in result.stdout


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["traces", "--entry", "nocolon"], "is not module:function"),
        (["-", "--entry", "m:main"], "cannot read stdin"),
        (["traces", "--entry", "m:main", "--since", "last tuesday"], "--since 'last tuesday' is neither"),
    ],
)
def test_bad_options_exit_2_with_one_sentence(shop: Agent, args: list[str], fragment: str) -> None:
    shop.record("apple")
    result = CliRunner().invoke(cli, ["check", *args], obj=CliState(), prog_name="spanreplay")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ")
    assert fragment in result.stderr


def test_no_runs_selected_exits_0_and_says_so(shop: Agent) -> None:
    shop.record("apple")
    result = check("--entry", shop.entry, "--status", "failed")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "no runs to check (1 left out: 1 of another --status)"


def test_the_help_names_the_outcomes_and_exit_codes() -> None:
    result = CliRunner().invoke(cli, ["check", "--help"])
    assert result.exit_code == 0
    text = " ".join(result.output.split())
    for fragment in ("completed", "reproduced", "diverged", "--junit-xml", "-j, --jobs", "1 at least one run diverged"):
        assert fragment in text, fragment


# --- the JUnit writer ------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(), name=st.text(min_size=1))
def test_junit_xml_stays_readable_whatever_the_runs_printed(tmp_path: Path, text: str, name: str) -> None:
    from spanreplay.cli._junit import Case, write_junit_xml, xml_text

    path = tmp_path / "report.xml"
    cases = [
        Case(name=name, classname="spanreplay.shop", seconds=0.5, failure=("failure", text, "X", text), stdout=text),
        Case(name="run_ok", classname="spanreplay.shop", seconds=0.25),
        Case(name="run_bad", classname="spanreplay.shop", seconds=0.0, failure=("error", "e", "BadInput", "e")),
    ]
    write_junit_xml(path, "spanreplay check traces", cases, timestamp=datetime(2027, 3, 1, tzinfo=UTC), seconds=1.0)
    suite = ET.parse(path).getroot()[0]
    assert (suite.attrib["tests"], suite.attrib["failures"], suite.attrib["errors"]) == ("3", "1", "1")
    first, ok, bad = suite
    assert first.attrib["name"] == xml_text(name)
    (failure,) = first.findall("failure")
    # Attributes keep every character (written as references); element text reads a
    # carriage return back as a newline, as XML parsers must.
    assert failure.attrib["message"] == xml_text(text)
    assert (failure.text or "") == xml_text(text).replace("\r\n", "\n").replace("\r", "\n")
    assert list(ok) == []
    assert [child.tag for child in bad] == ["error"]


def test_xml_text_writes_what_xml_cannot_hold_as_visible_escapes() -> None:
    from spanreplay.cli._junit import xml_text

    assert xml_text("ok\x1b[31mred\x00\ud800\ufffe\ttab\n") == "ok\\x1b[31mred\\x00\\ud800\\ufffe\ttab\n"


_SUMMARIES = st.builds(
    lambda n, agent, status, start: spanreplay.RunSummary(
        run_id=f"run_{n}", agent=agent, status=status, error=None, steps=1, trace_id="", start_ns=start, end_ns=0
    ),
    st.integers(0, 10**6),
    st.sampled_from(["shop", "billing", ""]),
    st.sampled_from(["ok", "error", "crashed", "running", "weird"]),
    st.integers(0, 2 * 10**18),
)


@given(
    found=st.lists(_SUMMARIES, max_size=30),
    agents=st.lists(st.sampled_from(["shop", "billing", "other"]), max_size=2),
    since_ns=st.none() | st.integers(0, 2 * 10**18),
    status=st.sampled_from(["ok", "failed", "all"]),
)
def test_select_runs_keeps_exactly_the_runs_that_pass_every_filter_and_counts_the_rest(
    found: list[spanreplay.RunSummary], agents: list[str], since_ns: int | None, status: str
) -> None:
    from spanreplay.cli._check_select import select_runs

    since = None if since_ns is None else datetime.fromtimestamp(since_ns // 10**9, tz=UTC)
    cutoff = None if since is None else int(since.timestamp()) * 10**9
    wanted = {"ok": {"ok"}, "failed": {"error", "crashed"}, "all": {"ok", "error", "crashed"}}[status]
    selection = select_runs(found, agents=agents, since=since, status=status)
    expected = [
        run
        for run in found
        if (not agents or run.agent in agents)
        and (cutoff is None or (run.start_ns and run.start_ns >= cutoff))
        and run.status in wanted
    ]
    assert selection.runs == expected
    left_out = selection.other_agent + selection.too_old + selection.other_status + selection.running
    assert len(selection.runs) + left_out == len(found)
    assert all(run.status != "running" for run in selection.runs)

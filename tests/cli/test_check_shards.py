"""``spanreplay check --shard I/N`` and ``-j N``: the gate spread over CI runners and processes.

The split is by a hash of the run id alone, so it is checked as a function
(hypothesis: disjoint, complete, independent of order and of the other runs
listed) and then through the command on real recorded runs, one shard after
the other as two CI runners would run them.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

import spanreplay
from spanreplay.cli import CliState, cli
from spanreplay.cli._check_select import select_runs
from spanreplay.cli._check_shards import Shard, parse_shard, shard_of, split_runs

# The checked agent. main() appends a line to the file $CHECK_LOG names each time it runs,
# so the test counts the replays that actually ran; $CHECK_BARRIER makes each replay wait
# until two replays have reached it, which only replays running at the same time can do.
AGENT = """
import os
import time
from pathlib import Path

import spanreplay

ORDERS = []


@spanreplay.tool
def next_order() -> str:
    return ORDERS.pop(0)


@spanreplay.tool
def price(item: str) -> int:
    return len(item)


@spanreplay.agent(name="pricer")
def pricer(item: str) -> int:
    return price(item)


def _barrier(folder: Path) -> None:
    (folder / str(os.getpid())).touch()
    for _ in range(2400):
        if len(list(folder.iterdir())) >= 2:
            return
        time.sleep(0.05)
    raise RuntimeError("no other replay reached the barrier")


def main():
    log = os.environ.get("CHECK_LOG")
    if log:
        with open(log, "a") as out:
            out.write(f"{os.getpid()}\\n")
    barrier = os.environ.get("CHECK_BARRIER")
    if barrier:
        _barrier(Path(barrier))
    item = next_order()
    if item.startswith("sub-"):
        return pricer(item)
    return price(item)
"""


class Agent:
    def __init__(self, directory: Path) -> None:
        self.name = f"sharded_{uuid.uuid4().hex[:10]}"
        (directory / f"{self.name}.py").write_text(AGENT)
        self.module = importlib.import_module(self.name)

    @property
    def entry(self) -> str:
        return f"{self.name}:main"

    def record(self, item: str) -> str:
        self.module.ORDERS[:] = [item]
        with spanreplay.record(agent="shop") as run:
            self.module.main()
        return run.run_id


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace_dir: Path) -> Iterator[Agent]:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    agent = Agent(tmp_path)
    yield agent
    sys.modules.pop(agent.name, None)


def check(*args: str) -> Result:
    return CliRunner().invoke(cli, ["check", "traces", *args], obj=CliState(), prog_name="spanreplay")


def summary(run_id: str, parent: str | None = None) -> spanreplay.RunSummary:
    return spanreplay.RunSummary(
        run_id=run_id, agent="shop", status="ok", error=None, steps=1, trace_id="", start_ns=1, end_ns=2, parent=parent
    )


# --- the split, as a function ----------------------------------------------------------------------

# Any string a trace file could carry as a run id, lone surrogates and control characters included.
_RUN_IDS = st.lists(st.text(st.characters(exclude_categories=())), unique=True, max_size=60)


@given(run_ids=_RUN_IDS, count=st.integers(1, 16), data=st.data())
def test_the_shards_are_disjoint_complete_and_the_same_in_any_order(
    run_ids: list[str], count: int, data: st.DataObject
) -> None:
    runs = [summary(run_id) for run_id in run_ids]
    shards = [split_runs(runs, Shard(index, count)) for index in range(1, count + 1)]
    taken = [[run.run_id for run in mine] for mine, _ in shards]
    for index, ids in enumerate(taken):
        for other in taken[index + 1 :]:
            assert not set(ids) & set(other)
    assert sorted(run_id for ids in taken for run_id in ids) == sorted(run_ids)
    # Each shard keeps the listing's order, and counts what went elsewhere.
    for (mine, elsewhere), ids in zip(shards, taken, strict=True):
        assert ids == [run_id for run_id in run_ids if run_id in set(ids)]
        assert elsewhere == len(run_ids) - len(mine)
    # Another runner lists the runs in another order, or only some of them: each run keeps its shard.
    shuffled = data.draw(st.permutations(run_ids))
    subset = data.draw(st.lists(st.sampled_from(run_ids), unique=True) if run_ids else st.just([]))
    for index, ids in enumerate(taken, start=1):
        for listing in (shuffled, subset):
            mine, _ = split_runs([summary(run_id) for run_id in listing], Shard(index, count))
            assert {run.run_id for run in mine} == set(ids) & set(listing)


def test_a_run_goes_to_the_shard_of_the_sha256_of_its_id_whatever_the_process() -> None:
    # Pinned: runners on other machines, Python versions and spanreplay releases must agree.
    expected = {
        "run_20261124_081502_1f2e3d4c": 3,
        "run_20261127_161044_77aa0b12": 1,
        "d": 2,
        "h": 4,
        "\x1b[31m": 3,
        "": 1,
    }
    for run_id, shard in expected.items():
        digest = hashlib.sha256(run_id.encode()).digest()
        assert int.from_bytes(digest[:8], "big") % 4 + 1 == shard
        assert shard_of(run_id, 4) == shard
    assert {shard_of(run_id, 1) for run_id in expected} == {1}


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("0/4", "--shard 0/4: shards are numbered from 1 to 4; write --shard 1/4"),
        ("5/4", "--shard 5/4: shards are numbered from 1 to 4; write --shard 1/4"),
        ("x/y", "--shard 'x/y' is not I/N; write the runner's shard and the number of shards, e.g. --shard 2/4"),
        ("1/0", "--shard 1/0: the number of shards must be from 1 to 10,000; write e.g. --shard 1/4"),
        ("2", "--shard '2' is not I/N"),
        ("-1/4", "--shard '-1/4' is not I/N"),
        ("\u0661/4", "is not I/N"),  # an Arabic-Indic digit: int() would take it
        ("1/99999", "the number of shards must be from 1 to 10,000"),
    ],
)
def test_a_bad_shard_is_bad_input_naming_the_flag_and_the_fix(text: str, fragment: str) -> None:
    # Refused before the source is read: there is none here.
    result = CliRunner().invoke(
        cli, ["check", "no-such-dir", "--entry", "m:main", "--shard", text], obj=CliState(), prog_name="spanreplay"
    )
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: --shard ")
    assert fragment in result.stderr


def test_parse_shard_takes_spaces_around_the_numbers() -> None:
    assert parse_shard(" 2 / 4 ") == Shard(2, 4)
    assert str(parse_shard("1/1")) == "1/1"


def test_sub_agent_runs_are_left_out_and_counted_apart_from_orphans() -> None:
    found = [summary("run_a"), summary("run_b", parent="run_a"), summary("run_c", parent="run_b")]
    found.append(summary("run_d", parent="run_elsewhere"))
    selection = select_runs(found)
    assert [run.run_id for run in selection.runs] == ["run_a"]
    assert (selection.sub_agent, selection.orphan) == (2, 1)
    assert selection.left_out() == (
        "3 left out: 2 sub-agent run(s) (replayed in their parent's), 1 sub-agent run(s) whose parent the source lacks"
    )


# --- through the command ---------------------------------------------------------------------------


@pytest.mark.slow
def test_two_shards_replay_every_run_exactly_once_and_write_one_junit_file_each(
    shop: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    top = [shop.record(item) for item in ("apple", "pear", "fig", "plum", "kiwi", "sub-lime", "sub-date")]
    children = [run.run_id for run in spanreplay.runs("traces") if run.parent is not None]
    assert len(children) == 2
    log = tmp_path / "replays.log"
    monkeypatch.setenv("CHECK_LOG", str(log))
    ids: dict[int, list[str]] = {}
    for index in (1, 2):
        result = check("--entry", shop.entry, "--shard", f"{index}/2", "-j", "2", "--junit-xml", "results-{shard}.xml")
        assert result.exit_code == 0, result.output
        ids[index] = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("run_")]
        here, elsewhere = len(ids[index]), len(top) - len(ids[index])
        assert f"shard {index}/2: {here} run(s) here, {elsewhere} on the other shards" in result.stdout
        assert "2 sub-agent run(s) (replayed in their parent's)" in result.stdout
    first, second = ids[1], ids[2]
    assert not set(first) & set(second)
    assert sorted(first + second) == sorted(top)
    assert all(shard_of(run_id, 2) == index for index in (1, 2) for run_id in ids[index])
    # Each top-level run's entry ran once, in a process of its own; no child was replayed on its own.
    pids = log.read_text().split()
    assert len(pids) == len(top) == len(set(pids))

    suites = {}
    for index in (1, 2):
        (suite,) = ET.parse(tmp_path / f"results-{index}.xml").getroot()
        suites[suite.attrib["name"]] = [case.attrib["name"] for case in suite.iter("testcase")]
        assert suite.attrib["tests"] == str(len(ids[index]))
    assert suites == {
        "spanreplay check traces (shard 1/2)": first,
        "spanreplay check traces (shard 2/2)": second,
    }


@pytest.mark.slow
def test_json_says_the_shard_and_a_shard_without_runs_still_writes_its_report(shop: Agent, tmp_path: Path) -> None:
    run_id = shop.record("apple")
    mine = shard_of(run_id, 2)
    other = 3 - mine
    here = json.loads(check("--entry", shop.entry, "--shard", f"{mine}/2", "--json").stdout)
    assert here["shard"] == {"index": mine, "count": 2, "runs": 1, "other_shards": 0}
    assert [r["run_id"] for r in here["runs"]] == [run_id]
    empty = check("--entry", shop.entry, "--shard", f"{other}/2", "--junit-xml", "out-{shard}.xml")
    assert empty.exit_code == 0, empty.output
    assert empty.stdout.strip() == f"no runs to check (shard {other}/2: 0 run(s) here, 1 on the other shards)"
    suite = ET.parse(tmp_path / f"out-{other}.xml").getroot()[0]
    assert (suite.attrib["name"], suite.attrib["tests"]) == (f"spanreplay check traces (shard {other}/2)", "0")
    unsharded = json.loads(check("--entry", shop.entry, "--json").stdout)
    assert unsharded["shard"] is None


@pytest.mark.slow
def test_jobs_replay_runs_at_the_same_time_each_in_a_process_of_its_own(
    shop: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = [shop.record("apple"), shop.record("pear")]
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    monkeypatch.setenv("CHECK_BARRIER", str(barrier))
    # Each replay waits until two have reached the barrier: one at a time, neither could pass.
    result = check("--entry", shop.entry, "-j", "2", "--json")
    assert result.exit_code == 0, result.output
    assert [r["outcome"] for r in json.loads(result.stdout)["runs"]] == ["completed", "completed"]
    pids = {int(p.name) for p in barrier.iterdir()}
    assert len(pids) == len(runs)
    assert os.getpid() not in pids

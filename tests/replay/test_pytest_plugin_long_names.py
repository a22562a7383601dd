"""The pytest plugin's trace names for tests whose ids are longer than a file name may be.

A test parametrized with a long value once ran live, then lost its trace: the
rename into ``traces/<module>/<test id>.jsonl`` failed with ENAMETOOLONG. Such a
name now keeps its start and ends with a hash of the whole id, so the trace is
saved, and the next run of the same test finds it again and replays it.
"""

from __future__ import annotations

import hashlib
import os
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import spanreplay
from spanreplay.pytest_plugin import _fitting

pytest_plugins = ["pytester"]

MODULE = """
import pytest

import spanreplay

CALLS = []


@spanreplay.tool
def lookup(order_id):
    CALLS.append(order_id)
    return {{"order_id": order_id, "status": "shipped"}}


@pytest.mark.spanreplay
@pytest.mark.parametrize("order", [{first!r}, {second!r}], ids=[{first!r}, {second!r}])
def test_it(order):
    assert lookup(order)["status"] == "shipped"
    print("calls", len(CALLS))
"""

# Two ids of 300 characters and more that share their first 280: only the hash tells them apart.
FIRST = "A" * 280 + "-first"
SECOND = "A" * 280 + "-second"
HASHED = re.compile(r"test_it\[A+-[0-9a-f]{16}\.jsonl")

RunPytest = Callable[..., pytest.RunResult]


@pytest.fixture
def run(pytester: pytest.Pytester, pytestconfig: pytest.Config) -> Iterator[RunPytest]:
    plugin = [] if pytestconfig.pluginmanager.has_plugin("spanreplay") else ["-p", "spanreplay.pytest_plugin"]

    def run_pytest(*args: str) -> pytest.RunResult:
        return pytester.runpytest("-p", "no:cacheprovider", *plugin, *args)

    yield run_pytest
    spanreplay.reset()


def name_max(folder: Path) -> int:
    return os.pathconf(folder, "PC_NAME_MAX")


def test_a_test_id_longer_than_a_file_name_keeps_its_trace_and_replays_it(
    pytester: pytest.Pytester, run: RunPytest
) -> None:
    pytester.makepyfile(test_orders=MODULE.format(first=FIRST, second=SECOND))
    first = run("-s")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines(["*calls 1*", "*calls 2*"])  # live: the tool ran for each
    folder = pytester.path / "traces" / "test_orders"
    names = sorted(p.name for p in folder.iterdir())
    assert len(names) == 2, names  # one trace per test, no scratch folder left
    assert all(HASHED.fullmatch(name) for name in names), names
    assert all(len(os.fsencode(name)) <= name_max(folder) for name in names)
    # The readable start is the test's id; the hash is of the whole (sanitized) name.
    expected = {f"-{hashlib.sha256(f'test_it[{value}]'.encode()).hexdigest()[:16]}.jsonl" for value in (FIRST, SECOND)}
    assert {name[-23:] for name in names} == expected
    orders = {spanreplay.load(folder / name).events[0].input["order_id"] for name in names}
    assert orders == {FIRST, SECOND}

    # The same tests find the same files: replayed, the tool never runs.
    again = run("-s", "--spanreplay-mode=replay")
    again.assert_outcomes(passed=2)
    assert "calls 0" in again.stdout.str()
    assert "calls 1" not in again.stdout.str()
    assert sorted(p.name for p in folder.iterdir()) == names


def test_a_name_that_fits_is_left_as_it_is(tmp_path: Path) -> None:
    assert _fitting(tmp_path, "test_it[" + "A" * 200 + "]", ".jsonl") == "test_it[" + "A" * 200 + "].jsonl"


@given(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=600))
def test_any_long_name_is_cut_to_whole_characters_within_the_limit_and_the_same_each_time(stem: str) -> None:
    folder = Path.cwd()
    name = _fitting(folder, stem, ".jsonl")
    assert name == _fitting(folder, stem, ".jsonl")
    assert len(os.fsencode(name)) <= name_max(folder)
    assert name.endswith(".jsonl")
    if name != stem + ".jsonl":
        start, digest = name.removesuffix(".jsonl").rsplit("-", 1)
        assert stem.startswith(start)
        assert digest == hashlib.sha256(os.fsencode(stem)).hexdigest()[:16]


def test_the_limit_is_read_from_the_nearest_folder_that_exists(tmp_path: Path) -> None:
    missing = tmp_path / "not" / "yet"
    stem = textwrap.shorten("x " * 400, 10_000).replace(" ", "x")
    assert _fitting(missing, stem, ".jsonl") == _fitting(tmp_path, stem, ".jsonl")

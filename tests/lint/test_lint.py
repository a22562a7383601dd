"""The determinism lint: what it finds, where it is allowed, noqa, config, and the CLI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers.paths import REPO
from spanreplay.cli import cli
from spanreplay.errors import ConfigurationError
from spanreplay.lint import lint_paths, lint_source

FIXTURE = Path(__file__).parent / "fixtures" / "direct_calls.py"
_EXPECT = re.compile(r"# expect: (SR\d{3})")


def _expected(source: str) -> set[tuple[int, str]]:
    return {
        (number, match.group(1))
        for number, line in enumerate(source.splitlines(), start=1)
        if (match := _EXPECT.search(line))
    }


@pytest.fixture
def fixture_copy(tmp_path: Path) -> Path:
    # Copied out of the checkout: no pyproject.toml above it configures the lint.
    target = tmp_path / "direct_calls.py"
    shutil.copyfile(FIXTURE, target)
    return target


def test_finds_every_listed_call_and_nothing_else(fixture_copy: Path) -> None:
    expected = _expected(fixture_copy.read_text())
    assert len(expected) >= 30

    found = {(finding.line, finding.code) for finding in lint_paths([fixture_copy]).findings}

    assert found == expected


def test_a_finding_reads_path_line_col_rule_and_advice(fixture_copy: Path) -> None:
    first = lint_paths([fixture_copy]).findings[0]

    line = fixture_copy.read_text().splitlines()[first.line - 1]
    assert line.index("dt.now()") + 1 == first.col
    where = f"{fixture_copy}:{first.line}:{first.col}"
    assert str(first) == f"{where}: SR101 datetime.now() reads the clock directly; use spanreplay.now()"


def test_spanreplays_own_examples_and_demo_are_clean() -> None:
    result = lint_paths([REPO / "examples", REPO / "src" / "spanreplay" / "_demo.py"])

    assert result.files >= 3
    assert [str(finding) for finding in result.findings] == []


@pytest.mark.parametrize(
    ("code", "reported"),
    [
        ("import time as clock\nclock.time()\n", ["SR102"]),
        ("from time import time\ntime()\n", ["SR102"]),
        ("from datetime import datetime as dt\ndt.now()\n", ["SR101"]),
        ("import datetime\ndatetime.datetime.utcnow()\n", ["SR101"]),
        ("from random import choice, shuffle\nchoice([1]); shuffle([1])\n", ["SR201", "SR201"]),
        ("import uuid as u\nu.uuid4()\n", ["SR202"]),
        ("from os import urandom\nurandom(4)\n", ["SR203"]),
        ("from urllib import request\nrequest.urlopen('x')\n", ["SR301"]),
        # Not imported: a local name that happens to be called datetime is not the module.
        ("datetime = object()\ndatetime.now()\n", []),
        # A seeded generator replays the same draws.
        ("import random\nrandom.Random(7).choice([1]); random.seed(3)\n", []),
        # A reference, not a call: handing time.time to a boundary is how it gets recorded.
        ("import time\nimport spanreplay\nspanreplay.boundary('clock', 't', None, time.time)\n", []),
    ],
)
def test_calls_resolve_through_the_import_table(code: str, reported: list[str]) -> None:
    assert [finding.code for finding in lint_source(code)] == reported


def test_monotonic_reads_that_only_measure_are_not_reported() -> None:
    code = (
        "import time\n"
        "start = time.perf_counter()\n"
        "self_elapsed = time.perf_counter() - start\n"
        "log = f'{time.monotonic() - start:.3f}s'\n"
        "late = time.monotonic() - start > 5\n"  # a decision: reported
        "x = start if time.monotonic() - start else 0\n"  # a ternary's test: reported
        "deadline = time.monotonic() + 30\n"  # a deadline: reported
    )

    assert [(f.line, f.code) for f in lint_source(code)] == [(5, "SR103"), (6, "SR103"), (7, "SR103")]


def test_calls_in_a_tool_a_boundary_or_a_boundary_body_are_allowed() -> None:
    code = (
        "import time, httpx\n"
        "import spanreplay as sr\n"
        "from spanreplay import tool as recorded\n"
        "@sr.tool\n"
        "def a():\n"
        "    def inner():\n"
        "        return time.time()\n"
        "    return inner()\n"
        "@recorded(name='b')\n"
        "async def b(): return httpx.get('x')\n"
        "def body(): return httpx.get('y')\n"
        "sr.boundary('http', 'y', None, body)\n"
        "sr.boundary('http', 'z', None, lambda: httpx.get('z'))\n"
        "@sr.tool\n"
        "def c(when=time.time()):\n"  # a default is evaluated outside the tool, when the module loads
        "    return when\n"
    )

    assert [(f.line, f.code) for f in lint_source(code)] == [(15, "SR102")]


def test_column_counts_characters_not_bytes() -> None:
    (finding,) = lint_source('import time\nx = ("é", time.time())\n')

    assert finding.col == 11


def test_noqa_silences_the_named_rules_on_its_line_only() -> None:
    code = (
        "import time, uuid\n"
        "time.time()  # noqa: SR102\n"
        "time.time()  # noqa: SR101\n"
        "uuid.uuid4(); time.time()  # noqa: SR202,SR102\n"
        "uuid.uuid4()  # noqa\n"
        "s = '# noqa'; time.time()\n"
        "time.time()  # NOQA:SR102 lower-case and no space work too\n"
    )

    assert [(f.line, f.code) for f in lint_source(code)] == [(3, "SR102"), (6, "SR102")]


def test_a_file_that_cannot_be_parsed_is_a_finding(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def broken(:\n")

    (finding,) = lint_paths([bad]).findings

    assert finding.code == "SR001"
    assert finding.line == 1
    assert "cannot be parsed" in finding.message


def _project(tmp_path: Path, table: str) -> Path:
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "pyproject.toml").write_text(f"[project]\nname = 'x'\n\n[tool.spanreplay.lint]\n{table}\n")
    package = tmp_path / "src" / "app"
    package.mkdir(parents=True)
    (package / "clock.py").write_text("import time, random\nstamp = time.time()\ndraw = random.random()\n")
    (package / "generated").mkdir()
    (package / "generated" / "ids.py").write_text("import uuid\nident = uuid.uuid4()\n")
    return package


def _codes(paths: list[Path]) -> list[tuple[str, str]]:
    return [(Path(f.path).name, f.code) for f in lint_paths(paths).findings]


def test_config_select_is_read_upward_from_the_linted_path(tmp_path: Path) -> None:
    package = _project(tmp_path, 'select = ["SR1"]')

    assert _codes([package]) == [("clock.py", "SR102")]


def test_config_ignore_wins_over_select(tmp_path: Path) -> None:
    package = _project(tmp_path, 'select = ["SR"]\nignore = ["SR201", "SR2"]')

    assert _codes([package]) == [("clock.py", "SR102")]


def test_config_exclude_leaves_folders_and_files_out(tmp_path: Path) -> None:
    package = _project(tmp_path, 'exclude = ["src/app/generated/"]')
    assert _codes([package]) == [("clock.py", "SR102"), ("clock.py", "SR201")]

    package = _project(tmp_path / "other", 'exclude = ["src/*/clock.py"]')
    assert _codes([package]) == [("ids.py", "SR202")]


def test_config_per_file_ignores(tmp_path: Path) -> None:
    package = _project(tmp_path, '[tool.spanreplay.lint.per-file-ignores]\n"src/app/generated/**" = ["SR202"]')

    assert _codes([package]) == [("clock.py", "SR102"), ("clock.py", "SR201")]


def test_cli_select_and_ignore_override_the_config(tmp_path: Path) -> None:
    package = _project(tmp_path, 'select = ["SR1"]')

    result = CliRunner().invoke(cli, ["lint", str(package), "--select", "SR2", "--ignore", "SR201"])

    assert result.exit_code == 1, result.output
    assert result.stdout.splitlines() == [
        f"{package / 'generated' / 'ids.py'}:2:9: SR202 uuid.uuid4() makes a fresh id; use spanreplay.uuid4()"
    ]


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ('select = ["SR999"]', "'SR999'"),
        ('ignore = ["E501"]', "'E501'"),
        ('colour = "red"', "'colour'"),
        ('select = "SR1"', "select must be a list"),
    ],
)
def test_a_bad_config_names_the_file_and_the_key(tmp_path: Path, table: str, named: str) -> None:
    package = _project(tmp_path, table)

    with pytest.raises(ConfigurationError, match=re.escape(named)) as caught:
        lint_paths([package])
    assert str(tmp_path / "pyproject.toml") in str(caught.value)


def test_cli_exit_codes_and_json(tmp_path: Path) -> None:
    clean = tmp_path / "clean.py"
    clean.write_text("import spanreplay\nstamp = spanreplay.time()\n")
    dirty = tmp_path / "dirty.py"
    dirty.write_text("import time\nstamp = time.time()\n")
    runner = CliRunner()

    assert runner.invoke(cli, ["lint", str(clean)]).exit_code == 0
    missing = runner.invoke(cli, ["lint", str(tmp_path / "nope.py")])
    assert missing.exit_code == 2
    assert "nope.py does not exist" in missing.output
    unknown = runner.invoke(cli, ["lint", str(clean), "--select", "XYZ"])
    assert unknown.exit_code == 2
    assert "'XYZ'" in unknown.output
    found = runner.invoke(cli, ["lint", str(tmp_path), "--json"])
    assert found.exit_code == 1
    assert json.loads(found.stdout) == [
        {
            "path": str(dirty),
            "line": 2,
            "col": 9,
            "code": "SR102",
            "message": "time.time() reads the clock directly; use spanreplay.time()",
            "fixable": True,
        }
    ]


def test_a_file_in_an_unknown_encoding_is_a_finding_and_the_rest_is_linted(tmp_path: Path) -> None:
    (tmp_path / "a_bad.py").write_bytes(b"# coding: uft-8\nx = 1\n")
    (tmp_path / "b_good.py").write_text("import time\nx = time.time()\n")

    findings = lint_paths([tmp_path]).findings

    assert [(Path(f.path).name, f.code) for f in findings] == [("a_bad.py", "SR001"), ("b_good.py", "SR102")]
    assert "cannot be decoded" in findings[0].message

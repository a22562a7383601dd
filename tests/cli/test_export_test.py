"""``spanreplay export-test``: a recorded run becomes a test that passes as is and fails after a change."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import spanreplay
from spanreplay.cli import EXIT_BAD_INPUT, EXIT_OK, cli

pytest_plugins = ["pytester"]

AGENT = """
import spanreplay


class OutOfStock(Exception):
    pass


@spanreplay.tool
def stock(item):
    if item == "lamp":
        raise OutOfStock(f"no {{item}} left")
    return 3


def main():
    spanreplay.uuid4()
    {body}


async def amain():
    return main()
"""
COMPLETES = 'return stock("chair")'
FAILS = 'return stock("lamp")'


@pytest.fixture
def shop(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, trace_dir: Path) -> Path:
    """A project folder with an agent module, the working directory; runs record into ``trace_dir``."""
    monkeypatch.chdir(pytester.path)
    monkeypatch.syspath_prepend(str(pytester.path))
    monkeypatch.delitem(sys.modules, "shop_agent", raising=False)
    return pytester.path


def write_agent(folder: Path, body: str) -> None:
    (folder / "shop_agent.py").write_text(textwrap.dedent(AGENT.format(body=body)))
    sys.modules.pop("shop_agent", None)


def record(folder: Path, body: str) -> str:
    write_agent(folder, body)
    import shop_agent  # type: ignore[import-not-found]

    with spanreplay.record(agent="shop") as run:
        shop_agent.main()
    return run.run_id


def record_failing(folder: Path, trace_dir: Path) -> str:
    with pytest.raises(Exception, match="no lamp left"):
        record(folder, FAILS)
    [run] = spanreplay.runs(trace_dir)
    return run.run_id


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def run_tests(pytester: pytest.Pytester, pytestconfig: pytest.Config, path: Path) -> pytest.RunResult:
    plugin = [] if pytestconfig.pluginmanager.has_plugin("spanreplay") else ["-p", "spanreplay.pytest_plugin"]
    sys.modules.pop("shop_agent", None)
    return pytester.runpytest("-p", "no:cacheprovider", *plugin, str(path))


def test_a_completed_run_exports_a_test_that_passes_then_fails_after_a_change(
    shop: Path, trace_dir: Path, pytester: pytest.Pytester, pytestconfig: pytest.Config
) -> None:
    run_id = record(shop, COMPLETES)
    result = invoke("export-test", str(trace_dir), run_id, "--entry", "shop_agent:main")
    assert result.exit_code == EXIT_OK, result.output
    test_file = shop / "tests" / f"test_regress_{run_id}.py"
    trace = shop / "tests" / "traces" / f"{run_id}.jsonl"
    assert f"wrote tests/test_regress_{run_id}.py and tests/traces/{run_id}.jsonl" in result.output
    # The spans as recorded: the same steps, payloads and outcome.
    original, copied = spanreplay.load(trace_dir, run_id), spanreplay.load(trace)
    assert [(e.seq, e.kind, e.key, e.output_json) for e in copied] == [
        (e.seq, e.kind, e.key, e.output_json) for e in original
    ]
    assert copied.run.status == "ok"
    assert f"def test_{run_id}_completes_as_recorded(" in test_file.read_text()

    run_tests(pytester, pytestconfig, test_file).assert_outcomes(passed=1)
    write_agent(shop, 'return stock("table")')
    changed = run_tests(pytester, pytestconfig, test_file)
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines([f"*spanreplay: the replay of tests/traces/{run_id}.jsonl diverged.*"])
    assert '"table"' in changed.stdout.str()


def test_a_failed_run_exports_a_test_that_expects_the_recorded_error_at_its_step(
    shop: Path, trace_dir: Path, pytester: pytest.Pytester, pytestconfig: pytest.Config
) -> None:
    run_id = record_failing(shop, trace_dir)
    result = invoke("export-test", str(trace_dir), run_id, "--entry", "shop_agent:main", "-o", "t/test_lamp.py")
    assert result.exit_code == EXIT_OK, result.output
    assert "fails with shop_agent.OutOfStock: no lamp left" in result.output
    test_file = shop / "t" / "test_lamp.py"
    source = test_file.read_text()
    assert "# at seq 2, kind 'tool', key 'stock'." in source
    assert "assert 'no lamp left' in str(raised.value)" in source

    run_tests(pytester, pytestconfig, test_file).assert_outcomes(passed=1)
    # A fix: the code now handles the failure, so the recorded one no longer ends the run.
    write_agent(shop, 'try:\n        return stock("lamp")\n    except OutOfStock:\n        return 0')
    fixed = run_tests(pytester, pytestconfig, test_file)
    fixed.assert_outcomes(failed=1)
    fixed.stdout.fnmatch_lines(["*DID NOT RAISE*"])
    # Reaching the error by another path, with a recorded step never asked for, fails too.
    write_agent(shop, 'raise OutOfStock("no lamp left")')
    other = run_tests(pytester, pytestconfig, test_file)
    other.assert_outcomes(failed=1)
    other.stdout.fnmatch_lines(["*diverged*"])


def test_a_coroutine_entry_is_run_to_completion(
    shop: Path, trace_dir: Path, pytester: pytest.Pytester, pytestconfig: pytest.Config
) -> None:
    run_id = record(shop, COMPLETES)
    assert invoke("export-test", str(trace_dir), run_id, "--entry", "shop_agent:amain").exit_code == EXIT_OK
    test_file = shop / "tests" / f"test_regress_{run_id}.py"
    assert "asyncio.run(amain())" in test_file.read_text()
    run_tests(pytester, pytestconfig, test_file).assert_outcomes(passed=1)


def test_bad_input_exits_2_with_the_fix(shop: Path, trace_dir: Path) -> None:
    run_id = record(shop, COMPLETES)
    missing = invoke("export-test", str(trace_dir), "run_nope", "--entry", "shop_agent:main")
    assert missing.exit_code == EXIT_BAD_INPUT
    assert "run_nope" in missing.output
    no_entry = invoke("export-test", str(trace_dir), run_id, "--entry", "nowhere:main")
    assert no_entry.exit_code == EXIT_BAD_INPUT
    assert "module nowhere was not found" in no_entry.output
    postgres = invoke("export-test", "postgresql://postgres@127.0.0.1/test", run_id, "--entry", "shop_agent:main")
    assert postgres.exit_code == EXIT_BAD_INPUT
    assert "Postgres keeps its steps, not its spans" in postgres.output
    assert not (shop / "tests").exists()
    assert invoke("export-test", str(trace_dir), run_id, "--entry", "shop_agent:main").exit_code == EXIT_OK
    again = invoke("export-test", str(trace_dir), run_id, "--entry", "shop_agent:main")
    assert again.exit_code == EXIT_BAD_INPUT
    assert "already exist; pass --force to replace them" in again.output
    assert invoke("export-test", str(trace_dir), run_id, "--entry", "shop_agent:main", "--force").exit_code == EXIT_OK

"""``spanreplay export-test`` on hostile trace files: the trace's strings stay data.

The tool key, agent name, error type and message and run id of the exported run
are read from a trace file, and they once went into the generated test as code:
a tool key ``echo\""";__import__("os").system("touch X");\"""`` ran under pytest,
and a run id of ``/abs/path`` or ``../../x`` put the trace copy outside the output
folder. Each trace below is written by hand (helpers/hand_made_traces.py).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from helpers.hand_made_traces import write_run
from helpers.paths import REPO
from spanreplay.cli import EXIT_BAD_INPUT, EXIT_OK, _export_test, cli
from spanreplay.model.run_ids import RUN_ID

AGENT = """
import spanreplay

KEY = {key!r}


class OutOfStock(Exception):
    pass


def fail():
    raise OutOfStock({message!r})


def main():
    return spanreplay.boundary("tool", KEY, {{"item": "lamp"}}, fail)
"""

# The calls the template makes, with their string constants blanked (ROOT's relative path).
TEMPLATE_CALLS = {
    "str",
    "Path",
    "(Path(__file__).parent / '').resolve",
    "sys.path.insert",
    "pytest.mark.spanreplay",
    "main",
    "pytest.raises",
    "getattr",
    "type",
}
TEMPLATE_STATEMENTS = (ast.Expr, ast.ImportFrom, ast.Import, ast.Assign, ast.If, ast.FunctionDef)


def injection(marker: Path) -> str:
    """Python that creates ``marker`` if it ever runs, in the shape that closed the old docstring."""
    return f'echo""";__import__("os").system("touch {marker}");"""'


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project folder, the working directory, on sys.path; its agent module is written by each test."""
    folder = tmp_path / "shop"
    folder.mkdir()
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "shop_agent", raising=False)
    return folder


def write_agent(folder: Path, key: str, message: str) -> None:
    (folder / "shop_agent.py").write_text(textwrap.dedent(AGENT.format(key=key, message=message)))
    sys.modules.pop("shop_agent", None)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def files_under(folder: Path) -> set[Path]:
    return {p for p in folder.rglob("*") if p.is_file() or p.is_symlink()}


def calls_of(tree: ast.AST) -> set[str]:
    blank = copy.deepcopy(tree)
    for node in ast.walk(blank):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return {ast.unparse(node.func) for node in ast.walk(blank) if isinstance(node, ast.Call)}


def run_pytest_in_a_subprocess(folder: Path, test_file: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(folder)])}
    installed = any(point.name == "spanreplay" for point in entry_points(group="pytest11"))
    plugin = [] if installed else ["-p", "spanreplay.pytest_plugin"]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *plugin, str(test_file)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_tool_key_that_closes_a_docstring_stays_a_string_under_pytest(shop: Path, tmp_path: Path) -> None:
    marker = tmp_path / "X"
    key = injection(marker)
    message = f'no lamp left"""\n__import__("os").system("touch {marker}")\n"""'
    trace = write_run(
        shop / "prod" / "run_20260101_000000_deadbeef.jsonl",
        "run_20260101_000000_deadbeef",
        agent=injection(marker),
        key=key,
        error=("OutOfStock", "shop_agent", message),
    )
    write_agent(shop, key, message)
    result = invoke("export-test", str(trace), "run_20260101_000000_deadbeef", "--entry", "shop_agent:main")
    assert result.exit_code == EXIT_OK, result.output
    test_file = shop / "tests" / "test_regress_run_20260101_000000_deadbeef.py"
    source = test_file.read_text()
    assert repr(key) in source  # the key itself, as a string literal in a comment
    assert calls_of(ast.parse(source)) <= TEMPLATE_CALLS

    ran = run_pytest_in_a_subprocess(shop, test_file)
    assert not marker.exists(), ran.stdout
    # The test is a real one: it replays the hand-made run and finds the recorded failure.
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "1 passed" in ran.stdout


@pytest.mark.parametrize("run_id", ["dot.run", "dash-run", "a.b-c.d"])
def test_a_run_id_with_dots_or_dashes_gives_a_test_file_pytest_imports_and_runs(shop: Path, run_id: str) -> None:
    """Before, run ``dot.run`` gave tests/test_regress_dot.run.py: ModuleNotFoundError stopped the session."""
    trace = write_run(shop / "prod" / "hand.jsonl", run_id, error=("OutOfStock", "shop_agent", "no lamp left"))
    write_agent(shop, "stock", "no lamp left")
    result = invoke("export-test", str(trace), run_id, "--entry", "shop_agent:main")
    assert result.exit_code == EXIT_OK, result.output

    ran = run_pytest_in_a_subprocess(shop, shop / "tests")  # the folder, as a session collects it
    assert "ModuleNotFoundError" not in ran.stdout
    assert "Interrupted" not in ran.stdout
    assert ran.returncode == 0, ran.stdout + ran.stderr
    name = "test_regress_" + run_id.replace(".", "_").replace("-", "_")
    assert f"tests/{name}.py ." in ran.stdout
    assert "1 passed" in ran.stdout
    assert {p.relative_to(shop) for p in files_under(shop / "tests") if "__pycache__" not in p.parts} == {
        Path("tests") / f"{name}.py",
        Path("tests") / "traces" / f"{run_id}.jsonl",  # the copy keeps the run's own id
    }


@pytest.mark.parametrize("run_id", ["/abs/path", "../../x", "../outside", "a/../../b", "run_x\n", "-rf", ".hidden"])
def test_a_run_id_that_is_no_plain_name_is_refused_and_nothing_is_written(shop: Path, run_id: str) -> None:
    trace = write_run(shop / "prod" / "hostile.jsonl", run_id, error=("OutOfStock", "shop_agent", "no lamp left"))
    write_agent(shop, "stock", "no lamp left")
    before = files_under(shop.parent)
    result = invoke("export-test", "--entry", "shop_agent:main", "--", str(trace), run_id)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert f"error: The run id {run_id!r} in {trace} cannot name a trace file: a run id is a letter or digit" in (
        result.output
    )
    assert "give the run another id, or leave this trace out." in result.output
    assert files_under(shop.parent) == before
    assert not (shop / "tests").exists()


def test_the_trace_copy_stays_inside_the_output_folder_through_a_link(shop: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    out = shop / "out"
    out.mkdir()
    # A link planted where the copy goes: traces/run_link.jsonl -> a file outside.
    (out / "traces").mkdir()
    (out / "traces" / "run_link.jsonl").symlink_to(outside / "victim.jsonl")
    trace = write_run(shop / "prod" / "run_link.jsonl", "run_link")
    write_agent(shop, "stock", "")
    result = invoke("export-test", str(trace), "run_link", "--entry", "shop_agent:main", "-o", "out/test_x.py")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert "leads outside the folder" in result.output
    assert list(outside.iterdir()) == []
    assert not (out / "test_x.py").exists()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ('__import__("os").system("true")\n', "would call __import__, __import__('os').system, which the template"),
        ("X = 1\n", "differs from the template"),
    ],
)
def test_a_generated_file_that_is_not_the_template_is_never_written(
    shop: Path, monkeypatch: pytest.MonkeyPatch, extra: str, said: str
) -> None:
    # As if a value had slipped through unescaped: the text differs from the template only
    # where the trace fills it in, and the syntax tree check refuses it.
    original: Callable[..., str] = _export_test.module_text

    def leaky(*args: Any, neutral: bool = False, **options: Any) -> str:
        return original(*args, neutral=neutral, **options) + ("" if neutral else extra)

    monkeypatch.setattr(_export_test, "module_text", leaky)
    trace = write_run(shop / "prod" / "run_leak.jsonl", "run_leak")
    write_agent(shop, "stock", "")
    result = invoke("export-test", str(trace), "run_leak", "--entry", "shop_agent:main")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    text = " ".join(result.output.split())
    assert f"the test written for run 'run_leak' {said}" in text
    assert "a value from the trace would have become code. Nothing was written" in text
    assert not (shop / "tests").exists()


def test_an_entry_that_is_not_python_names_is_refused(shop: Path) -> None:
    trace = write_run(shop / "prod" / "run_entry.jsonl", "run_entry")
    result = invoke("export-test", str(trace), "run_entry", "--entry", "os;x:main")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "is not module:function made of Python names" in result.output
    assert not (shop / "tests").exists()


# Run ids that pass the pattern, and any text at all (most of which fails it).
RUN_IDS = st.one_of(
    st.from_regex(RUN_ID, fullmatch=True),
    st.text(max_size=40),
    st.sampled_from(["/abs/path", "../../x", "..", ".", "a/b", "run_x\n", "C:\\x", "run_a\x00b"]),
)
TEXTS = st.one_of(
    st.text(max_size=60),
    st.sampled_from(['"""', "'''", '\\"""', "\n)\nimport os\n#", "\r__import__('os')", "\u2028x", "\\"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    run_id=RUN_IDS,
    key=TEXTS,
    agent=TEXTS,
    error_type=TEXTS,
    message=TEXTS,
    fails=st.booleans(),
)
# A valid run id whose default test file name was no module name (test_regress_dot.run.py).
@example(run_id="dot.run", key="stock", agent="shop", error_type="OutOfStock", message="none left", fails=True)
def test_any_run_id_key_agent_or_error_gives_a_refusal_or_a_file_of_the_template_inside_the_output_folder(
    shop: Path, run_id: str, key: str, agent: str, error_type: str, message: str, fails: bool
) -> None:
    write_agent(shop, "stock", "")
    with tempfile.TemporaryDirectory(dir=shop) as scratch:
        work = Path(scratch)
        trace = write_run(
            work / "in" / "trace.jsonl",
            run_id,
            key=key,
            agent=agent,
            error=(error_type, "shop_agent", message) if fails else None,
        )
        before = files_under(shop.parent)
        with contextlib.chdir(work):  # the default output, tests/test_regress_RUN.py, under the scratch folder
            result = invoke("export-test", "--entry", "shop_agent:main", "--", str(trace), run_id)
        written = files_under(shop.parent) - before
        event("written" if result.exit_code == EXIT_OK else "refused")
        if result.exit_code != EXIT_OK:
            assert result.exit_code == EXIT_BAD_INPUT, result.output
            assert written == set()
            assert result.output.startswith("error: ")
            assert result.output.rstrip().endswith("."), result.output  # a sentence, with the fix
            assert not RUN_ID.fullmatch(run_id) or not key or not error_type, result.output
            return
        assert RUN_ID.fullmatch(run_id), result.output
        [output] = [p for p in written if p.suffix == ".py"]
        assert output.parent == work / "tests"
        assert written == {output, output.parent / "traces" / f"{run_id}.jsonl"}
        # A name pytest can import the file by: test_regress_dot.run.py is none.
        assert output.stem.startswith("test_regress_")
        assert output.stem.isidentifier(), output.name
        assert all(p.resolve().is_relative_to(output.parent.resolve()) for p in written)
        tree = ast.parse(output.read_text(encoding="utf-8"))
        assert calls_of(tree) <= TEMPLATE_CALLS
        assert all(isinstance(statement, TEMPLATE_STATEMENTS) for statement in tree.body)

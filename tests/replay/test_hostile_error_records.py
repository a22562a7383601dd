"""Recorded errors naming types a trace must never raise: each hostile record is written by the test.

A recorded ``_pytest.outcomes.Exit(returncode=0)`` once ended the whole pytest
session green with the tests after it never run; ``Skipped`` skipped the test;
``KeyboardInterrupt`` aborted the session; and looking a name up with ``getattr``
ran a module's ``__getattr__`` (``pydantic:field_serializer`` imported
``pydantic.functional_serializers``). Replay now raises only ``Exception``
subclasses found in an imported module's ``__dict__``, and refuses the rest
with a RecordedBaseExceptionError that fails the replay.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import spanreplay
from helpers import steering_errors  # imported before the replay, as a project's helpers are
from spanreplay import RecordedBaseExceptionError, RecordedError
from spanreplay import semconv as sc
from spanreplay.cli import cli
from spanreplay.model.error_records import decode_error, rebuild_error

pytest_plugins = ["pytester"]

Span = dict[str, Any]

# (module, type, fields): what a forger writes in place of the recorded error.
HOSTILE = [
    pytest.param("_pytest.outcomes", "Exit", {"msg": "boom", "returncode": 0}, id="pytest-Exit"),
    pytest.param("_pytest.outcomes", "Skipped", {"msg": "boom"}, id="pytest-Skipped"),
    pytest.param("_pytest.outcomes", "Failed", {"msg": "boom"}, id="pytest-Failed"),
    pytest.param("builtins", "KeyboardInterrupt", {}, id="KeyboardInterrupt"),
    pytest.param("builtins", "SystemExit", {"code": 0}, id="SystemExit"),
    pytest.param("builtins", "GeneratorExit", {}, id="GeneratorExit"),
    pytest.param("asyncio.exceptions", "CancelledError", {}, id="CancelledError"),
    pytest.param("unittest.case", "SkipTest", {}, id="unittest-SkipTest"),
    pytest.param("click.exceptions", "Exit", {"exit_code": 0}, id="click-Exit"),
]


@spanreplay.tool
def lookup(n: int) -> int:
    raise RuntimeError("boom")


def agent() -> int:
    return lookup(1)


def agent_that_swallows() -> str:
    try:
        lookup(1)
    except Exception:  # code that catches everything and goes on
        return "carried on"
    return "no error"


def attributes(span: Span) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in span["attributes"]}


def set_payload(span: Span, name: str, text: str) -> None:
    """A payload that passes the size and sha256 checks: both recomputed, as a careful forger would."""
    data = text.encode()
    kept = [a for a in span["attributes"] if a["key"] not in (name, name + sc.SIZE_SUFFIX, name + sc.SHA256_SUFFIX)]
    span["attributes"] = [
        *kept,
        {"key": name, "value": {"stringValue": text}},
        {"key": name + sc.SIZE_SUFFIX, "value": {"intValue": str(len(data))}},
        {"key": name + sc.SHA256_SUFFIX, "value": {"stringValue": hashlib.sha256(data).hexdigest()}},
    ]


def forge_errors(path: Path, record: dict[str, Any]) -> None:
    """Every recorded error in the file (the step's and the run's) replaced by ``record``."""
    text = orjson.dumps(record).decode()
    out, changed = [], 0
    for line in path.read_bytes().splitlines():
        doc = orjson.loads(line)
        for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            for name in (sc.ERROR, sc.RUN_ERROR):
                if name in attributes(span):
                    set_payload(span, name, text)
                    changed += 1
        out.append(orjson.dumps(doc))
    path.write_bytes(b"\n".join(out) + b"\n")
    assert changed >= 2  # the step's error and the run's


def hostile_record(module: str, type_name: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": type_name, "module": module, "message": "boom", "args": ["boom"], "fields": fields}


def record_failing_run(directory: Path) -> tuple[Path, str]:
    with pytest.raises(RuntimeError), spanreplay.record(agent="t") as run:
        agent()
    return directory / f"{run.run_id}.jsonl", run.run_id


@pytest.fixture
def recorded(trace_dir: Path) -> tuple[Path, str]:
    return record_failing_run(trace_dir)


@pytest.mark.parametrize(("module", "type_name", "fields"), HOSTILE)
def test_a_recorded_control_flow_exception_replays_as_a_spanreplay_error_that_fails(
    recorded: tuple[Path, str], module: str, type_name: str, fields: dict[str, Any]
) -> None:
    import asyncio  # noqa: F401  (imported, so that only the rule can refuse its CancelledError)
    import unittest  # noqa: F401

    import click  # noqa: F401

    path, run_id = recorded
    forge_errors(path, hostile_record(module, type_name, fields))
    with pytest.raises(RecordedBaseExceptionError) as caught, spanreplay.replay(path, run_id):
        agent()
    error = caught.value
    assert isinstance(error, spanreplay.SpanReplayError)
    assert not isinstance(error, RecordedError)  # which would count as reproducing the recorded failure
    assert (error.module, error.type_name, error.message) == (module, type_name, "boom")
    named = type_name if module == "builtins" else f"{module}.{type_name}"
    assert str(error).startswith(f"The recording holds a {named} ('boom') raised at run {run_id} seq 1 (tool 'lookup')")
    assert "replay refuses to raise it again" in str(error)


# A project's own subclasses of those, in an imported module outside the refused packages.
SUBCLASSES = [
    pytest.param("NeedsNetwork", "unittest.case.SkipTest", {}, id="SkipTest-subclass"),
    pytest.param("Done", "click.exceptions.Exit", {"exit_code": 0}, id="click-Exit-subclass"),
    pytest.param("Refused", "click.exceptions.ClickException", {"exit_code": 0}, id="ClickException-subclass"),
]


@pytest.mark.parametrize(("type_name", "base", "fields"), SUBCLASSES)
def test_a_subclass_of_a_refused_exception_is_refused_naming_the_class_and_its_base(
    recorded: tuple[Path, str], type_name: str, base: str, fields: dict[str, Any]
) -> None:
    path, run_id = recorded
    module = "helpers.steering_errors"
    forge_errors(path, hostile_record(module, type_name, fields))
    with pytest.raises(RecordedBaseExceptionError) as caught, spanreplay.replay(path, run_id):
        agent()
    text = " ".join(str(caught.value).split())
    assert text.startswith(f"The recording holds a {module}.{type_name} ('boom') raised at run {run_id} seq 1")
    assert (
        f"replay refuses to raise it again: {module}.{type_name} inherits from {base}, and {base.rsplit('.', 1)[0]}"
        in (text)
    )
    assert "whose exceptions skip tests, end a test session or choose a process's exit code." in text


def test_a_rebuilder_that_returns_a_subclass_of_a_refused_exception_is_refused_too() -> None:
    def rebuild(info: spanreplay.ErrorInfo) -> BaseException | None:
        return steering_errors.NeedsNetwork(info.message) if info.type_name == "Offline" else None

    spanreplay.register_error_rebuilder(rebuild)
    try:
        rebuilt = rebuild_error(decode_error(orjson.dumps(hostile_record("mymodule", "Offline", {}))))
    finally:
        from spanreplay.model import error_records as _error_records

        _error_records._rebuilders.remove(rebuild)
    assert isinstance(rebuilt, RecordedBaseExceptionError)
    assert "helpers.steering_errors.NeedsNetwork inherits from unittest.case.SkipTest" in str(rebuilt)


@pytest.mark.parametrize(("module", "type_name", "fields"), HOSTILE[:5])
def test_code_that_catches_the_refusal_still_ends_the_replay_with_it(
    recorded: tuple[Path, str], module: str, type_name: str, fields: dict[str, Any]
) -> None:
    path, run_id = recorded
    forge_errors(path, hostile_record(module, type_name, fields))
    with pytest.raises(RecordedBaseExceptionError) as caught, spanreplay.replay(path, run_id):
        assert agent_that_swallows() == "carried on"
    assert "The code caught this error" in "\n".join(caught.value.__notes__)


def test_a_name_a_module_getattr_would_import_is_not_looked_up_that_way(trace_dir: Path, tmp_path: Path) -> None:
    """Run in a fresh interpreter where pydantic is imported and pydantic.functional_serializers is not."""
    path, run_id = record_failing_run(trace_dir)
    forge_errors(path, hostile_record("pydantic", "field_serializer", {}))
    script = textwrap.dedent(
        f"""
        import sys
        import pydantic
        import spanreplay

        assert "pydantic.functional_serializers" not in sys.modules, "the check needs it not imported yet"

        @spanreplay.tool
        def lookup(n):
            raise AssertionError("replay must not run the tool")

        try:
            with spanreplay.replay({str(path)!r}, {run_id!r}):
                lookup(1)
        except spanreplay.RecordedError as exc:
            print("raised", type(exc).__name__, exc)
        print("imported", "pydantic.functional_serializers" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert "raised RecordedError pydantic.field_serializer: boom" in done.stdout
    assert "pydantic has no exception type field_serializer" in done.stdout
    assert "imported False" in done.stdout


def test_names_are_read_from_module_dicts_only() -> None:
    class Lazy(Exception):
        pass

    module = type(sys)("spanreplay_test_lazy_module")
    looked_up: list[str] = []

    def module_getattr(name: str) -> type[Exception]:
        looked_up.append(name)
        return Lazy

    module.__getattr__ = module_getattr  # type: ignore[method-assign]
    sys.modules[module.__name__] = module
    try:
        record = hostile_record(module.__name__, "Lazy", {})
        rebuilt = rebuild_error(decode_error(orjson.dumps(record)))
    finally:
        del sys.modules[module.__name__]
    assert looked_up == []
    assert isinstance(rebuilt, RecordedError)
    assert f"{module.__name__} has no exception type Lazy" in str(rebuilt)


def test_a_type_from_a_module_not_imported_is_not_imported(tmp_path: Path) -> None:
    record = hostile_record("spanreplay_never_imported_module", "Boom", {})
    rebuilt = rebuild_error(decode_error(orjson.dumps(record)))
    assert isinstance(rebuilt, RecordedError)
    assert "spanreplay_never_imported_module" not in sys.modules


@pytest.mark.parametrize(
    "type_name",
    ["ValueError.__init__", "ValueError.__class__", "OSError.errno", "<locals>.X", "ValueError.mro"],
)
def test_a_qualified_name_walks_class_dicts_to_classes_only(type_name: str) -> None:
    rebuilt = rebuild_error(decode_error(orjson.dumps(hostile_record("builtins", type_name, {}))))
    assert isinstance(rebuilt, RecordedError)


def test_recorded_fields_never_reach_dunder_attributes() -> None:
    record = {
        "type": "ValueError",
        "module": "builtins",
        "message": "boom",
        "args": ["boom"],
        "fields": {"__notes__": "a str where pytest expects a list", "__class__": "KeyError", "detail": 7},
    }
    rebuilt = rebuild_error(decode_error(orjson.dumps(record)))
    assert type(rebuilt) is ValueError
    assert not hasattr(rebuilt, "__notes__")
    assert rebuilt.detail == 7  # type: ignore[attr-defined]


def test_a_rebuilder_that_returns_a_base_exception_is_refused_too() -> None:
    def rebuild(info: spanreplay.ErrorInfo) -> BaseException | None:
        return KeyboardInterrupt() if info.type_name == "Interrupt" else None

    spanreplay.register_error_rebuilder(rebuild)
    try:
        rebuilt = rebuild_error(decode_error(orjson.dumps(hostile_record("mymodule", "Interrupt", {}))))
    finally:
        from spanreplay.model import error_records as _error_records

        _error_records._rebuilders.remove(rebuild)
    assert isinstance(rebuilt, RecordedBaseExceptionError)
    assert "KeyboardInterrupt is a BaseException but not an Exception" in str(rebuilt)


def test_a_recorded_pytest_exit_fails_the_test_and_the_session_goes_on(
    pytester: pytest.Pytester, trace_dir: Path, pytestconfig: pytest.Config
) -> None:
    """In a pytest subprocess: before, the session ended with exit 0 and the failing test never ran."""
    path, _ = record_failing_run(trace_dir)
    forge_errors(path, hostile_record("_pytest.outcomes", "Exit", {"msg": "boom", "returncode": 0}))
    traces = pytester.path / "traces" / "test_hostile"
    traces.mkdir(parents=True)
    path.rename(traces / "test_replays_the_forged_trace.jsonl")
    pytester.makepyfile(
        test_hostile="""
        import pytest
        import spanreplay

        @spanreplay.tool
        def lookup(n):
            raise AssertionError("replay must not run the tool")

        @pytest.mark.spanreplay
        def test_replays_the_forged_trace():
            lookup(1)

        def test_after_it():
            assert False, "test_after_it ran and failed"
        """
    )
    plugin = [] if pytestconfig.pluginmanager.has_plugin("spanreplay") else ["-p", "spanreplay.pytest_plugin"]
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *plugin, "--spanreplay-mode=replay")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(failed=2)
    output = result.stdout.str()
    assert "RecordedBaseExceptionError: The recording holds a _pytest.outcomes.Exit ('boom')" in output
    assert "test_after_it ran and failed" in output


def test_a_recorded_skip_test_subclass_fails_the_test_instead_of_skipping_it(
    pytester: pytest.Pytester, trace_dir: Path, pytestconfig: pytest.Config
) -> None:
    """In a pytest subprocess, with the project's own SkipTest subclass imported: before, the test was skipped."""
    path, run_id = record_failing_run(trace_dir)
    forge_errors(path, hostile_record("net_helpers", "NeedsNetwork", {}))
    traces = pytester.path / "traces"
    traces.mkdir()
    path.rename(traces / "forged.jsonl")
    pytester.makepyfile(
        net_helpers="""
        import unittest

        class NeedsNetwork(unittest.SkipTest):
            pass
        """,
        test_offline=f"""
        import net_helpers
        import spanreplay

        @spanreplay.tool
        def lookup(n):
            raise AssertionError("replay must not run the tool")

        def test_replays_the_forged_trace():
            with spanreplay.replay("traces/forged.jsonl", {run_id!r}):
                lookup(1)
        """,
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:spanreplay", "-rs")
    result.assert_outcomes(failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    output = " ".join(result.stdout.str().split())
    assert "RecordedBaseExceptionError: The recording holds a net_helpers.NeedsNetwork ('boom')" in output
    assert "net_helpers.NeedsNetwork inherits from unittest.case.SkipTest" in output


@pytest.mark.parametrize(("module", "type_name", "fields"), [HOSTILE[0], HOSTILE[3], HOSTILE[4]])
def test_check_and_replay_report_the_refusal_and_exit_non_zero(
    recorded: tuple[Path, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    module: str,
    type_name: str,
    fields: dict[str, Any],
) -> None:
    path, run_id = recorded
    forge_errors(path, hostile_record(module, type_name, fields))
    (tmp_path / "hostile_agent.py").write_text(
        textwrap.dedent(
            """
            import spanreplay

            @spanreplay.tool
            def lookup(n):
                raise AssertionError("replay must not run the tool")

            def main():
                lookup(1)
            """
        )
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    runner = CliRunner()
    replayed = runner.invoke(cli, ["replay", str(path), run_id, "--entry", "hostile_agent:main"])
    assert replayed.exit_code not in (0, None), replayed.output
    assert "RecordedBaseExceptionError" in replayed.output
    assert "replay refuses to raise it again" in replayed.output
    checked = runner.invoke(cli, ["check", str(path), "--entry", "hostile_agent:main", "--json"])
    assert checked.exit_code == 1, checked.output
    [verdict] = json.loads(checked.stdout)["runs"]
    assert verdict["outcome"] == "diverged"
    assert verdict["error_type"] == "RecordedBaseExceptionError"
    assert "replay refuses to raise it again" in verdict["reason"]

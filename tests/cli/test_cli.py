"""The spanreplay command line, in process: every command, every exit code, every bad input."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanreplay
from helpers.paths import THIRD_PARTY
from spanreplay.cli import EXIT_BAD_INPUT, EXIT_DIVERGED, EXIT_OK, EXIT_REPRODUCED, cli

# The agent the replay tests run through --entry. SETTINGS lets a test change the
# code's behaviour after recording, the way an edit to the agent would; CALLS
# records every real tool call, so a test can prove replay made none.
AGENT_SOURCE = '''
import asyncio
import os
import signal

import spanreplay

SETTINGS = {"item": "apple", "fail": False, "kill": False, "catch": False, "extra": False,
            "stop_early": False, "divide": False, "note": "first"}
CALLS = []


class QuotaExceeded(Exception):
    """The upstream API refused the call."""


@spanreplay.tool
def fetch(item: str, limit: int = 3) -> dict:
    CALLS.append(("fetch", item))
    if SETTINGS["fail"]:
        raise QuotaExceeded(f"quota exceeded while fetching {item}")
    return {"item": item, "price": 3}


@spanreplay.tool
def store(record: dict) -> str:
    CALLS.append(("store", record["item"]))
    if SETTINGS["kill"]:
        os.kill(os.getpid(), signal.SIGKILL)
    return "stored " + record["item"]


def main():
    stamp = spanreplay.now().isoformat()
    try:
        got = fetch(SETTINGS["item"])
    except QuotaExceeded:
        if not SETTINGS["catch"]:
            raise
        return "gave up"
    if SETTINGS["stop_early"]:
        return "stopped early"
    result = store({"item": got["item"], "at": stamp, "note": SETTINGS["note"]})
    if SETTINGS["extra"]:
        fetch("banana")
    if SETTINGS["divide"]:
        return 1 / 0
    return result


async def amain():
    await asyncio.sleep(0)
    return main()


def needs_argument(order_id):
    return order_id


NOT_A_FUNCTION = 42
'''


def invoke(*args: str, obj: Any = None) -> Result:
    return CliRunner().invoke(cli, list(args), obj=obj, prog_name="spanreplay")


def assert_bad_input(result: Result, *fragments: str) -> None:
    """Exit 2, one sentence on stderr that names what is wrong, and no traceback."""
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert "Traceback" not in result.output
    assert result.stderr.startswith("error: ")
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace_dir: Path) -> Iterator[ModuleType]:
    """A fresh agent module in the current directory, recorded through the test's provider."""
    name = f"agent_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(AGENT_SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)


def record(agent: ModuleType, function: Callable[[], Any] | None = None, **changes: Any) -> str:
    """Record one run of the agent with SETTINGS changed; returns its run id."""
    agent.SETTINGS.update(changes)
    run_id = ""
    try:
        with spanreplay.record(agent="shop") as run:
            run_id = run.run_id
            (function or agent.main)()
    except agent.QuotaExceeded:
        pass
    agent.SETTINGS.update(dict.fromkeys(("fail", "kill", "catch", "extra", "stop_early"), False))
    agent.CALLS.clear()
    return run_id


def replay(agent: ModuleType, run_id: str, *extra: str, entry: str = "main") -> Result:
    return invoke("replay", "traces", run_id, "--entry", f"{agent.__name__}:{entry}", *extra)


# --- global options ------------------------------------------------------------------------


def test_version_prints_the_installed_version() -> None:
    result = invoke("--version")
    assert result.exit_code == EXIT_OK
    assert spanreplay.__version__ in result.output


def test_unknown_command_is_a_usage_error_with_exit_2() -> None:
    result = invoke("replay-all")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "No such command" in result.output


def test_replay_help_documents_every_exit_code() -> None:
    result = invoke("replay", "--help")
    assert result.exit_code == EXIT_OK
    for code, meaning in [("0", "completed"), ("1", "reproduced"), ("2", "bad input"), ("3", "divergence")]:
        assert any(line.strip().startswith(f"{code} ") and meaning in line for line in result.output.splitlines()), (
            code,
            result.output,
        )


def test_debug_shows_the_traceback_of_a_bad_input_and_still_exits_2(tmp_path: Path) -> None:
    quiet = invoke("runs", str(tmp_path / "missing"))
    loud = invoke("--debug", "runs", str(tmp_path / "missing"))
    assert "Traceback" not in quiet.output
    assert quiet.exit_code == loud.exit_code == EXIT_BAD_INPUT
    assert "Traceback (most recent call last)" in loud.stderr
    assert "TraceFormatError" in loud.stderr
    assert loud.stderr.rstrip().endswith(quiet.stderr.rstrip())


# --- runs ----------------------------------------------------------------------------------


def test_runs_lists_each_run_with_status_steps_and_error(agent: ModuleType, trace_dir: Path) -> None:
    ok = record(agent)
    failed = record(agent, fail=True)
    result = invoke("runs", "traces")
    assert result.exit_code == EXIT_OK, result.output
    lines = {line.split()[0]: line for line in result.stdout.splitlines() if line.strip().startswith("run_")}
    assert set(lines) == {ok, failed}
    assert " ok " in lines[ok]
    assert " error " in lines[failed]
    assert "QuotaExceeded: quota exceeded while fetching apple" in lines[failed]
    assert "2 run(s), 1 not ok" in result.stdout


def test_runs_json_holds_the_same_facts_as_the_library(agent: ModuleType, trace_dir: Path) -> None:
    record(agent)
    record(agent, fail=True)
    result = invoke("runs", "traces", "--json")
    assert result.exit_code == EXIT_OK
    assert json.loads(result.stdout) == [r.to_dict() for r in spanreplay.runs("traces")]
    statuses = sorted(r["status"] for r in json.loads(result.stdout))
    assert statuses == ["error", "ok"]


def test_runs_on_files_without_spanreplay_runs_says_so_and_exits_0() -> None:
    for source in [THIRD_PARTY / "opentelemetry-proto" / "trace.json", THIRD_PARTY / "jaeger" / "ui_01.json"]:
        result = invoke("runs", str(source))
        assert result.exit_code == EXIT_OK, result.output
        assert result.stdout.strip() == f"no spanreplay runs in {source}"
        assert invoke("runs", str(source), "--json").stdout.strip() == "[]"


def test_runs_on_the_third_party_fixture_directory_finds_only_the_foreign_run_and_exits_0() -> None:
    result = invoke("runs", str(THIRD_PARTY))
    assert result.exit_code == EXIT_OK, result.output
    # Its one agent trace of another instrumentation is a run named by its trace id (docs/foreign.md).
    assert "4a1b2c3d4e5f60718293a4b5c6d7e8f9" in result.stdout
    assert "1 run(s)" in result.stdout


def test_runs_warns_on_stderr_about_a_torn_last_line_and_lists_the_rest(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    path = trace_dir / f"{run_id}.jsonl"
    data = path.read_bytes()
    last = data.splitlines()[-1]
    # The writer was killed while writing a last span: half a line, no newline.
    path.write_bytes(data + last[: len(last) * 3 // 4])
    result = invoke("runs", "traces")
    assert result.exit_code == EXIT_OK, result.output
    assert run_id in result.stdout
    assert result.stderr.startswith("warning: ")
    assert "cut short" in result.stderr


def test_a_run_whose_process_was_killed_shows_as_crashed(agent: ModuleType, tmp_path: Path) -> None:
    run_id = record_in_subprocess(agent, tmp_path, kill=True)
    result = invoke("runs", "traces", "--json")
    [run] = json.loads(result.stdout)
    assert (run["run_id"], run["status"]) == (run_id, "crashed")
    assert run_id in invoke("runs", "traces").stdout


def record_in_subprocess(agent: ModuleType, cwd: Path, **changes: Any) -> str:
    """Record one run in a child process (one that may die), into cwd/traces."""
    script = textwrap.dedent(
        f"""
        import spanreplay, {agent.__name__} as agent
        agent.SETTINGS.update({changes!r})
        spanreplay.configure(service_name="shop", trace_dir="traces")
        with spanreplay.record(agent="shop") as run:
            print(run.run_id, flush=True)
            agent.main()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip(), proc.stderr
    return proc.stdout.split()[0]


# --- show ----------------------------------------------------------------------------------


def test_show_prints_the_run_header_and_one_line_per_step(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent, fail=True)
    result = invoke("show", "traces", run_id)
    assert result.exit_code == EXIT_OK, result.output
    out = result.stdout
    for label, value in [("run", run_id), ("agent", "shop"), ("status", "error"), ("service", "test-agent")]:
        assert any(line.split()[:2] == [label, value] for line in out.splitlines()), (label, out)
    assert "QuotaExceeded: quota exceeded while fetching apple" in out
    steps = [line.split() for line in out.splitlines() if "│" in line]
    assert [s[:5] for s in steps] == [
        ["1", "│", "clock:now#0", "│", "clock"],
        ["2", "│", "tool:fetch#0", "│", "tool"],
    ]
    assert "error" in steps[1]
    assert '{"item":"apple","limit":3}' in out
    assert "2 step(s)" in out


def test_show_without_a_run_id_shows_the_only_run(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    result = invoke("show", "traces")
    assert result.exit_code == EXIT_OK, result.output
    assert run_id in result.stdout
    assert "tool:store#0" in result.stdout


def test_show_without_a_run_id_on_a_source_of_many_runs_lists_them(agent: ModuleType, trace_dir: Path) -> None:
    first, second = record(agent), record(agent)
    assert_bad_input(invoke("show", "traces"), "holds 2 runs", first, second)


def test_show_seq_prints_the_full_input_and_output_as_json(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent, note="x" * 300)
    event = spanreplay.load("traces", run_id).by_seq(3)
    assert event is not None
    result = invoke("show", "traces", run_id, "--seq", "3")
    assert result.exit_code == EXIT_OK, result.output
    text = result.stdout
    assert "call id tool:store#0" in text
    input_part, output_part = text.split("input:", 1)[1].split("output:", 1)
    assert json.loads(input_part) == event.input
    assert event.input["record"]["note"] == "x" * 300  # nothing cut short
    assert json.loads(output_part) == "stored apple"


def test_show_seq_of_a_failed_step_prints_the_recorded_error(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent, fail=True)
    result = invoke("show", "traces", run_id, "--seq", "2")
    assert result.exit_code == EXIT_OK
    error = json.loads(result.stdout.split("error:", 1)[1])
    assert error == {
        "type": "QuotaExceeded",
        "module": agent.__name__,
        "message": "quota exceeded while fetching apple",
        "fields": {},
    }


def test_show_json_lists_the_run_and_every_step(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    data = json.loads(invoke("show", "traces", run_id, "--json").stdout)
    log = spanreplay.load("traces", run_id)
    assert data["run"]["run_id"] == run_id
    assert data["run"]["status"] == "ok"
    assert [(s["seq"], s["call_id"], s["input"], s["output"]) for s in data["steps"]] == [
        (e.seq, e.call_id, e.input, e.output) for e in log
    ]
    one = json.loads(invoke("show", "traces", run_id, "--seq", "2", "--json").stdout)
    assert one == data["steps"][1]


def test_show_seq_beyond_the_run_names_the_range(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    assert_bad_input(invoke("show", "traces", run_id, "--seq", "9"), f"Run {run_id} has no step at seq 9", "1 to 3")


def test_show_seq_zero_is_a_usage_error() -> None:
    result = invoke("show", "traces", "--seq", "0")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "--seq" in result.output


# --- replay: the four verdicts ----------------------------------------------------------------


def test_replay_of_a_completed_run_exits_0_without_calling_a_real_tool(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    result = replay(agent, run_id)
    assert result.exit_code == EXIT_OK, result.output
    assert "completed: the replay matched the recording; 3 of 3 recorded steps served" in result.stdout
    assert "returned: 'stored apple'" in result.stdout
    assert agent.CALLS == []


def test_replay_reproduces_a_recorded_failure_at_its_seq_and_exits_1(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent, fail=True)
    result = replay(agent, run_id)
    assert result.exit_code == EXIT_REPRODUCED, result.output
    assert "reproduced: QuotaExceeded: quota exceeded while fetching apple was raised again at seq 2" in result.stdout
    assert "the step where the recorded run failed" in result.stdout
    assert agent.CALLS == []


def test_replay_of_a_crashed_run_reproduces_reaching_the_point_where_it_died(
    agent: ModuleType, trace_dir: Path, tmp_path: Path
) -> None:
    run_id = record_in_subprocess(agent, tmp_path, kill=True)
    result = replay(agent, run_id)
    assert result.exit_code == EXIT_REPRODUCED, result.output
    assert "reached seq 2, where the recorded process died" in result.stdout
    assert agent.CALLS == []  # the tool that killed the process did not run again


def test_replay_of_a_coroutine_entry_runs_it_to_completion(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    result = replay(agent, run_id, entry="amain")
    assert result.exit_code == EXIT_OK, result.output
    assert "returned: 'stored apple'" in result.stdout


def test_replay_of_a_changed_input_exits_3_with_both_sides_and_the_diff(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    agent.SETTINGS["item"] = "pear"
    result = replay(agent, run_id)
    assert result.exit_code == EXIT_DIVERGED, result.output
    err = result.stderr
    assert err.startswith("diverged: ")
    recorded = next(line for line in err.splitlines() if line.startswith("Recorded:"))
    attempted = next(line for line in err.splitlines() if line.startswith("Attempted:"))
    assert '"apple"' in recorded
    assert '"pear"' not in recorded
    assert '"pear"' in attempted
    assert '-  "item": "apple"' in err
    assert '+  "item": "pear"' in err
    assert agent.CALLS == []


def test_replay_ignore_leaves_a_path_out_of_the_comparison(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent, note="first")
    agent.SETTINGS["note"] = "second"
    assert replay(agent, run_id).exit_code == EXIT_DIVERGED
    result = replay(agent, run_id, "--ignore", "record.note")
    assert result.exit_code == EXIT_OK, result.output


def test_replay_that_stops_early_reports_leftover_steps_and_exits_3(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    agent.SETTINGS["stop_early"] = True
    result = replay(agent, run_id)
    assert result.exit_code == EXIT_DIVERGED, result.output
    assert "1 recorded event(s) never asked for, the first at seq 3" in result.stderr


def test_replay_with_an_extra_call_exits_3_naming_it(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    agent.SETTINGS["extra"] = True
    result = replay(agent, run_id)
    assert result.exit_code == EXIT_DIVERGED, result.output
    assert "a call the recording does not have" in result.stderr
    assert '"banana"' in result.stderr


def test_replay_where_the_recorded_failure_no_longer_happens_exits_3(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent, fail=True)
    agent.SETTINGS["catch"] = True
    result = replay(agent, run_id)
    assert result.exit_code == EXIT_DIVERGED, result.output
    assert "The failure no longer happens" in result.stderr


def test_replay_where_a_run_that_succeeded_now_fails_exits_3(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    agent.SETTINGS["divide"] = True  # fails between boundaries, after every step matched
    result = replay(agent, run_id)
    assert result.exit_code == EXIT_DIVERGED, result.output
    assert "failed with ZeroDivisionError" in result.stderr
    assert "recorded run did not fail" in result.stderr


HANDLED_SOURCE = """
import spanreplay

SETTINGS = {"notify": True, "clock": True}


class CardDeclined(Exception):
    pass


@spanreplay.tool
def carrier(order: str) -> str:
    raise CardDeclined(f"{order} was declined")


@spanreplay.tool
def ship(order: str) -> str:
    try:
        return carrier(order)
    finally:
        spanreplay.now()  # nested in ship, after the failure


def main():
    spanreplay.boundary("tool", "search", {"q": "A1"}, lambda: 1)
    try:
        ship("A1")
    except CardDeclined:
        if SETTINGS["notify"]:
            spanreplay.boundary("tool", "notify", {"order": "A1"}, lambda: "sent")
        if SETTINGS["clock"]:
            spanreplay.now()
        raise
"""


@pytest.fixture
def handled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace_dir: Path) -> Iterator[tuple[ModuleType, str]]:
    """An agent whose failure is nested in a tool and handled (logged, then re-raised), and its recorded run."""
    name = f"handled_{uuid.uuid4().hex[:10]}"
    (tmp_path / f"{name}.py").write_text(HANDLED_SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    with pytest.raises(module.CardDeclined), spanreplay.record(agent="shop") as run:
        module.main()
    yield module, run.run_id
    sys.modules.pop(name, None)


def test_an_unchanged_replay_of_a_handled_failure_says_every_recorded_step_was_served(
    handled: tuple[ModuleType, str],
) -> None:
    module, run_id = handled
    # 1 search, 2 ship, 3 carrier (failed, in ship), 4 clock in ship's finally, 5 notify, 6 clock: served
    # calls serve what they nest, and steps after the failing one count, so the count is of the whole run.
    result = invoke("replay", "traces", run_id, "--entry", f"{module.__name__}:main")
    assert result.exit_code == EXIT_REPRODUCED, result.output
    assert (
        "reproduced: CardDeclined: A1 was declined was raised again at seq 3 (tool 'carrier'), the step where the "
        "recorded run failed; all 6 recorded steps served (3 of them recorded after it, as the error was handled), "
        "no real call made."
    ) in " ".join(result.stdout.split())
    assert "steps up to it" not in result.stdout


def test_a_replay_that_reaches_the_recorded_error_skipping_steps_names_the_first_it_skipped(
    handled: tuple[ModuleType, str],
) -> None:
    module, run_id = handled
    module.SETTINGS.update(notify=False, clock=False)
    result = invoke("replay", "traces", run_id, "--entry", f"{module.__name__}:main")
    assert result.exit_code == EXIT_REPRODUCED, result.output
    assert (
        "CardDeclined: A1 was declined was raised again, as recorded at seq 3 (tool 'carrier'), but the replay never "
        "asked for 2 of the 6 recorded steps, the first at seq 5 (tool 'notify'): it reached the error another way"
    ) in " ".join(result.stdout.split())


def test_a_step_skipped_before_a_later_one_is_a_divergence_at_the_skipped_step(
    handled: tuple[ModuleType, str],
) -> None:
    module, run_id = handled
    module.SETTINGS["notify"] = False  # the clock read after it is then out of the recorded order
    result = invoke("replay", "traces", run_id, "--entry", f"{module.__name__}:main")
    assert result.exit_code == EXIT_DIVERGED, result.output
    told = " ".join(result.stderr.split())
    assert "diverged at seq 5: the code made a call out of the recorded order" in told
    assert "Recorded: tool 'notify'" in told


def test_replay_rebuilds_an_error_recorded_by_the_entry_run_as_a_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"shop_script_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            import spanreplay

            class OutOfStock(Exception):
                pass

            @spanreplay.tool
            def reserve(sku: str) -> dict:
                raise OutOfStock(f"{sku} is out of stock")

            def main():
                return reserve("sku-1")

            if __name__ == "__main__":
                spanreplay.configure(trace_dir="traces")
                with spanreplay.record(agent="script") as run:
                    print(run.run_id, flush=True)
                    main()
            """
        )
    )
    proc = subprocess.run([sys.executable, f"{name}.py"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    run_id = proc.stdout.split()[0]
    assert spanreplay.runs(tmp_path / "traces")[0].error == "__main__.OutOfStock: sku-1 is out of stock"
    monkeypatch.chdir(tmp_path)
    try:
        result = invoke("replay", "traces", run_id, "--entry", f"{name}:main")
    finally:
        sys.modules.pop(name, None)
    assert result.exit_code == EXIT_REPRODUCED, result.output
    assert "reproduced: OutOfStock: sku-1 is out of stock was raised again at seq 1" in result.stdout


# --- replay: bad --entry and options ------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "fragment"),
    [
        ("no_colon_here", "is not module:function"),
        (":main", "is not module:function"),
        ("module_that_does_not_exist_xyz:main", "module module_that_does_not_exist_xyz was not found"),
        ("{agent}:no_such_function", "has no attribute no_such_function"),
        ("{agent}:NOT_A_FUNCTION", "NOT_A_FUNCTION is a int, not a function"),
        ("{agent}:needs_argument", "takes required arguments (order_id)"),
    ],
)
def test_replay_with_an_unusable_entry_exits_2(agent: ModuleType, trace_dir: Path, entry: str, fragment: str) -> None:
    run_id = record(agent)
    result = invoke("replay", "traces", run_id, "--entry", entry.format(agent=agent.__name__))
    assert_bad_input(result, fragment)


def test_replay_with_an_entry_whose_import_raises_exits_2(agent: ModuleType, trace_dir: Path, tmp_path: Path) -> None:
    run_id = record(agent)
    broken = f"broken_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{broken}.py").write_text("raise RuntimeError('needs DATABASE_URL')\n")
    result = invoke("replay", "traces", run_id, "--entry", f"{broken}:main")
    assert_bad_input(result, f"importing {broken} raised RuntimeError: needs DATABASE_URL")


def test_replay_without_entry_is_a_usage_error(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    result = invoke("replay", "traces", run_id)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "--entry" in result.output


def test_replay_with_a_malformed_ignore_path_exits_2(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    assert_bad_input(replay(agent, run_id, "--ignore", "record["), "JSON path 'record['")


def test_replay_imports_the_entry_from_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, agent: ModuleType
) -> None:
    run_id = record(agent)
    # The same agent under a name nothing has imported, in a directory not on sys.path.
    other = tmp_path / "elsewhere"
    other.mkdir()
    fresh = f"fresh_{uuid.uuid4().hex[:8]}"
    (other / f"{fresh}.py").write_text(AGENT_SOURCE)
    monkeypatch.chdir(other)
    path_before = list(sys.path)
    try:
        result = invoke("replay", str(tmp_path / "traces"), run_id, "--entry", f"{fresh}:main")
    finally:
        sys.modules.pop(fresh, None)
    assert result.exit_code == EXIT_OK, result.output
    assert sys.path == path_before


# --- bad input: one sentence, exit 2, no traceback ---------------------------------------------


def test_a_malformed_line_in_a_trace_file_names_the_file_and_line(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    path = trace_dir / f"{run_id}.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1][: len(lines[1]) // 2] + b"\n"  # a complete line that is not complete JSON
    path.write_bytes(b"".join(lines))
    # The listing reads on (one warning) and says the run is damaged; show refuses it.
    listed = invoke("runs", "traces")
    assert listed.exit_code == EXIT_OK, listed.output
    assert listed.stderr.count("warning: ") == 1
    assert f"traces/{run_id}.jsonl:2: skipped a damaged line, not valid JSON" in listed.stderr
    assert "damaged" in listed.stdout
    assert "1 damaged: spanreplay load refuses them" in listed.stdout
    shown = invoke("show", "traces", run_id)
    assert shown.exit_code == EXIT_BAD_INPUT, shown.output
    assert "Traceback" not in shown.output
    warning, error = shown.stderr.splitlines()
    assert warning.startswith(f"warning: traces/{run_id}.jsonl:2: skipped a damaged line")
    assert error.startswith(f"error: Run {run_id} cannot be loaded: the damaged line traces/{run_id}.jsonl:2: not")


def test_a_malformed_json_document_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "jaeger-export.json"
    path.write_text('{\n  "data": [\n    {"traceID": "abc", "spans": [\n')
    for command in ("runs", "show"):
        assert_bad_input(invoke(command, str(path)), f"{path}:4", "not valid JSON")


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("name,age\nada,36\n", "is not a trace file"),
        ('{\n  "name": "my-app",\n  "version": "1.0.0"\n}\n', "neither OTLP's resourceSpans nor Jaeger's"),
    ],
)
def test_a_file_that_is_not_otlp_is_rejected(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "data.json"
    path.write_text(content)
    for command in ("runs", "show"):
        assert_bad_input(invoke(command, str(path)), str(path), fragment)


def test_an_unknown_schema_version_names_the_span_and_the_upgrade(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    path = trace_dir / f"{run_id}.jsonl"
    text = path.read_text()
    current = '{"key":"spanreplay.schema_version","value":{"intValue":"3"}}'
    assert current in text
    path.write_text(text.replace(current, current.replace('"3"', '"99"')))
    for args in (["show", "traces", run_id], ["replay", "traces", run_id, "--entry", f"{agent.__name__}:main"]):
        assert_bad_input(invoke(*args), "schema version 99", "pip install -U spanreplay", f"traces/{run_id}.jsonl")


def test_a_run_id_not_in_the_source_lists_those_that_are(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    for args in (["show", "traces", "run_nope"], ["replay", "traces", "run_nope", "--entry", f"{agent.__name__}:main"]):
        assert_bad_input(invoke(*args), "Run run_nope is not in traces", run_id)


def test_an_edited_payload_fails_its_digest_check(agent: ModuleType, trace_dir: Path) -> None:
    run_id = record(agent)
    path = trace_dir / f"{run_id}.jsonl"
    text = path.read_text()
    recorded = '\\"price\\":3'
    assert text.count(recorded) == 1
    path.write_text(text.replace(recorded, '\\"price\\":4'))
    for args in (["show", "traces", run_id], ["replay", "traces", run_id, "--entry", f"{agent.__name__}:main"]):
        assert_bad_input(invoke(*args), f"Run {run_id} seq 2", "spanreplay.output")
    assert agent.CALLS == []


def test_a_directory_without_traces_says_where_traces_go(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for command in ("runs", "show"):
        assert_bad_input(invoke(command, str(empty)), f"Directory {empty} holds no trace files")


def test_a_path_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    for args in (["runs", str(missing)], ["show", str(missing)], ["replay", str(missing), "--entry", "os:getcwd"]):
        assert_bad_input(invoke(*args), f"No such file or directory: {missing}")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    position=st.floats(min_value=0, max_value=1),
    garbage=st.binary(min_size=1, max_size=40),
    mode=st.sampled_from(["insert", "replace", "truncate"]),
)
def test_a_damaged_trace_file_exits_0_or_2_never_with_a_traceback(
    agent: ModuleType, trace_dir: Path, tmp_path: Path, position: float, garbage: bytes, mode: str
) -> None:
    if not any(trace_dir.glob("*.jsonl")):
        record(agent, fail=True)
    [original] = trace_dir.glob("*.jsonl")
    data = original.read_bytes()
    at = int(position * len(data))
    damaged = {
        "insert": data[:at] + garbage + data[at:],
        "replace": data[:at] + garbage + data[at + len(garbage) :],
        "truncate": data[:at],
    }[mode]
    path = tmp_path / "damaged" / "trace.jsonl"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(damaged)
    for command in ("runs", "show"):
        result = invoke(command, str(path))
        assert result.exit_code in (EXIT_OK, EXIT_BAD_INPUT), (command, result.output)
        assert "Traceback" not in result.output
        said = [line for line in result.stderr.splitlines() if line]
        assert all(line.startswith(("warning: ", "error: ")) for line in said), result.stderr
        assert sum(line.startswith("error: ") for line in said) == (result.exit_code == EXIT_BAD_INPUT)

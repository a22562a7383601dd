"""The pytest plugin, run on test files of its own through ``pytester``: record, replay, diverge."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

import spanreplay
from helpers.messages_api_server import MessagesAPIServer
from helpers.paths import REPO

pytest_plugins = ["pytester"]

AGENT = """
import anthropic
import pytest

import spanreplay
from spanreplay.instrumentation.anthropic import AnthropicInstrumentor

QUESTION = {question!r}


@pytest.fixture
def client():
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(zero_code=False)
    with anthropic.Anthropic(base_url={url!r}, api_key="test-key", max_retries=0) as client:
        yield client
    instrumentor.uninstrument()


def answer(client, question):
    spanreplay.now()
    reply = client.messages.create(
        model="claude-sonnet-4-6", max_tokens=256, messages=[{{"role": "user", "content": question}}]
    )
    return reply.content[0].text


@pytest.mark.spanreplay
def test_answer(client):
    assert "A-17" in answer(client, QUESTION)
"""

# A test module whose only nondeterminism is spanreplay's own: a uuid, a clock read, a tool.
TOOLS = """
import pytest

import spanreplay

CALLS = []


@spanreplay.tool
def lookup(order_id):
    CALLS.append(order_id)
    return {{"order_id": order_id, "status": "shipped"}}


def agent(order_id):
    return spanreplay.uuid4(), lookup(order_id)


{tests}
"""


@pytest.fixture
def plugin_args(pytestconfig: pytest.Config) -> list[str]:
    """``-p spanreplay.pytest_plugin``, unless the installed entry point loads it already."""
    return [] if pytestconfig.pluginmanager.has_plugin("spanreplay") else ["-p", "spanreplay.pytest_plugin"]


@pytest.fixture
def run(pytester: pytest.Pytester, plugin_args: list[str]) -> Iterator[object]:
    """Runs pytest on the pytester folder, in this process, with the plugin; checks nothing was configured."""

    def in_force() -> spanreplay.Settings | None:
        return spanreplay.settings() if spanreplay.is_configured() else None

    def run_pytest(*args: str) -> pytest.RunResult:
        before = in_force()
        result = pytester.runpytest("-p", "no:cacheprovider", *plugin_args, *args)
        # A recorded test puts back the configuration in force before it (often none).
        assert in_force() is before
        return result

    yield run_pytest
    spanreplay.reset()


def tools_module(pytester: pytest.Pytester, tests: str, name: str = "test_orders") -> Path:
    return pytester.makepyfile(**{name: TOOLS.format(tests=textwrap.dedent(tests))})


def test_a_missing_trace_is_recorded_replayed_offline_then_a_change_fails_with_the_divergence(
    pytester: pytest.Pytester, run: object
) -> None:
    with MessagesAPIServer() as server:
        pytester.makepyfile(test_agent=AGENT.format(question="Where is my order A-17?", url=server.url))
        run(  # type: ignore[operator]
        ).assert_outcomes(passed=1)
        assert len(server.requests) == 1
        trace = pytester.path / "traces" / "test_agent" / "test_answer.jsonl"
        recorded = trace.read_bytes()
        [log] = [spanreplay.load(trace)]
        assert [(e.kind, e.key) for e in log] == [("clock", "now"), ("model", "claude-sonnet-4-6")]
        server.stop()

    # No server: the replay answers from the trace, and leaves it as it was.
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    assert trace.read_bytes() == recorded
    assert list(trace.parent.iterdir()) == [trace]

    pytester.makepyfile(test_agent=AGENT.format(question="Where is my order A-18?", url=server.url))
    result = run()  # type: ignore[operator]
    result.assert_outcomes(failed=1)
    # The failure section only: under CI pytest prints the whole message again in its summary.
    output = result.stdout.str().split("short test summary info")[0]
    assert "spanreplay: the replay of traces/test_agent/test_answer.jsonl diverged." in output
    assert output.count("Recorded:") == 1
    assert output.count("Attempted:") == 1
    assert "During handling" not in output
    # The input diff: the recorded question out, the attempted one in.
    lines = [line.strip() for line in output.splitlines()]
    assert any(line.startswith("-") and "Where is my order A-17?" in line for line in lines)
    assert any(line.startswith("+") and "Where is my order A-18?" in line for line in lines)
    # The failure is the divergence's text, not a traceback through spanreplay's code.
    assert "_replaying.py" not in output
    assert "spanreplay/_" not in output
    assert "--spanreplay-mode=rewrite" in output
    assert trace.read_bytes() == recorded


def test_tests_that_do_not_ask_are_left_alone(pytester: pytest.Pytester, run: object) -> None:
    tools_module(pytester, "def test_plain():\n    assert agent('A-1')[1]['status'] == 'shipped'\n")
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    assert not (pytester.path / "traces").exists()


def test_the_fixture_alone_records_then_replays_without_running_the_tool(
    pytester: pytest.Pytester, run: object
) -> None:
    tools_module(
        pytester,
        """
        def test_fixture(spanreplay_run):
            run_uuid, result = agent("A-1")
            assert result["status"] == "shipped"
            print("mode", spanreplay_run.mode, "calls", len(CALLS), "uuid", run_uuid)
        """,
    )
    first = run("-s")  # type: ignore[operator]
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["*mode record calls 1 uuid *"])
    recorded_uuid = first.stdout.str().split("uuid ")[1].split()[0]
    assert (pytester.path / "traces" / "test_orders" / "test_fixture.jsonl").is_file()
    second = run("-s")  # type: ignore[operator]
    second.assert_outcomes(passed=1)
    # The tool's body never ran (the module is imported anew for each run), and the uuid is the recorded one.
    second.stdout.fnmatch_lines([f"*mode replay calls 0 uuid {recorded_uuid}*"])


def test_replay_mode_fails_a_test_whose_trace_is_missing_before_its_body_runs(
    pytester: pytest.Pytester, run: object
) -> None:
    tools_module(
        pytester,
        """
        @pytest.mark.spanreplay
        def test_missing():
            raise AssertionError("the body ran")
        """,
    )
    result = run("--spanreplay-mode=replay")  # type: ignore[operator]
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*spanreplay: no trace to replay at traces/test_orders/test_missing.jsonl (--spanreplay-mode=replay)*"]
    )
    assert "the body ran" not in result.stdout.str()
    assert not (pytester.path / "traces" / "test_orders" / "test_missing.jsonl").exists()


def test_rewrite_records_again_and_record_keeps_an_existing_trace(pytester: pytest.Pytester, run: object) -> None:
    tools_module(pytester, "@pytest.mark.spanreplay\ndef test_it():\n    agent('A-1')\n")
    trace = pytester.path / "traces" / "test_orders" / "test_it.jsonl"
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    first = spanreplay.load(trace).run_id
    run("--spanreplay-mode=record").assert_outcomes(passed=1)  # type: ignore[operator]
    assert spanreplay.load(trace).run_id == first
    run("--spanreplay-mode=rewrite").assert_outcomes(passed=1)  # type: ignore[operator]
    rewritten = spanreplay.load(trace).run_id
    assert rewritten != first
    run("--spanreplay-mode=replay").assert_outcomes(passed=1)  # type: ignore[operator]
    assert [p.name for p in trace.parent.iterdir()] == ["test_it.jsonl"]


def test_a_test_that_fails_while_recording_saves_no_trace(pytester: pytest.Pytester, run: object) -> None:
    tools_module(pytester, "@pytest.mark.spanreplay\ndef test_it():\n    agent('A-1')\n    assert False, 'no'\n")
    run().assert_outcomes(failed=1)  # type: ignore[operator]
    assert not (pytester.path / "traces").exists()


def test_trace_and_run_options_name_the_file_and_the_run(pytester: pytest.Pytester, run: object) -> None:
    tools_module(
        pytester,
        """
        @pytest.mark.spanreplay(trace="recorded/orders.jsonl", run="run_orders_1")
        def test_it(spanreplay_run):
            assert spanreplay_run.run_id == "run_orders_1"
            agent("A-1")

        @pytest.mark.parametrize("order", ["A/1", "B 2"])
        @pytest.mark.spanreplay
        def test_params(order):
            agent(order)
        """,
    )
    run().assert_outcomes(passed=3)  # type: ignore[operator]
    assert spanreplay.load(pytester.path / "recorded" / "orders.jsonl").run_id == "run_orders_1"
    names = sorted(p.name for p in (pytester.path / "traces" / "test_orders").iterdir())
    assert names == ["test_params[A_1].jsonl", "test_params[B_2].jsonl"]
    run("--spanreplay-mode=replay").assert_outcomes(passed=3)  # type: ignore[operator]


def test_ignore_paths_leave_a_field_out_of_the_comparison(pytester: pytest.Pytester, run: object) -> None:
    module = """
        import time

        @pytest.mark.spanreplay(ignore_paths=["asked_at"])
        def test_it():
            # A value that differs from one run to the next.
            spanreplay.boundary("tool", "ask", {"order": "A-1", "asked_at": time.perf_counter_ns()}, lambda: 1)
        """
    tools_module(pytester, module)
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    run("--spanreplay-mode=replay").assert_outcomes(passed=1)  # type: ignore[operator]
    tools_module(pytester, module.replace('ignore_paths=["asked_at"]', ""))
    result = run("--spanreplay-mode=replay")  # type: ignore[operator]
    result.assert_outcomes(failed=1)
    assert "asked_at" in result.stdout.str()


def test_a_divergence_the_code_catches_still_fails_the_test(pytester: pytest.Pytester, run: object) -> None:
    module = """
        @pytest.mark.spanreplay
        def test_it():
            try:
                lookup({order!r})
            except Exception:
                pass
        """
    tools_module(pytester, module.format(order="A-1"))
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    tools_module(pytester, module.format(order="A-2"))
    result = run()  # type: ignore[operator]
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*diverged*", "*The code caught this error*"])


def test_the_test_own_assertion_failure_is_shown_as_it_is_on_replay(pytester: pytest.Pytester, run: object) -> None:
    module = "@pytest.mark.spanreplay\ndef test_it():\n    assert agent('A-1')[1]['status'] == {status!r}\n"
    tools_module(pytester, module.format(status="shipped"))
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    tools_module(pytester, module.format(status="lost"))
    result = run()  # type: ignore[operator]
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError*", "*'shipped' == 'lost'*"])
    assert "diverged" not in result.stdout.str()


def test_a_recording_keeps_the_configured_masking_and_leaves_the_configuration_in_force(
    pytester: pytest.Pytester, run: object, tmp_path: Path
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    elsewhere = tmp_path / "elsewhere"
    before = spanreplay.configure(trace_dir=elsewhere, tracer_provider=provider)
    tools_module(pytester, "@pytest.mark.spanreplay\ndef test_it():\n    agent('mail jane.doe@example.com')\n")
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    assert spanreplay.settings() is before
    assert not elsewhere.exists()
    trace = (pytester.path / "traces" / "test_orders" / "test_it.jsonl").read_text()
    assert "jane.doe@example.com" not in trace
    provider.shutdown()


def test_bad_marker_arguments_fail_the_test_with_the_fix(pytester: pytest.Pytester, run: object) -> None:
    tools_module(
        pytester,
        """
        @pytest.mark.spanreplay(traces="x.jsonl")
        def test_typo():
            pass

        @pytest.mark.spanreplay(ignore_paths="asked_at")
        def test_string():
            pass

        @pytest.mark.spanreplay(run=42)
        def test_number():
            pass
        """,
    )
    result = run()  # type: ignore[operator]
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.spanreplay got traces, which it does not take*trace=, run= and ignore_paths=*",
            "*ignore_paths='asked_at')*is not a list of JSON paths*",
            "*@pytest.mark.spanreplay(run=42)*is not a run id*",
        ]
    )


def test_help_and_markers_describe_the_option_and_the_marker(pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    help_text = pytester.runpytest(*plugin_args, "--help").stdout.str()
    assert "Recorded agent runs (spanreplay):" in help_text
    assert "--spanreplay-mode={once,replay,record,rewrite}" in help_text
    assert "spanreplay_mode (string):" in help_text
    markers = pytester.runpytest(*plugin_args, "--markers").stdout.str()
    assert "@pytest.mark.spanreplay(trace=None, run=None, ignore_paths=()): run the test inside" in markers


def test_a_bad_mode_in_the_ini_file_is_a_usage_error(pytester: pytest.Pytester, plugin_args: list[str]) -> None:
    pytester.makeini("[pytest]\nspanreplay_mode = sometimes\n")
    result = pytester.runpytest(*plugin_args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*spanreplay_mode = 'sometimes' in the ini file is not one of once, replay*"])


def test_the_plugin_is_declared_as_a_pytest11_entry_point() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"spanreplay": "spanreplay.pytest_plugin"}


@pytest.mark.slow
def test_the_support_agent_example_test_replays_its_committed_trace_offline(plugin_args: list[str]) -> None:
    example = REPO / "examples" / "support_agent"
    [trace] = (example / "tests" / "traces").rglob("*.jsonl")
    recorded = trace.read_bytes()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANREPLAY_", "ANTHROPIC_"))}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests",
            "-q",
            "-p",
            "no:cacheprovider",
            *plugin_args,
            "--spanreplay-mode=replay",
        ],
        cwd=example,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout
    assert trace.read_bytes() == recorded


def test_a_test_run_twice_in_one_session_gets_a_new_run_each_time(pytester: pytest.Pytester, run: object) -> None:
    tools_module(pytester, "@pytest.mark.spanreplay\ndef test_it(spanreplay_run):\n    agent('A-1')\n")
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    # As a rerun plugin (pytest-rerunfailures) does: the whole protocol twice for one item.
    pytester.makeconftest(
        """
        import pytest
        from _pytest.runner import runtestprotocol

        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_protocol(item, nextitem):
            for _ in range(2):
                runtestprotocol(item, nextitem=nextitem, log=True)
            return True
        """
    )
    run("--spanreplay-mode=replay").assert_outcomes(passed=2)  # type: ignore[operator]


def test_an_async_test_runs_inside_its_run(pytester: pytest.Pytester, run: object) -> None:
    # anyio (a dependency of the anthropic SDK) brings the pytest plugin that runs async tests.
    tools_module(
        pytester,
        """
        @pytest.fixture
        def anyio_backend():
            return "asyncio"

        @spanreplay.tool
        async def track(parcel):
            CALLS.append(parcel)
            return {"parcel": parcel, "at": "Lyon"}

        @pytest.mark.anyio
        @pytest.mark.spanreplay
        async def test_async(spanreplay_run):
            assert spanreplay.current_run() is spanreplay_run
            assert (await track("LP-1"))["at"] == "Lyon"
            print("calls", len(CALLS))
        """,
    )
    run("-s").stdout.fnmatch_lines(["*calls 1*", "*1 passed*"])  # type: ignore[operator]
    run("-s", "--spanreplay-mode=replay").stdout.fnmatch_lines(["*calls 0*", "*1 passed*"])  # type: ignore[operator]


def test_a_test_that_resets_spanreplay_still_records_its_whole_run(pytester: pytest.Pytester, run: object) -> None:
    tools_module(pytester, "@pytest.mark.spanreplay\ndef test_it():\n    spanreplay.reset()\n    agent('A-1')\n")
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    log = spanreplay.load(pytester.path / "traces" / "test_orders" / "test_it.jsonl")
    assert (log.run.status, [e.kind for e in log]) == ("ok", ["uuid", "tool"])
    run("--spanreplay-mode=replay").assert_outcomes(passed=1)  # type: ignore[operator]


def test_a_replayed_test_warns_where_its_code_reads_the_clock_directly(pytester: pytest.Pytester, run: object) -> None:
    # The guard is on in every replay the plugin opens: the direct read is named by file and line.
    tools_module(
        pytester,
        "import time\n\n@pytest.mark.spanreplay\ndef test_it():\n    agent('A-1')\n    time.time()\n",
    )
    run().assert_outcomes(passed=1)  # type: ignore[operator]
    replayed = run("--spanreplay-mode=replay", "-W", "default")  # type: ignore[operator]
    replayed.assert_outcomes(passed=1)
    replayed.stdout.fnmatch_lines(["*test_orders.py:*DeterminismWarning*time.time() read the clock directly*"])

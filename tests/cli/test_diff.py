"""``spanreplay diff SOURCE RUN_A RUN_B`` and ``spanreplay.diff_runs()``: two runs compared step by step.

The runs are recorded here through the real recorder and the real Anthropic SDK,
talking to the local Messages API server; one test reads run B from Postgres.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.messages_api_server import MessagesAPIServer, instrument, reply, serve, text
from spanreplay import Event, EventLog, RunInfo
from spanreplay.cli import EXIT_BAD_INPUT, EXIT_OK, cli
from spanreplay.readers import iter_spans

SONNET = "claude-sonnet-4-6"  # $3 in, $15 out per million tokens in the built-in table
MTOK = 1_000_000
EXIT_DIFFERENT = 1

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

# What the shop's tools answer; a test changes it between two recordings.
SHOP: dict[str, Any] = {"price": 3, "fail": False, "extra": False}


class OutOfStock(Exception):
    pass


@spanreplay.tool
def fetch(item: str) -> dict[str, Any]:
    return {"item": item, "price": SHOP["price"]}


@spanreplay.tool
def store(record: dict[str, Any]) -> str:
    if SHOP["fail"]:
        raise OutOfStock(f"no {record['item']} left")
    return "stored " + record["item"]


@pytest.fixture(autouse=True)
def _shop() -> Iterator[None]:
    SHOP.update(price=3, fail=False, extra=False)
    yield
    SHOP.update(price=3, fail=False, extra=False)


def record_shop(
    server: MessagesAPIServer, *, input_tokens: int = 100, output_tokens: int = 10, answer_id: str = "msg_fixed"
) -> str:
    """One run: ask the model, fetch, store (and fetch again when SHOP says extra); returns its run id."""
    server.script(reply(text("buy apples"), input_tokens=input_tokens, output_tokens=output_tokens, id=answer_id))
    client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=0)
    with client, spanreplay.record(agent="shop") as run:
        try:
            client.messages.create(model=SONNET, max_tokens=64, messages=[{"role": "user", "content": "what to buy?"}])
            got = fetch("apple")
            store({"item": got["item"]})
            if SHOP["extra"]:
                fetch("pear")
        except OutOfStock:
            pass
    return run.run_id


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["diff", *args], prog_name="spanreplay")


def diff_json(*args: str) -> tuple[int, dict[str, Any]]:
    result = invoke(*args, "--json")
    return result.exit_code, json.loads(result.stdout)


def step_of(directory: Path, run_id: str, key: str) -> Event:
    (event,) = [e for e in spanreplay.load(directory, run_id) if e.key == key]
    return event


@pytest.fixture
def recording(trace_dir: Path, server: MessagesAPIServer, instrumented: None) -> Path:
    return trace_dir


# --- the acceptance pair ---------------------------------------------------------------------


def test_a_run_diffed_with_itself_matches_and_exits_0(recording: Path, server: MessagesAPIServer) -> None:
    run_id = record_shop(server)
    result = invoke(str(recording), run_id, run_id)
    assert result.exit_code == EXIT_OK, result.output
    assert "same: the runs match step for step" in result.stdout
    assert "all 3 match" in result.stdout
    assert "(no change)" in result.stdout


def test_a_run_that_differs_at_one_step_exits_1_and_names_that_step(recording: Path, server: MessagesAPIServer) -> None:
    run_a = record_shop(server)
    SHOP["price"] = 4
    run_b = record_shop(server)
    fetch_step = step_of(recording, run_a, "fetch")
    result = invoke(str(recording), run_a, run_b)
    assert result.exit_code == EXIT_DIFFERENT, result.output
    out = result.stdout
    assert f"first difference: seq {fetch_step.seq} tool 'fetch' (call id {fetch_step.call_id}): output differs" in out
    # The JSON diff of the output: the price went from 3 to 4.
    assert '-  "price": 3' in out
    assert '+  "price": 4' in out
    assert "differing steps: 1 of 3 (output 1)" in out
    assert "different: 1 step(s) differ." in out
    code, report = diff_json(str(recording), run_a, run_b)
    assert code == EXIT_DIFFERENT
    assert report["first"]["call_id"] == fetch_step.call_id
    assert report["first"]["differs"] == ["output"]
    assert report["first"]["a"]["output"] == {"item": "apple", "price": 3}
    assert report["first"]["b"]["output"] == {"item": "apple", "price": 4}


# --- what counts as a difference ----------------------------------------------------------------


def test_two_recordings_of_the_same_path_match_step_for_step(recording: Path, server: MessagesAPIServer) -> None:
    run_a, run_b = record_shop(server), record_shop(server)
    code, report = diff_json(str(recording), run_a, run_b)
    assert code == EXIT_OK
    assert report["same"] is True
    assert report["matched_steps"] == 3
    assert report["steps"] == []


def test_model_response_headers_and_ids_are_left_out_unless_asked(recording: Path, server: MessagesAPIServer) -> None:
    run_a = record_shop(server, answer_id="msg_one")
    run_b = record_shop(server, answer_id="msg_two")
    code, report = diff_json(str(recording), run_a, run_b)
    assert code == EXIT_OK
    assert report["model_outputs_left_out"] == [
        "attempts[*].headers",
        "attempts[*].body.id",
        "attempts[*].events[*].data.message.id",
    ]
    assert "--compare-volatile compares them" in invoke(str(recording), run_a, run_b).stdout
    code, report = diff_json(str(recording), run_a, run_b, "--compare-volatile")
    assert code == EXIT_DIFFERENT
    assert [(s["key"], s["differs"]) for s in report["steps"]] == [(SONNET, ["output"])]
    diff = report["first"]["diff"]["output"]
    assert '-        "id": "msg_one"' in diff
    assert '"request-id"' in diff


def test_clock_random_and_uuid_outputs_differ_on_every_run_and_are_compared_only_when_asked(
    trace_dir: Path,
) -> None:
    def run() -> str:
        with spanreplay.record(agent="draws") as recorded:
            spanreplay.now()
            spanreplay.random()
            spanreplay.uuid4()
            spanreplay.boundary("tool", "t", {"q": 1}, lambda: "same")
        return recorded.run_id

    run_a, run_b = run(), run()
    code, report = diff_json(str(trace_dir), run_a, run_b)
    assert code == EXIT_OK
    assert report["outputs_not_compared"] == ["clock", "random", "uuid"]
    text_out = invoke(str(trace_dir), run_a, run_b).stdout
    assert "not compared: clock outputs, random outputs, uuid outputs" in text_out
    code, report = diff_json(str(trace_dir), run_a, run_b, "--compare-volatile")
    assert code == EXIT_DIFFERENT
    assert [(s["kind"], s["differs"]) for s in report["steps"]] == [
        ("clock", ["output"]),
        ("random", ["output"]),
        ("uuid", ["output"]),
    ]


def test_an_ignored_path_is_left_out_of_the_comparison(recording: Path, server: MessagesAPIServer) -> None:
    run_a = record_shop(server)
    SHOP["price"] = 4
    run_b = record_shop(server)
    assert invoke(str(recording), run_a, run_b).exit_code == EXIT_DIFFERENT
    assert invoke(str(recording), run_a, run_b, "--ignore", "price").exit_code == EXIT_OK


def test_token_and_cost_deltas_come_from_the_model_calls_usage(recording: Path, server: MessagesAPIServer) -> None:
    run_a = record_shop(server, input_tokens=100, output_tokens=10)
    run_b = record_shop(server, input_tokens=1100, output_tokens=210)
    code, report = diff_json(str(recording), run_a, run_b, "--ignore", "attempts[*].body.usage")
    # The usage is left out of the compared output, so the steps match; the deltas still say it.
    assert code == EXIT_OK
    assert report["run_a"]["tokens"] == 110
    assert report["run_b"]["tokens"] == 1310
    assert report["tokens_delta"] == 1200
    assert report["usd_delta"] == pytest.approx((1000 * 3 + 200 * 15) / MTOK)
    text_out = invoke(str(recording), run_a, run_b, "--ignore", "attempts[*].body.usage").stdout
    assert "tokens: A 110  B 1,310  (+1,200)" in text_out
    assert "(+$0.006000)" in text_out


def test_an_extra_step_is_missing_in_the_other_run(recording: Path, server: MessagesAPIServer) -> None:
    run_a = record_shop(server)
    SHOP["extra"] = True
    run_b = record_shop(server)
    code, report = diff_json(str(recording), run_a, run_b)
    assert code == EXIT_DIFFERENT
    (only,) = report["steps"]
    assert only["missing_in"] == "a"
    assert only["seq_a"] is None
    assert report["counts"]["missing_in_a"] == 1
    assert "pear" in json.dumps(report["first"]["b"]["input"])
    reverse = invoke(str(recording), run_b, run_a)
    assert reverse.exit_code == EXIT_DIFFERENT
    assert "missing in run B" in reverse.stdout


def test_a_step_that_failed_in_one_run_differs_in_its_error_and_the_outcomes_are_both_shown(
    recording: Path, server: MessagesAPIServer
) -> None:
    run_a = record_shop(server)
    SHOP["fail"] = True
    run_b = record_shop(server)
    store_step = step_of(recording, run_b, "store")
    code, report = diff_json(str(recording), run_a, run_b)
    assert code == EXIT_DIFFERENT
    assert report["first"]["call_id"] == store_step.call_id
    assert set(report["first"]["differs"]) == {"output", "error"}
    assert report["first"]["b"]["error"] == {"type": "OutOfStock", "message": "no apple left"}
    text_out = invoke(str(recording), run_a, run_b).stdout
    assert "outcome: A ok; B ok" in text_out  # the agent caught it: both runs ended ok
    assert "OutOfStock" in text_out


def test_runs_whose_steps_match_but_that_end_differently_differ(trace_dir: Path) -> None:
    def run(fail: bool) -> str:
        with (
            pytest.raises(ValueError) if fail else contextlib.nullcontext(),
            spanreplay.record(agent="end") as recorded,
        ):
            spanreplay.boundary("tool", "ask", {"q": 1}, lambda: "yes")
            if fail:
                raise ValueError("gave up")
        return recorded.run_id

    run_a, run_b = run(False), run(True)
    code, report = diff_json(str(trace_dir), run_a, run_b)
    assert code == EXIT_DIFFERENT
    assert report["steps"] == []
    assert report["same_outcome"] is False
    assert report["run_b"]["outcome"] == "error: ValueError: gave up"
    assert "every step matches, but the runs end differently" in invoke(str(trace_dir), run_a, run_b).stdout


def test_runs_masked_differently_are_compared_as_recorded_and_the_output_says_so(
    tmp_path: Path, provider: TracerProvider
) -> None:
    directory = tmp_path / "traces"
    run_ids = []
    for masking in (False, True):
        spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=masking)
        with spanreplay.record(agent="mail") as run:
            spanreplay.boundary("tool", "who", {"id": 7}, lambda: {"email": "ada@example.com"})
        run_ids.append(run.run_id)
    code, report = diff_json(str(directory), *run_ids)
    assert code == EXIT_DIFFERENT
    assert report["masking_differs"] is True
    assert report["first"]["a"]["output"] == {"email": "ada@example.com"}
    assert report["first"]["b"]["output"] != {"email": "ada@example.com"}
    assert "masked differently" in invoke(str(directory), *run_ids).stdout


def test_side_by_side_shows_both_runs_in_columns(recording: Path, server: MessagesAPIServer) -> None:
    run_a = record_shop(server)
    SHOP["price"] = 4
    run_b = record_shop(server)
    out = invoke(str(recording), run_a, run_b, "--side-by-side").stdout
    line = next(line for line in out.splitlines() if '"price": 3' in line)
    assert '"price": 4' in line


# --- another source for run B ---------------------------------------------------------------------


def test_run_b_from_postgres_against_run_a_from_a_file(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, server: MessagesAPIServer, instrumented: None
) -> None:
    files_only = tmp_path / "files-only"
    spanreplay.configure(trace_dir=files_only, tracer_provider=provider, raise_internal_errors=True)
    run_a = record_shop(server)
    both = tmp_path / "both"
    spanreplay.configure(trace_dir=both, tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn)
    SHOP["price"] = 5
    run_b = record_shop(server)
    provider.force_flush()
    code, report = diff_json(str(files_only), run_a, run_b, "--source-b", pg_dsn)
    assert code == EXIT_DIFFERENT
    assert report["first"]["key"] == "fetch"
    assert report["first"]["b"]["output"] == {"item": "apple", "price": 5}
    # The same run read from its file and from Postgres matches itself.
    code, report = diff_json(str(both), run_b, run_b, "--source-b", pg_dsn)
    assert code == EXIT_OK, report
    # Without --source-b, run B is looked for in SOURCE, which does not hold it.
    missing = invoke(str(files_only), run_a, run_b)
    assert missing.exit_code == EXIT_BAD_INPUT
    assert run_b in missing.stderr


def test_run_b_from_jaeger_against_run_a_from_a_file(recording: Path, server: MessagesAPIServer) -> None:
    from fixtures.backends import BackendServer, serving

    run_a = record_shop(server)
    SHOP["fail"] = True
    run_b = record_shop(server)
    backend = BackendServer("jaeger")
    backend.add(iter_spans(recording))
    with serving(backend):
        code, report = diff_json(str(recording), run_a, run_b, "--source-b", f"jaeger+{backend.url}")
        same_code, _ = diff_json(str(recording), run_b, run_b, "--source-b", f"jaeger+{backend.url}")
    assert code == EXIT_DIFFERENT
    assert report["first"]["key"] == "store"
    assert report["first"]["b"]["error"] == {"type": "OutOfStock", "message": "no apple left"}
    # The run read back from Jaeger matches its own file step for step.
    assert same_code == EXIT_OK


# --- bad input -----------------------------------------------------------------------------------


def test_bad_input_exits_2_with_one_sentence(trace_dir: Path, tmp_path: Path) -> None:
    with spanreplay.record(agent="x") as run:
        spanreplay.boundary("tool", "t", {}, lambda: 1)
    unknown = invoke(str(trace_dir), run.run_id, "run_nope")
    assert unknown.exit_code == EXIT_BAD_INPUT
    assert "run_nope" in unknown.stderr
    assert "Traceback" not in unknown.output
    unreadable = tmp_path / "garbage.jsonl"
    unreadable.write_text("not json\n")
    bad = invoke(str(unreadable), "a", "b")
    assert bad.exit_code == EXIT_BAD_INPUT
    assert "garbage.jsonl" in bad.stderr
    bad_path = invoke(str(trace_dir), run.run_id, run.run_id, "--ignore", "a[")
    assert bad_path.exit_code == EXIT_BAD_INPUT
    assert "a[" in bad_path.stderr


# --- diff_runs from code, on any pair of runs ------------------------------------------------------


def _log(run_id: str, outputs: list[Any]) -> EventLog:
    events = tuple(
        Event(run_id, seq, f"tool:t#{seq}", "tool", "t", json.dumps({"i": seq}).encode(), json.dumps(out).encode())
        for seq, out in enumerate(outputs, start=1)
    )
    return EventLog(RunInfo(run_id, status="ok"), events)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2, 2) | st.sampled_from([0.0, 1.0, 1.5]) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(json_values, json_values), max_size=8), st.integers(0, 3))
def test_diff_runs_flags_exactly_the_steps_whose_outputs_differ(pairs: list[tuple[Any, Any]], extra: int) -> None:
    a = _log("a", [x for x, _ in pairs])
    b = _log("b", [y for _, y in pairs] + [None] * extra)
    result = spanreplay.diff_runs(a, b, prices=None)
    # JSON equality, not Python's: true is not 1, 1 is not 1.0.
    differing = [
        seq
        for seq, (x, y) in enumerate(pairs, start=1)
        if json.dumps(x, sort_keys=True) != json.dumps(y, sort_keys=True)
    ]
    assert [s.seq for s in result.steps if s.parts == ("output",)] == differing
    assert [s.seq for s in result.steps if s.a is None] == list(range(len(pairs) + 1, len(pairs) + 1 + extra))
    assert result.same == (not differing and not extra)
    assert result.matched == len(pairs) - len(differing)
    assert spanreplay.diff_runs(a, a).same

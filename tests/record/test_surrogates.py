"""Text UTF-8 cannot hold (lone surrogates) is recorded losslessly and replayed identical.

``os.listdir()`` of a folder with a file name that is not UTF-8 gives a ``str``
with a lone surrogate (``'caf\\udce9.txt'``). The JSON encoder refuses it, and
the step used to vanish from the trace file and from Postgres. The folders and
names here are made for real, with bytes, on the test's own file system.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay import semconv as sc
from spanreplay.cli import cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="file names are UTF-16 there, never bytes")

NAME = b"caf\xe9.txt"  # Latin-1, not UTF-8: listdir() gives 'caf\udce9.txt'


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "inbox"
    made.mkdir()
    with open(os.path.join(os.fsencode(made), NAME), "wb") as file:
        file.write(b"bonjour")
    (made / "plain.txt").write_text("hello")
    return made


@spanreplay.tool
def list_folder(path: str) -> list[str]:
    return sorted(os.listdir(path))


@spanreplay.tool
def paths_in(path: str) -> list[Path]:
    return sorted(Path(path).iterdir())


@spanreplay.tool
def sizes(path: str) -> dict[str, int]:
    return {name: os.path.getsize(os.path.join(path, name)) for name in sorted(os.listdir(path))}


@spanreplay.tool
def read_text(path: str) -> str:
    with open(path) as file:
        return file.read()


@spanreplay.tool
def echo(text: str) -> str:
    return text


def _agent(folder: Path) -> tuple[Any, ...]:
    names = list_folder(str(folder))
    odd = next(name for name in names if name != "plain.txt")
    return names, paths_in(str(folder)), sizes(str(folder)), echo(odd)


def _steps(path: Path) -> list[dict[str, Any]]:
    steps = []
    for line in path.read_bytes().splitlines():
        for resource in orjson.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attributes = {a["key"]: a["value"] for a in span["attributes"]}
                    if sc.SEQ in attributes:
                        steps.append(attributes)
    return steps


def test_a_non_utf8_file_name_is_recorded_and_replayed_as_the_identical_str(trace_dir: Path, folder: Path) -> None:
    with spanreplay.record(agent="files") as run:
        recorded = _agent(folder)
    names, paths, by_name, echoed = recorded
    assert by_name["caf\udce9.txt"] == len(b"bonjour")
    assert "caf\udce9.txt" in names  # the surrogate is real, from the file system
    assert echoed == "caf\udce9.txt"
    # Every step is in the file, its text escaped (readable) and tagged.
    steps = _steps(trace_dir / f"{run.run_id}.jsonl")
    assert [s[sc.KEY]["stringValue"] for s in steps] == ["list_folder", "paths_in", "sizes", "echo"]
    assert orjson.loads(steps[0][sc.OUTPUT]["stringValue"]) == ["caf\\udce9.txt", "plain.txt"]
    assert orjson.loads(steps[0][sc.OUTPUT_TYPES]["stringValue"]) == {"[0]": "~str"}
    with spanreplay.replay(trace_dir, run.run_id):
        replayed = _agent(folder)
    assert replayed == recorded
    assert [type(p) for p in replayed[1]] == [type(p) for p in paths]
    assert replayed[1][0].name == "caf\udce9.txt"


def test_a_replayed_input_with_another_surrogate_is_a_changed_input(trace_dir: Path) -> None:
    with spanreplay.record(agent="files") as run:
        echo("caf\udce9 \x00 a\\b")
    with spanreplay.replay(trace_dir, run.run_id):
        assert echo("caf\udce9 \x00 a\\b") == "caf\udce9 \x00 a\\b"
    with pytest.raises(spanreplay.InputChangedError), spanreplay.replay(trace_dir, run.run_id):
        echo("caf\udce8 \x00 a\\b")


def test_an_error_that_names_a_non_utf8_file_is_recorded_and_raised_again(trace_dir: Path, folder: Path) -> None:
    missing = os.fsdecode(os.path.join(os.fsencode(folder), b"gone-\xff"))

    def agent() -> str:
        try:
            return read_text(missing)
        except FileNotFoundError as error:
            return f"missing: {error.filename!r}"

    with spanreplay.record(agent="files") as run:
        live = agent()
    assert "\\udcff" in live
    assert [s[sc.KEY]["stringValue"] for s in _steps(trace_dir / f"{run.run_id}.jsonl")] == ["read_text"]
    with spanreplay.replay(trace_dir, run.run_id):
        # Rebuilt as the FileNotFoundError it was, its file name the identical str.
        assert agent() == live


def test_an_output_no_json_can_hold_is_recorded_as_such_and_replay_refuses_that_step(
    trace_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    @spanreplay.tool
    def huge() -> int:
        return 2**70  # past the 64-bit integers JSON encoders write

    with caplog.at_level(logging.WARNING, logger="spanreplay"), spanreplay.record(agent="big") as run:
        assert huge() == 2**70
        echo("after")
    steps = _steps(trace_dir / f"{run.run_id}.jsonl")
    assert [s[sc.KEY]["stringValue"] for s in steps] == ["huge", "echo"]  # the step is not lost
    assert orjson.loads(steps[0][sc.OUTPUT]["stringValue"]) == str(2**70)
    assert "cannot record the builtins.int returned by tool 'huge' at $" in caplog.text
    with (
        pytest.raises(spanreplay.UnservableOutputError, match=r"seq 1 \(tool 'huge'\).*builtins\.int"),
        spanreplay.replay(trace_dir, run.run_id),
    ):
        huge()


def test_an_input_no_json_can_hold_is_recorded_and_compared(trace_dir: Path) -> None:
    @spanreplay.tool
    def scale(factor: int) -> str:
        return "ok"

    with spanreplay.record(agent="big") as run:
        scale(2**70)
    (step,) = _steps(trace_dir / f"{run.run_id}.jsonl")
    assert orjson.loads(step[sc.INPUT]["stringValue"]) == {
        "!unencodable": "builtins.dict",
        "repr": f"{{'factor': {2**70}}}",
    }
    with spanreplay.replay(trace_dir, run.run_id):
        assert scale(2**70) == "ok"
    with pytest.raises(spanreplay.InputChangedError), spanreplay.replay(trace_dir, run.run_id):
        scale(2**71)


def test_a_trace_whose_escaped_text_was_edited_is_refused_at_that_step(trace_dir: Path) -> None:
    with spanreplay.record(agent="files") as run:
        echo("caf\udce9")
    path = trace_dir / f"{run.run_id}.jsonl"
    # By hand: the escape made into one escape() never writes, the size and digest recomputed.
    import hashlib

    lines = []
    for line in path.read_bytes().splitlines():
        document = orjson.loads(line)
        for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            for attribute in span["attributes"]:
                if attribute["key"] == sc.OUTPUT:
                    data = orjson.dumps("caf\\x41")
                    attribute["value"]["stringValue"] = data.decode()
                    size = len(data)
                    digest = hashlib.sha256(data).hexdigest()
            for attribute in span["attributes"]:
                if attribute["key"] == sc.OUTPUT + sc.SIZE_SUFFIX:
                    attribute["value"] = {"intValue": str(size)}
                if attribute["key"] == sc.OUTPUT + sc.SHA256_SUFFIX:
                    attribute["value"] = {"stringValue": digest}
        lines.append(orjson.dumps(document))
    path.write_bytes(b"\n".join(lines) + b"\n")
    with (
        pytest.raises(spanreplay.UnservableOutputError, match=r"seq 1 \(tool 'echo'\).*cannot be rebuilt"),
        spanreplay.replay(trace_dir, run.run_id),
    ):
        echo("caf\udce9")


def test_postgres_rows_hold_the_step_as_jsonb(pg_dsn: str, tmp_path: Path, provider: TracerProvider) -> None:
    import psycopg

    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn)
    with spanreplay.record(agent="files") as run:
        echo("caf\udce9 \x00")
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT key, output FROM agent_steps WHERE run_id = %s", (run.run_id,)).fetchall()
    assert [key for key, _ in rows] == ["echo"]
    assert spanreplay.load(pg_dsn, run.run_id) == spanreplay.load(directory, run.run_id)
    with spanreplay.replay(pg_dsn, run.run_id):
        assert echo("caf\udce9 \x00") == "caf\udce9 \x00"


# Any code point, lone surrogates and NUL included, and backslashes that look like escapes.
_ANY_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec=None, exclude_categories=()),
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF, exclude_categories=()),
        st.sampled_from(["\x00", "\\", "u", "d", "c", "e", "9"]),
    ),
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_ANY_TEXT, key=_ANY_TEXT)
@example(text="caf\udce9", key="\\udce9")
@example(text="\\udce9", key="\udce9")
@example(text="\ud800\udc00\x00", key="")
def test_any_str_as_tool_input_and_output_records_and_replays_identical(
    provider: TracerProvider, text: str, key: str
) -> None:
    @spanreplay.tool
    def tool(text: str, mapping: dict[str, str]) -> dict[str, Any]:
        return {"text": text, "list": [text, key], "mapping": mapping}

    with tempfile.TemporaryDirectory() as folder:
        # Masking off: this is about encoding, and a drawn email would come back masked, as it should.
        spanreplay.configure(trace_dir=folder, tracer_provider=provider, raise_internal_errors=True, masking=False)
        with spanreplay.record(agent="any") as run:
            recorded = tool(text, {key: text})
        with spanreplay.replay(folder, run.run_id):
            replayed = tool(text, {key: text})
    assert replayed == recorded == {"text": text, "list": [text, key], "mapping": {key: text}}
    assert type(replayed["text"]) is str


def test_masking_still_sees_escaped_text_and_the_rest_replays_identical(trace_dir: Path) -> None:
    with spanreplay.record(agent="files") as run:
        echo("ada@example.com caf\udce9")
    (step,) = _steps(trace_dir / f"{run.run_id}.jsonl")
    assert "ada@example.com" not in step[sc.OUTPUT]["stringValue"]
    assert "ada@example.com" not in step[sc.INPUT]["stringValue"]
    with spanreplay.replay(trace_dir, run.run_id):
        assert echo("ada@example.com caf\udce9") == "<email> caf\udce9"


# --- names UTF-8 cannot hold: a boundary key, a tool name, the agent name (review defects 2 and 3) ---

FILE_KEY = os.fsdecode(b"report-\xff.txt")  # a file name from os.listdir(), used as the key
AGENT = "inbox\udc80"


@spanreplay.tool(name="read\udcff")
def odd_tool(text: str) -> str:
    return text.upper()


def _named_agent() -> tuple[str, str]:
    read = spanreplay.boundary("read_file", FILE_KEY, {"path": FILE_KEY}, lambda: "contents")
    return read, odd_tool("x")


def _check_named_run(source: Any, run_id: str) -> None:
    """Every step and the run's end are in ``source``, with the identical names, and replay completes."""
    log = spanreplay.load(source, run_id)
    assert [(e.kind, e.key) for e in log.events] == [("read_file", FILE_KEY), ("tool", "read\udcff")]
    assert log.events[0].call_id == f"read_file:{FILE_KEY}#0"
    assert (log.run.agent, log.run.status) == (AGENT, "ok")
    (listed,) = [run for run in spanreplay.runs(source) if run.run_id == run_id]
    assert (listed.status, listed.damaged) == ("ok", None)
    with spanreplay.replay(source, run_id):
        assert _named_agent() == ("contents", "X")


def test_a_key_tool_name_and_agent_name_utf8_cannot_hold_keep_every_step(trace_dir: Path) -> None:
    with spanreplay.record(agent=AGENT) as run:
        assert _named_agent() == ("contents", "X")
    path = trace_dir / f"{run.run_id}.jsonl"
    steps = _steps(path)
    # Written readable and listed as escaped: the file is valid UTF-8 JSON throughout.
    assert [s[sc.KEY]["stringValue"] for s in steps] == ["report-\\udcff.txt", "read\\udcff"]
    assert steps[1][sc.GEN_AI_TOOL_NAME]["stringValue"] == "read\\udcff"
    assert [v["stringValue"] for v in steps[0][sc.ESCAPED_NAMES]["arrayValue"]["values"]] == [sc.KEY, sc.CALL_ID]
    names = [span["name"] for line in path.read_bytes().splitlines() for span in _spans_of(line)]
    assert "read_file report-\\udcff.txt" in names
    assert "execute_tool read\\udcff" in names
    assert "invoke_agent inbox\\udc80" in names
    _check_named_run(trace_dir, run.run_id)
    result = CliRunner().invoke(cli, ["runs", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert "1 run(s), 0 not ok" in result.stdout


def test_postgres_rows_keep_a_key_and_agent_name_utf8_cannot_hold(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider
) -> None:
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn)
    with spanreplay.record(agent=AGENT) as run:
        _named_agent()
    assert spanreplay.load(pg_dsn, run.run_id) == spanreplay.load(directory, run.run_id)
    _check_named_run(pg_dsn, run.run_id)


def test_an_attribute_others_set_with_a_lone_surrogate_costs_no_step(
    trace_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    @spanreplay.tool
    def tag(text: str) -> str:
        span = trace.get_current_span()
        span.set_attribute("app.file\udc80", "caf\udce9")
        span.add_event("seen \udc81", {"app.name": "x\udc82"})
        return text

    with caplog.at_level(logging.WARNING, logger="spanreplay"), spanreplay.record(agent="others") as run:
        tag("a")
        tag("b")
    (step, _) = _steps(trace_dir / f"{run.run_id}.jsonl")
    assert step["app.file\\udc80"] == {"stringValue": "caf\\udce9"}  # readable, not the str that was set
    assert caplog.text.count("with text that UTF-8 cannot hold") <= 1  # once per process
    with spanreplay.replay(trace_dir, run.run_id):
        assert (tag("a"), tag("b")) == ("a", "b")


def test_a_trace_whose_escaped_key_was_edited_is_refused(trace_dir: Path) -> None:
    with spanreplay.record(agent="files") as run:
        spanreplay.boundary("read_file", FILE_KEY, {}, lambda: 1)
    path = trace_dir / f"{run.run_id}.jsonl"
    # By hand: the escaped key made into an escape that escape() never writes.
    path.write_bytes(path.read_bytes().replace(b"report-\\\\udcff.txt", b"report-\\\\x41.txt"))
    with pytest.raises(
        spanreplay.TraceFormatError,
        match=r"Attribute spanreplay\.call_id holds .read_file:report-\\\\x41\.txt#0., listed in "
        r"spanreplay\.escaped as escaped text, but a backslash at character 17 starts no escape",
    ):
        spanreplay.load(trace_dir, run.run_id)


def _spans_of(line: bytes) -> list[dict[str, Any]]:
    return [span for r in orjson.loads(line)["resourceSpans"] for s in r["scopeSpans"] for span in s["spans"]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=_ANY_TEXT, agent=_ANY_TEXT)
@example(key="\\udcff", agent="\udcff")
@example(key="a\\\\udcff\udcff", agent="\\")
def test_any_str_as_a_key_or_agent_name_records_and_replays_identical(
    provider: TracerProvider, key: str, agent: str
) -> None:
    def agent_code() -> tuple[int, int]:
        return spanreplay.boundary("lookup", key, {"k": key}, lambda: 1), spanreplay.boundary(
            "lookup", key, {}, lambda: 2
        )

    with tempfile.TemporaryDirectory() as folder:
        spanreplay.configure(trace_dir=folder, tracer_provider=provider, raise_internal_errors=True, masking=False)
        with spanreplay.record(agent=agent) as run:
            agent_code()
        log = spanreplay.load(folder, run.run_id)
        assert [e.key for e in log.events] == [key, key]
        assert (log.run.agent, log.run.status) == (agent, "ok")
        with spanreplay.replay(folder, run.run_id):
            assert agent_code() == (1, 2)

"""Recordings edited by hand: each oddity is an error naming the file and where, never a silent choice.

A payload nested deeper than JSON parsers go once failed only where replay or
``show`` parsed it, read as a bug in spanreplay or as a change in the agent's
code. A seq of 1.5, an empty call id or a negative start time were read as 1,
``'None'`` and -1; of two ended copies of one span that disagree (two payloads,
a run that ended ok and with an error) the first was served. Each edit below
keeps the payloads' recorded size and sha256 in step, as a careful forger would.
"""

from __future__ import annotations

import hashlib
import random
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import spanreplay
from fixtures.backends import jaeger_trace
from spanreplay import OutcomeChangedError, RunNotFoundError, SpanReplayWarning, TraceFormatError
from spanreplay import semconv as sc
from spanreplay.cli import cli
from spanreplay.readers import iter_spans

Span = dict[str, Any]


@spanreplay.tool
def lookup(n: int) -> dict[str, Any]:
    return {"n": n, "draw": random.random()}


def agent() -> list[Any]:
    return [lookup(1), lookup(2)]


@pytest.fixture
def recorded(trace_dir: Path) -> tuple[Path, str]:
    with spanreplay.record(agent="t") as run:
        agent()
    return trace_dir / f"{run.run_id}.jsonl", run.run_id


def attributes(span: Span) -> dict[str, Any]:
    return {a["key"]: a["value"] for a in span["attributes"]}


def set_attribute(span: Span, key: str, value: dict[str, Any]) -> None:
    span["attributes"] = [a for a in span["attributes"] if a["key"] != key] + [{"key": key, "value": value}]


def set_payload(span: Span, name: str, text: str) -> None:
    """A payload that passes the size and sha256 checks: both recomputed."""
    data = text.encode()
    set_attribute(span, name, {"stringValue": text})
    set_attribute(span, name + sc.SIZE_SUFFIX, {"intValue": str(len(data))})
    set_attribute(span, name + sc.SHA256_SUFFIX, {"stringValue": hashlib.sha256(data).hexdigest()})


def is_step(seq: int) -> Callable[[Span], bool]:
    return lambda span: attributes(span).get(sc.SEQ) == {"intValue": str(seq)}


def is_ended_run_span(span: Span) -> bool:
    return sc.RUN_STATUS in attributes(span) and span.get("endTimeUnixNano", "0") != "0"


def edit(path: Path, which: Callable[[Span], bool], change: Callable[[Span], None], *, copy: bool = False) -> int:
    """Change the span ``which`` picks (on a copy of its line, added after it, when ``copy``); its line number."""
    out, found = [], 0
    for number, line in enumerate(path.read_bytes().splitlines(), 1):
        out.append(line)
        doc = orjson.loads(line)
        span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        if which(span):
            change(span)
            out[-1:] = [line, orjson.dumps(doc)] if copy else [orjson.dumps(doc)]
            found = number + copy
    path.write_bytes(b"\n".join(out) + b"\n")
    assert found
    return found


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("payload", [sc.OUTPUT, sc.INPUT])
def test_a_payload_nested_past_the_parser_fails_replay_as_the_recording_not_the_code(
    recorded: tuple[Path, str], payload: str
) -> None:
    path, run_id = recorded
    edit(path, is_step(1), lambda span: set_payload(span, payload, deep(100_000)))
    with pytest.raises(TraceFormatError) as caught, spanreplay.replay(path, run_id):
        agent()
    assert not isinstance(caught.value, OutcomeChangedError)
    message = str(caught.value)
    assert message.startswith(f"Run {run_id} seq 1: the recorded payload in attribute {payload} nests deeper than")
    assert f"({path} at byte " in message
    assert "the file was edited or not written by spanreplay" in message


def test_show_seq_of_a_payload_nested_past_the_parser_is_bad_input_not_an_internal_error(
    recorded: tuple[Path, str],
) -> None:
    path, run_id = recorded
    edit(path, is_step(2), lambda span: set_payload(span, sc.OUTPUT, deep(100_000)))
    result = CliRunner().invoke(cli, ["show", str(path), run_id, "--seq", "2"], prog_name="spanreplay")
    assert result.exit_code == 2, result.output
    assert f"seq 2: the recorded payload in attribute {sc.OUTPUT} nests deeper than 1024 levels" in result.output
    assert "internal error" not in result.output


def test_payloads_a_parser_reads_are_not_refused_for_their_nesting(recorded: tuple[Path, str]) -> None:
    path, run_id = recorded
    edit(path, is_step(1), lambda span: set_payload(span, sc.OUTPUT, deep(1000)))
    edit(path, is_step(2), lambda span: set_payload(span, sc.OUTPUT, orjson.dumps([[i] for i in range(5000)]).decode()))
    log = spanreplay.load(path, run_id)
    assert log.by_seq(2).output == [[i] for i in range(5000)]  # type: ignore[union-attr]
    assert log.by_seq(1).output_json == deep(1000).encode()  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("value", "shown"),
    [({"doubleValue": 1.5}, "1.5"), ({"boolValue": True}, "True"), ({"stringValue": "1_0"}, "'1_0'"), ({}, "None")],
)
def test_a_seq_that_is_not_an_integer_is_refused_naming_it(
    recorded: tuple[Path, str], value: dict[str, Any], shown: str
) -> None:
    path, run_id = recorded
    edit(path, is_step(1), lambda span: set_attribute(span, sc.SEQ, value))
    with pytest.raises(TraceFormatError, match=rf"^Attribute {sc.SEQ} is {shown}, not an integer \({path} at byte "):
        spanreplay.load(path, run_id)


@pytest.mark.parametrize("value", [{"doubleValue": 1.0}, {"stringValue": "1"}])
def test_a_seq_written_as_a_whole_double_or_as_text_still_reads(
    recorded: tuple[Path, str], value: dict[str, Any]
) -> None:
    path, run_id = recorded
    edit(path, is_step(1), lambda span: set_attribute(span, sc.SEQ, value))
    assert [event.seq for event in spanreplay.load(path, run_id)] == [1, 2]


@pytest.mark.parametrize(("value", "shown"), [({}, "no value"), ({"stringValue": ""}, "an empty string")])
def test_an_empty_call_id_is_refused_not_read_as_none(
    recorded: tuple[Path, str], value: dict[str, Any], shown: str
) -> None:
    path, run_id = recorded
    edit(path, is_step(2), lambda span: set_attribute(span, sc.CALL_ID, value))
    with pytest.raises(TraceFormatError, match=rf"^Attribute {sc.CALL_ID} holds {shown}, not the text"):
        spanreplay.load(path, run_id)


@pytest.mark.parametrize("field", ["startTimeUnixNano", "endTimeUnixNano"])
def test_a_negative_time_is_refused_naming_the_file_and_line(recorded: tuple[Path, str], field: str) -> None:
    path, run_id = recorded
    line = edit(path, is_step(1), lambda span: span.update({field: "-1"}))
    # The line is damaged: skipped with a warning naming it, and its run refused naming it too.
    with (
        pytest.warns(SpanReplayWarning, match=rf"^{path}:{line}: skipped a damaged line, not a trace .*{field}"),
        pytest.raises(
            TraceFormatError,
            match=rf"^Run {run_id} cannot be loaded: the damaged line {path}:{line}: .*expected {field} in nanoseconds",
        ),
    ):
        spanreplay.load(path, run_id)


def test_two_ended_copies_of_a_step_with_different_payloads_are_refused_naming_both(
    recorded: tuple[Path, str],
) -> None:
    path, run_id = recorded
    edit(path, is_step(1), lambda span: set_payload(span, sc.OUTPUT, '{"n": 1, "draw": 0.5}'), copy=True)
    with pytest.raises(TraceFormatError) as caught:
        spanreplay.load(path, run_id)
    message = str(caught.value)
    assert f"Run {run_id} holds two ended copies of span " in message
    assert f"that differ in {sc.OUTPUT}, {sc.OUTPUT}.sha256 and {sc.OUTPUT}.size ({path} at byte " in message
    assert message.count(f"{path} at byte") == 2


def test_identical_copies_of_a_span_are_merged_silently(recorded: tuple[Path, str]) -> None:
    path, run_id = recorded
    before = spanreplay.load(path, run_id)
    edit(path, is_step(1), lambda span: None, copy=True)
    edit(path, is_ended_run_span, lambda span: None, copy=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = spanreplay.load(path, run_id)
    assert [e.output for e in after] == [e.output for e in before]
    assert after.run.status == "ok"


def test_a_run_span_that_ended_both_ok_and_with_an_error_is_refused(recorded: tuple[Path, str]) -> None:
    path, run_id = recorded
    edit(path, is_ended_run_span, lambda span: set_attribute(span, sc.RUN_STATUS, {"stringValue": "error"}), copy=True)
    with pytest.raises(TraceFormatError, match=rf"^Run {run_id} holds two ended copies of span \w+ that differ in "):
        spanreplay.load(path, run_id)
    with pytest.raises(TraceFormatError), spanreplay.replay(path, run_id):
        agent()


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [("startTime", -5, "startTime in microseconds (zero or more), found -5"), ("duration", None, "-startTime or more")],
)
def test_a_jaeger_span_dated_before_1970_is_refused_naming_the_file(
    recorded: tuple[Path, str], tmp_path: Path, field: str, value: int | None, expected: str
) -> None:
    path, run_id = recorded
    trace = jaeger_trace(list(iter_spans(path)))
    assert spanreplay.load(write_jaeger(tmp_path, trace), run_id).run.status == "ok"
    span = trace["spans"][1]
    span[field] = -span["startTime"] - 1 if value is None else value  # ends 1 µs before 1970
    jaeger = write_jaeger(tmp_path, trace)
    # The document is one damaged line that names no run: the run is not found, and the
    # error names the line and why it could not be read.
    with (
        pytest.warns(SpanReplayWarning, match=rf"^{jaeger}:1: skipped a damaged line"),
        pytest.raises(
            RunNotFoundError, match=rf"^Run {run_id} is not in {jaeger} \({jaeger}:1: .*{re.escape(expected)}"
        ),
    ):
        spanreplay.load(jaeger, run_id)


def write_jaeger(directory: Path, trace: dict[str, Any]) -> Path:
    path = directory / "jaeger.json"
    path.write_bytes(orjson.dumps({"data": [trace]}))
    return path

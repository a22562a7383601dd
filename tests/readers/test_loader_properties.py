"""Damaged recordings: load() and runs() end in a result or a SpanReplayError, and soon.

The recordings are made once by the real recorder in a child process (so this
module leaves no recorder configured behind), then damaged by hypothesis.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanreplay
from fixtures.garbage import JSON, dumps, mutated, time_limit
from helpers.paths import TESTS
from spanreplay import SpanReplayError, SpanReplayWarning

PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
RECORD = """
    import sys
    from opentelemetry.sdk.trace import TracerProvider
    sys.path.insert(0, sys.argv[2])
    import spanreplay
    from fixtures.recordings import record_agent, record_failing

    spanreplay.configure(trace_dir=sys.argv[1], tracer_provider=TracerProvider(), raise_internal_errors=True)
    record_agent("run_ok", big=True, calls=2)
    record_failing("run_err")
"""


def _record() -> dict[str, list[bytes]]:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-c", textwrap.dedent(RECORD), tmp, str(TESTS)], check=True, timeout=120)
        return {p.stem: p.read_bytes().splitlines(keepends=True) for p in Path(tmp).iterdir()}


RUNS = _record()
LINES = [line for lines in RUNS.values() for line in lines]
DOCS: list[Any] = [orjson.loads(line) for line in LINES]


def outcome(data: bytes, run_id: str | None) -> None:
    """Load and list a file holding ``data``: each must give a result or a SpanReplayError."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        path.write_bytes(data)
        with warnings.catch_warnings(), time_limit(20):
            warnings.simplefilter("ignore", SpanReplayWarning)
            for call in (lambda: spanreplay.runs(path), lambda: spanreplay.load(path, run_id)):
                message = "ok"
                try:
                    call()
                except SpanReplayError as exc:
                    message = str(exc)
                assert message.strip(), "an error without a message"


def test_the_recordings_load_before_any_damage() -> None:
    assert sorted(RUNS) == ["run_err", "run_ok"]
    for run_id, lines in RUNS.items():
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "t.jsonl"
            path.write_bytes(b"".join(lines))
            assert spanreplay.load(path, run_id).run_id == run_id


@PROFILE
@given(st.sampled_from(sorted(RUNS)), st.data())
def test_one_line_of_a_run_mutated(run_id: str, data: st.DataObject) -> None:
    lines = list(RUNS[run_id])
    index = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    lines[index] = dumps(data.draw(mutated([orjson.loads(lines[index])]))) + b"\n"
    outcome(b"".join(lines), data.draw(st.sampled_from([run_id, None, "run_zz"])))


@PROFILE
@given(st.data())
def test_attribute_values_of_a_run_replaced(data: st.DataObject) -> None:
    lines = list(RUNS["run_ok"])
    index = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    doc = orjson.loads(lines[index])
    attributes = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        victim = data.draw(st.sampled_from(attributes))
        victim["value"] = data.draw(
            st.one_of(
                st.builds(lambda v: {"stringValue": v}, st.text(max_size=30)),
                st.builds(lambda v: {"intValue": v}, st.one_of(st.integers(), st.text(max_size=8))),
                st.builds(lambda v: {"doubleValue": v}, st.floats(allow_nan=False, allow_infinity=False)),
                st.builds(lambda v: {"doubleValue": v}, st.sampled_from(["NaN", "Infinity", "-Infinity", "1e308"])),
                st.builds(lambda v: {"stringValue": v}, st.sampled_from(["²", "٣", "1_0", " 1", "-1", "1e3", "0x1"])),
                st.builds(lambda v: {"boolValue": v}, st.booleans()),
                st.builds(lambda v: {"arrayValue": {"values": [{"stringValue": x} for x in v]}}, st.lists(st.text())),
                st.builds(
                    lambda v: {"arrayValue": {"values": [{"intValue": str(x)} for x in v]}}, st.lists(st.integers())
                ),
                st.builds(
                    lambda v: {"kvlistValue": {"values": [{"key": k, "value": {"stringValue": k}} for k in v]}},
                    st.lists(st.text()),
                ),
                st.just({}),
            )
        )
    lines[index] = dumps(doc) + b"\n"
    outcome(b"".join(lines), "run_ok")


PAYLOADS = ("spanreplay.input", "spanreplay.output", "spanreplay.error", "spanreplay.run.error")


@PROFILE
@given(st.data())
def test_payloads_replaced_with_a_matching_size_and_digest(data: st.DataObject) -> None:
    # A payload edited together with its size and sha256 passes the integrity check, so
    # whatever JSON (or not-JSON) it holds reaches the decoders behind it.
    run_id = data.draw(st.sampled_from(sorted(RUNS)))
    lines = list(RUNS[run_id])
    index = data.draw(st.integers(min_value=0, max_value=len(lines) - 1))
    doc = orjson.loads(lines[index])
    attributes = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
    name = data.draw(st.sampled_from(PAYLOADS))
    payload = data.draw(
        st.one_of(
            JSON.map(dumps),
            st.fixed_dictionaries({"type": JSON, "module": JSON, "args": JSON, "fields": JSON}).map(dumps),
            st.dictionaries(st.sampled_from(["type", "module", "message", "args", "fields"]), JSON).map(dumps),
            st.text(max_size=30).map(str.encode),
        )
    )
    attributes[:] = [a for a in attributes if not a["key"].startswith(name)] + [
        {"key": name, "value": {"stringValue": payload.decode()}},
        {"key": name + ".size", "value": {"intValue": str(len(payload))}},
        {"key": name + ".sha256", "value": {"stringValue": hashlib.sha256(payload).hexdigest()}},
    ]
    lines[index] = dumps(doc) + b"\n"
    outcome(b"".join(lines), run_id)


@PROFILE
@given(st.data())
def test_run_file_cut_spliced_or_flipped_as_bytes(data: st.DataObject) -> None:
    text = b"".join(RUNS["run_ok"])
    at = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    outcome(text[:at], "run_ok")
    outcome(text[:at] + data.draw(st.binary(min_size=1, max_size=8)) + text[at:], "run_ok")
    outcome(text[:at] + bytes([text[at] ^ data.draw(st.integers(1, 255))]) + text[at + 1 :], "run_ok")


@PROFILE
@given(
    st.lists(st.one_of(st.sampled_from(LINES), mutated(DOCS).map(lambda d: dumps(d) + b"\n")), max_size=12), st.data()
)
def test_collector_file_of_good_and_damaged_lines(lines: list[bytes], data: st.DataObject) -> None:
    outcome(b"".join(lines), data.draw(st.sampled_from(["run_ok", "run_err", None])))


@PROFILE
@given(JSON)
def test_arbitrary_json_lines(value: Any) -> None:
    outcome(dumps(value) + b"\n" + dumps(value) + b"\n", "run_ok")


@pytest.mark.parametrize("size", [0, 1, 2, 10])
def test_arbitrary_small_files(size: int) -> None:
    outcome(b"{" * size, None)

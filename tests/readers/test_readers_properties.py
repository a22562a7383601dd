"""Whatever bytes a file holds, the readers end in spans or a SpanReplayError, and soon."""

from __future__ import annotations

import gzip
import tempfile
import warnings
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fixtures.garbage import ANY_VALUE, JSON, dumps, mutated, time_limit
from fixtures.tracedocs import document, span
from helpers.paths import THIRD_PARTY
from spanreplay import SpanReplayError, SpanReplayWarning
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import read_file
from spanreplay.readers._base import MalformedTrace
from spanreplay.readers._otlp_json import any_value

DOCS: list[Any] = [
    orjson.loads(raw)
    for path in sorted(THIRD_PARTY.rglob("*.json*"))
    for raw in ([path.read_bytes()] if path.suffix == ".json" else path.read_bytes().splitlines())
] + [
    document(
        [
            span(
                "tool",
                parent="00f067aa0ba902b7",
                attributes={"spanreplay.run.id": "run_x", "spanreplay.seq": 1, "tags": ["a", "b"], "pi": 3.14},
            )
        ]
    )
]
PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def read(data: bytes, *, contains: bytes | None = None) -> list[SpanRecord] | SpanReplayError:
    """Everything ``read_file`` makes of a file holding ``data``: its spans, or the error it raised."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace"
        path.write_bytes(data)
        with warnings.catch_warnings(), time_limit(10):
            warnings.simplefilter("ignore", SpanReplayWarning)
            try:
                return list(read_file(str(path), contains=contains))
            except SpanReplayError as exc:
                error = exc
    assert str(error).strip(), "an error without a message"
    return error


@PROFILE
@given(st.binary(max_size=2000))
@example(b"\x1f\x8b")
@example(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
@example(b"\xef\xbb\xbf")
@example(b"{\xff}\n")
@example(b"[" * 2000)
@example(b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"\\ud800"}]}]}]}')
def test_arbitrary_bytes(data: bytes) -> None:
    read(data)
    read(data, contains=b"run")


@PROFILE
@given(st.binary(max_size=2000))
@example(b"not gzip at all")
def test_arbitrary_bytes_behind_the_gzip_magic(data: bytes) -> None:
    read(b"\x1f\x8b" + data)


@PROFILE
@given(st.binary(max_size=2000), st.integers(min_value=0, max_value=4000), st.integers(min_value=1, max_value=255))
def test_gzip_cut_short_or_damaged(data: bytes, at: int, flip: int) -> None:
    zipped = gzip.compress(data)
    read(zipped[:at])
    at = min(at, len(zipped) - 1)
    read(zipped[:at] + bytes([zipped[at] ^ flip]) + zipped[at + 1 :])


@PROFILE
@given(JSON)
def test_arbitrary_json_value(value: Any) -> None:
    encoded = orjson.dumps(value)
    read(encoded)
    read(encoded + b"\n" + encoded + b"\n")
    read(orjson.dumps(value, option=orjson.OPT_INDENT_2))


@PROFILE
@given(
    st.dictionaries(st.sampled_from(["resourceSpans", "batches", "data", "result", "trace", "spans", "traceID"]), JSON)
)
def test_arbitrary_values_under_trace_keys(value: dict[str, Any]) -> None:
    read(orjson.dumps(value))


@PROFILE
@given(mutated(DOCS))
def test_mutated_trace_documents(doc: Any) -> None:
    encoded = dumps(doc)
    read(encoded)
    read(encoded + b"\n" + orjson.dumps(DOCS[-1]) + b"\n")
    read(orjson.dumps(DOCS[-1]) + b"\n" + encoded + b"\n", contains=b'"run_x"')


@PROFILE
@given(mutated(DOCS), st.data())
def test_mutated_documents_cut_or_spliced_as_text(doc: Any, data: st.DataObject) -> None:
    encoded = dumps(doc)
    at = data.draw(st.integers(min_value=0, max_value=len(encoded)))
    read(encoded[:at])
    read(encoded[:at] + data.draw(st.binary(max_size=20)) + encoded[at:])


@PROFILE
@given(ANY_VALUE)
def test_any_value_decodes_to_plain_values_or_raises_malformed_trace(value: Any) -> None:
    try:
        decoded = any_value(value)
    except MalformedTrace as exc:
        decoded = str(exc)
        assert decoded, "an error without a message"
    assert is_plain(decoded)


def is_plain(value: Any) -> bool:
    if isinstance(value, list):
        return all(is_plain(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and is_plain(v) for k, v in value.items())
    return value is None or isinstance(value, (str, bool, int, float, bytes))

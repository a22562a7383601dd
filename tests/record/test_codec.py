"""The span codec: payload chunks, digests, cut payloads, errors and their rebuilding."""

from __future__ import annotations

import errno
import hashlib
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spanreplay
from spanreplay import semconv as sc
from spanreplay.errors import PayloadIntegrityError, TraceFormatError
from spanreplay.model import codec as _codec
from spanreplay.model import error_records as _error_records
from spanreplay.model import payloads as _payloads
from spanreplay.model.spans import SpanRecord

# --- chunks ------------------------------------------------------------------------


@given(st.text(), st.integers(min_value=4, max_value=64))
def test_chunk_utf8_rejoins_to_the_text_and_never_splits_a_character(text: str, limit: int) -> None:
    data = text.encode()
    chunks = _payloads.chunk_utf8(data, limit)
    assert "".join(chunks) == text
    for chunk in chunks:
        assert 0 < len(chunk.encode()) <= limit


@given(st.text(min_size=1))
def test_chunk_utf8_at_the_payload_limit_keeps_every_chunk_under_it(text: str) -> None:
    data = (text * (4001 // len(text.encode()) + 1)).encode()
    chunks = _payloads.chunk_utf8(data, _payloads.CHUNK_BYTES)
    assert "".join(chunks).encode() == data
    assert all(len(c.encode()) <= _payloads.CHUNK_BYTES for c in chunks)


def test_chunk_utf8_refuses_a_limit_below_one_character() -> None:
    with pytest.raises(ValueError, match="at least 4 bytes"):
        _payloads.chunk_utf8("€".encode(), 2)


def test_a_payload_at_the_threshold_is_one_string_and_above_it_an_array_of_chunks() -> None:
    at_limit = b'"' + b"x" * (_payloads.INLINE_MAX_BYTES - 2) + b'"'
    attrs = _payloads.payload_attributes(sc.INPUT, at_limit)
    assert isinstance(attrs[sc.INPUT], str)
    above = b'"' + "é".encode() * 1500 + b'"'
    attrs = _payloads.payload_attributes(sc.INPUT, above)
    chunks = attrs[sc.INPUT]
    assert isinstance(chunks, tuple)
    assert len(chunks) == 2
    assert all(len(c.encode()) <= 2000 for c in chunks)
    assert attrs[sc.INPUT + sc.SIZE_SUFFIX] == len(above)
    assert attrs[sc.INPUT + sc.SHA256_SUFFIX] == hashlib.sha256(above).hexdigest()


@settings(max_examples=50)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(),
        lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids),
        max_leaves=200,
    )
)
def test_any_json_payload_round_trips_through_the_attributes(value: Any) -> None:
    data = _payloads.encode_output(value)
    attrs = _payloads.payload_attributes(sc.OUTPUT, data)
    back = _payloads.read_payload(_as_read(attrs), sc.OUTPUT, run_id="run_x", seq=1, origin="test")
    assert back == data
    assert orjson.loads(back) == value


def _as_read(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes as a reader hands them over: arrays come back as lists."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


# --- cut payloads ------------------------------------------------------------------

_BIG = orjson.dumps({"text": "ünïcödé " * 700})


def _cut(how: str) -> dict[str, Any]:
    attrs = _as_read(_payloads.payload_attributes(sc.OUTPUT, _BIG))
    chunks = attrs[sc.OUTPUT]
    if how == "truncate the string":
        attrs[sc.OUTPUT] = "".join(chunks)[:2048]
    elif how == "drop a chunk":
        attrs[sc.OUTPUT] = chunks[:-1]
    elif how == "drop the attribute":
        del attrs[sc.OUTPUT]
    elif how == "change a byte":
        # '{"text": ...' -> '{"Text": ...': one ASCII byte, same length, another digest.
        attrs[sc.OUTPUT] = [chunks[0][:2] + "T" + chunks[0][3:], *chunks[1:]]
    return attrs


@pytest.mark.parametrize("how", ["truncate the string", "drop a chunk", "drop the attribute", "change a byte"])
def test_a_cut_payload_raises_naming_run_seq_attribute_sizes_and_the_setting(how: str) -> None:
    attrs = _cut(how)
    with pytest.raises(PayloadIntegrityError) as caught:
        _payloads.read_payload(attrs, sc.OUTPUT, run_id="run_20260101_000000_abcdef12", seq=7, origin="t.jsonl:3")
    err = caught.value
    message = str(err)
    assert "run_20260101_000000_abcdef12" in message
    assert "seq 7" in message
    assert sc.OUTPUT in message
    assert f"{len(_BIG)} bytes" in message
    assert "t.jsonl:3" in message
    assert "OTEL_SPAN_ATTRIBUTE" in message or "max_attribute_bytes" in message
    assert (err.run_id, err.seq, err.attribute, err.expected_size) == (
        "run_20260101_000000_abcdef12",
        7,
        sc.OUTPUT,
        len(_BIG),
    )
    found = 0 if how == "drop the attribute" else len(_payload_bytes(attrs[sc.OUTPUT]))
    assert err.found_size == found
    assert f"{found} found" in message


def _payload_bytes(value: str | list[str]) -> bytes:
    return (value if isinstance(value, str) else "".join(value)).encode()


def test_a_changed_byte_of_the_same_length_is_reported_as_a_digest_mismatch() -> None:
    with pytest.raises(PayloadIntegrityError, match="sha256"):
        _payloads.read_payload(_cut("change a byte"), sc.OUTPUT, run_id="r", seq=1, origin="f")


def test_a_payload_whose_digest_was_dropped_is_not_trusted() -> None:
    attrs = _as_read(_payloads.payload_attributes(sc.OUTPUT, b'{"a":1}'))
    del attrs[sc.OUTPUT + sc.SHA256_SUFFIX]
    with pytest.raises(PayloadIntegrityError, match="seq 4"):
        _payloads.read_payload(attrs, sc.OUTPUT, run_id="r", seq=4, origin="f")


def _boundary_span(**drop: bool) -> SpanRecord:
    attrs: dict[str, Any] = {
        sc.RUN_ID: "run_a",
        sc.SEQ: 3,
        sc.CALL_ID: "tool:search#0",
        sc.KIND: "tool",
        sc.KEY: "search",
        sc.SCHEMA: sc.SCHEMA_VERSION,
    }
    attrs.update(_payloads.payload_attributes(sc.INPUT, b'{"q":"x"}'))
    attrs.update(_payloads.payload_attributes(sc.OUTPUT, b'["r"]'))
    for name, gone in drop.items():
        if gone:
            prefix = sc.INPUT if name == "input" else sc.OUTPUT
            for key in [k for k in attrs if k.startswith(prefix)]:
                del attrs[key]
    return SpanRecord(
        trace_id="1" * 32, span_id="2" * 16, name="execute_tool search", end_ns=2, attributes=attrs, origin="f.jsonl:9"
    )


def test_a_boundary_span_that_lost_its_whole_input_is_never_replayed_with_a_null_input() -> None:
    with pytest.raises(PayloadIntegrityError, match=r"run_a.*seq 3.*spanreplay\.input"):
        _codec.span_to_event(_boundary_span(input=True))


def test_a_boundary_span_that_lost_both_its_output_and_error_is_rejected() -> None:
    with pytest.raises(PayloadIntegrityError, match=r"run_a.*seq 3.*neither"):
        _codec.span_to_event(_boundary_span(output=True))


def test_a_complete_boundary_span_decodes_into_its_event() -> None:
    event = _codec.span_to_event(_boundary_span())
    assert (event.run_id, event.seq, event.call_id, event.kind, event.key) == (
        "run_a",
        3,
        "tool:search#0",
        "tool",
        "search",
    )
    assert event.input == {"q": "x"}
    assert event.output == ["r"]


def test_an_unknown_schema_version_names_the_upgrade() -> None:
    span = _boundary_span()
    span.attributes[sc.SCHEMA] = sc.SCHEMA_VERSION_READ + 1
    with pytest.raises(spanreplay.SchemaVersionError, match="pip install -U spanreplay"):
        _codec.span_to_event(span)


def test_a_payload_of_the_wrong_type_is_a_format_error() -> None:
    attrs = _as_read(_payloads.payload_attributes(sc.OUTPUT, b"1"))
    attrs[sc.OUTPUT] = 1
    with pytest.raises(TraceFormatError, match="holds int"):
        _payloads.read_payload(attrs, sc.OUTPUT, run_id="r", seq=1, origin="f")


# --- errors ------------------------------------------------------------------------


class QuotaError(Exception):
    """A custom exception with structured fields, like an SDK's API error."""

    def __init__(self, message: str, status_code: int = 500, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after


class ResponseError(Exception):
    """A type whose constructor takes something other than its message."""

    def __init__(self, response: dict[str, Any]) -> None:
        super().__init__(f"HTTP {response['status']}")
        self.response = response


def _round_trip(exc: BaseException) -> BaseException:
    data = _error_records.encode_error(exc)
    return _error_records.rebuild_error(_error_records.decode_error(data))


def test_a_builtin_error_is_rebuilt_as_its_own_type_with_its_message_and_args() -> None:
    rebuilt = _round_trip(KeyError("missing", 3))
    assert type(rebuilt) is KeyError
    assert rebuilt.args == ("missing", 3)


def test_a_custom_error_is_rebuilt_with_its_structured_fields() -> None:
    original = QuotaError("rate limited", status_code=429, retry_after=1.5)
    info = _error_records.decode_error(_error_records.encode_error(original))
    assert info.fields["status_code"] == 429
    assert info.module == __name__
    rebuilt = _error_records.rebuild_error(info)
    assert type(rebuilt) is QuotaError
    assert str(rebuilt) == "rate limited"
    assert rebuilt.status_code == 429  # type: ignore[attr-defined]
    assert rebuilt.retry_after == 1.5  # type: ignore[attr-defined]


def test_an_os_error_is_rebuilt_with_errno_strerror_and_filename() -> None:
    try:
        open("/nonexistent/spanreplay/file")  # noqa: SIM115
    except OSError as exc:
        original = exc
    rebuilt = _round_trip(original)
    assert type(rebuilt) is FileNotFoundError
    assert isinstance(rebuilt, OSError)
    assert rebuilt.errno == errno.ENOENT
    assert rebuilt.filename == "/nonexistent/spanreplay/file"
    assert str(rebuilt) == str(original)


def test_a_type_whose_constructor_takes_other_arguments_comes_back_as_recorded_error() -> None:
    rebuilt = _round_trip(ResponseError({"status": 503}))
    assert isinstance(rebuilt, spanreplay.RecordedError)
    assert rebuilt.type_name == "ResponseError"
    assert rebuilt.module == __name__
    assert rebuilt.message == "HTTP 503"
    assert f"{__name__}.ResponseError: HTTP 503" in str(rebuilt)
    assert "register_error_rebuilder" in str(rebuilt)


def test_a_type_from_a_module_not_imported_at_replay_comes_back_as_recorded_error() -> None:
    data = orjson.dumps(
        {
            "type": "APIStatusError",
            "module": "some_sdk_never_imported._exceptions",
            "message": "overloaded",
            "args": ["overloaded"],
            "fields": {"status_code": 529},
        }
    )
    rebuilt = _error_records.rebuild_error(_error_records.decode_error(data))
    assert isinstance(rebuilt, spanreplay.RecordedError)
    assert rebuilt.fields == {"status_code": 529}
    assert "some_sdk_never_imported._exceptions.APIStatusError: overloaded" in str(rebuilt)
    assert "import some_sdk_never_imported._exceptions" in str(rebuilt)


def test_a_registered_rebuilder_takes_precedence() -> None:
    def rebuild(info: spanreplay.ErrorInfo) -> BaseException | None:
        return ResponseError({"status": info.message[5:]}) if info.type_name == "ResponseError" else None

    spanreplay.register_error_rebuilder(rebuild)
    try:
        rebuilt = _round_trip(ResponseError({"status": 503}))
    finally:
        _error_records._rebuilders.remove(rebuild)
    assert type(rebuilt) is ResponseError
    assert str(rebuilt) == "HTTP 503"


def test_an_error_payload_that_is_not_the_recorded_shape_is_a_format_error() -> None:
    with pytest.raises(TraceFormatError, match=r"f\.jsonl:2"):
        _error_records.decode_error(b'["not", "an", "object"]', origin="f.jsonl:2")


def test_values_json_cannot_hold_are_encoded_without_memory_addresses() -> None:
    class Opaque:
        pass

    first = _payloads.encode_input({"o": Opaque(), "s": {3, 1}, "b": b"\xff"})
    second = _payloads.encode_input({"b": b"\xff", "s": {1, 3}, "o": Opaque()})
    assert first == second
    assert b"0x" not in first

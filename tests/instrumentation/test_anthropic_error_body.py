"""A recorded Anthropic error's body, its headers and message: kept at record time, read back in linear time.

``ast.literal_eval`` on the message of a recorded status error made a 4 MB trace
take minutes and a gigabyte to replay. The body is now recorded as JSON in the
error's fields; recordings from before are read by a linear parser of the
``repr`` of JSON-like values, bounded in size and nesting, which gives the value
or the raw text, never an exception. The SDK 2.17 words its errors differently
and takes a timeout's message: rebuilt errors carry the recorded body, headers,
request and message on every release in the supported range.
"""

from __future__ import annotations

import ast
import logging
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, serve
from spanreplay.instrumentation.anthropic import _error_body, _errors
from spanreplay.instrumentation.anthropic._error_body import body_from_message, parse_repr
from spanreplay.model import error_records as _error_records
from spanreplay.testing.messages_api import api_error

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

USER = [{"role": "user", "content": "Where is my order A-17?"}]
REQUEST = httpx2.Request("POST", "https://api.anthropic.com/v1/messages")


def large_body(size: int) -> dict[str, Any]:
    """An error body whose repr is at least ``size`` characters, of the shape that costs a parser most."""
    items = [
        {"index": i, "text": f"line {i} \u00e9\t'quoted' \"too\"", "ok": i % 3 == 0, "x": None}
        for i in range(size // 60)
    ]
    return {"type": "error", "error": {"type": "invalid_request_error", "message": "too large", "items": items}}


def old_payload(body: Any, status: int = 400, type_name: str = "BadRequestError") -> _error_records.ErrorInfo:
    """An error recorded before the body was kept: the SDK 2.0 wording, the body only in the message."""
    message = f"Error code: {status} - {body!r}"
    record = {
        "type": type_name,
        "module": "anthropic",
        "message": message,
        "args": [message],
        "fields": {"message": message, "status_code": status, "request_id": "req_1"},
    }
    return _error_records.decode_error(orjson.dumps(record))


@pytest.fixture
def no_ast(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the error body must not be parsed with ast")

    monkeypatch.setattr(ast, "literal_eval", refuse)
    monkeypatch.setattr(ast, "parse", refuse)


def test_the_parser_module_does_not_use_ast() -> None:
    assert "ast" not in vars(_error_body)
    assert "ast" not in vars(_errors)


def test_a_4_mb_body_is_read_back_from_an_old_recording_without_ast(no_ast: None) -> None:
    body = large_body(4_000_000)
    assert len(repr(body)) >= 4_000_000
    assert parse_repr(repr(body)) == body
    rebuilt = _errors.rebuild_anthropic_error(old_payload(body))
    assert type(rebuilt) is anthropic.BadRequestError
    assert rebuilt.body == body
    assert rebuilt.status_code == 400
    assert rebuilt.request_id == "req_1"


def test_python_repr_forms_are_read_as_python_reads_them() -> None:
    text = (
        r"""{'a': [1, -2, 3.5, 1e-07, -0.0, True, False, None, (1, 2), ()], "b'q": """
        r"""'it\'s \\ \x00\x7f\u20ac\U0001f600\n', 3: {}}"""
    )
    assert parse_repr(text) == ast.literal_eval(text)
    assert parse_repr("  [1, 2,]  ") == [1, 2]
    assert parse_repr("(1)") == 1
    assert parse_repr("(1,)") == (1,)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "{",
        "{'a'}",
        "{'a': }",
        "[1 2]",
        "[1,,2]",
        "{[1]: 2}",
        "'unterminated",
        "'bad \\x4'",
        "'\\U00110000'",
        "[1] [2]",
        "Truex",
        "__import__('os').system('true')",
        "{1: 2]",
        "9" * 5000,
        "01",
        "[inf]",
        "'\\q'",
        "1_000",
        "\u0663",
        "[1,\u00a02]",
        "'a' 'b'",
        "{(1, [2]): 3}",
        "{1, 2}",
    ],
)
def test_malformed_text_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_repr(text)


def test_a_malformed_body_comes_back_as_its_text() -> None:
    assert body_from_message("Error code: 502 - <html>bad gateway</html>", 502) == "<html>bad gateway</html>"
    assert body_from_message("429 slow down (request_id: req_1)", 429) is None


def test_a_body_beyond_the_size_cap_comes_back_as_its_text_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, no_ast: None
) -> None:
    monkeypatch.setattr(_error_body, "MAX_BODY_CHARS", 1000)
    body = large_body(2000)
    with caplog.at_level(logging.WARNING, logger=_error_body.__name__):
        got = body_from_message(f"Error code: 400 - {body!r}", 400)
    assert got == repr(body)
    assert f"is {len(repr(body))} characters, beyond the 1000 that replay reads back" in caplog.text


def test_nesting_beyond_the_cap_comes_back_as_its_text() -> None:
    deep = "[" * (_error_body.MAX_DEPTH + 1) + "]" * (_error_body.MAX_DEPTH + 1)
    assert body_from_message(f"Error code: 400 - {deep}", 400) == deep
    ok = "[" * 100 + "]" * 100
    assert body_from_message(f"Error code: 400 - {ok}", 400) is not None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_the_repr_of_any_json_value_is_read_back_as_that_value(value: Any) -> None:
    assert parse_repr(repr(value)) == value


@settings(max_examples=500, deadline=None)
@given(json_values, st.integers(min_value=0), st.text(max_size=4))
def test_a_damaged_body_gives_a_value_or_its_text_never_an_error(value: Any, where: int, noise: str) -> None:
    text = repr(value)
    cut = where % (len(text) + 1)
    damaged = text[:cut] + noise + text[cut + len(noise) :]
    got = body_from_message(f"Error code: 400 - {damaged}", 400)
    if got != damaged:
        # The parser reads a subset of what Python reads, and reads it the same way.
        assert got == ast.literal_eval(damaged)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[](){}:,'\"\\ -.0123456789eTrueFalsNoinfxu")), max_size=60))
def test_arbitrary_text_gives_a_value_or_its_text(text: str) -> None:
    got = body_from_message(f"Error code: 400 - {text}", 400)
    if got != text:
        assert got == ast.literal_eval(text)


def test_an_api_error_is_recorded_with_its_body_headers_and_request(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    server.script(api_error(429, "slow down", headers={"retry-after": "7"}))
    with (
        anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0) as client,
        pytest.raises(anthropic.RateLimitError) as caught,
    ):
        client.messages.create(model=MODEL, max_tokens=256, messages=USER)
    original = caught.value
    info = _error_records.decode_error(_error_records.encode_error(original))
    assert (
        info.fields["body"]
        == original.body
        == {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "slow down"},
        }
    )
    assert info.fields["response_headers"]["retry-after"] == "7"
    assert info.fields["request_url"] == str(original.request.url)
    rebuilt = _error_records.rebuild_error(info)
    assert type(rebuilt) is anthropic.RateLimitError
    assert (rebuilt.body, str(rebuilt), rebuilt.request_id, rebuilt.status_code) == (
        original.body,
        str(original),
        original.request_id,
        original.status_code,
    )
    assert rebuilt.response.headers["retry-after"] == "7"
    assert str(rebuilt.request.url) == str(original.request.url)
    assert rebuilt.request.method == "POST"


def test_a_password_in_the_request_url_is_not_recorded() -> None:
    request = httpx2.Request("POST", "https://user:hunter2@proxy.example/v1/messages")
    error = anthropic.APIConnectionError(request=request)
    fields = _errors.error_fields(error)
    assert fields is not None
    assert fields["request_url"] == "https://proxy.example/v1/messages"
    assert "hunter2" not in orjson.dumps(fields).decode()


@pytest.mark.parametrize(
    "message",
    [
        "Request to 127.0.0.1:8123 timed out after 0.5s",
        "Request timed out or interrupted. This could be due to a network timeout, dropped connection, or "
        "request cancellation. See https://docs.anthropic.com/en/api/errors#long-requests for more details.",
    ],
)
def test_a_recorded_timeout_replays_with_its_message_on_this_release(message: str) -> None:
    replayed = _errors.connection_error({"type": "timeout", "message": message}, REQUEST)
    assert type(replayed) is anthropic.APITimeoutError
    assert str(replayed) == replayed.message == message
    assert replayed.args == (message,)
    assert replayed.request is REQUEST
    record = orjson.loads(_error_records.encode_error(replayed))
    rebuilt = _errors.rebuild_anthropic_error(_error_records.decode_error(orjson.dumps(record)))
    assert type(rebuilt) is anthropic.APITimeoutError
    assert str(rebuilt) == message


def test_a_recorded_connection_error_replays_with_its_message() -> None:
    replayed = _errors.connection_error({"type": "connection", "message": "Connection to h:1 failed: refused"}, REQUEST)
    assert type(replayed) is anthropic.APIConnectionError
    assert str(replayed) == "Connection to h:1 failed: refused"


def test_an_error_recorded_in_the_new_wording_without_its_body_keeps_its_derived_fields() -> None:
    message = "429 slow down (request_id: req_000001, path: /v1/messages, type: rate_limit_error)"
    fields = {"status_code": 429, "request_id": "req_000001", "api_message": "slow down", "type": "rate_limit_error"}
    record = {"type": "RateLimitError", "module": "anthropic", "message": message, "args": [message], "fields": fields}
    rebuilt = _errors.rebuild_anthropic_error(_error_records.decode_error(orjson.dumps(record)))
    assert type(rebuilt) is anthropic.RateLimitError
    assert str(rebuilt) == message
    assert rebuilt.request_id == "req_000001"
    for name in ("api_message", "type"):
        if hasattr(rebuilt, name):  # attributes the newer releases derive from the body
            assert getattr(rebuilt, name) == fields[name]


@pytest.mark.parametrize(
    ("module", "type_name"),
    [
        ("anthropic", "Anthropic"),  # a class, not an error
        ("anthropic", "_exceptions"),  # a submodule
        ("anthropic", "APIError.__init__"),
        ("anthropic.lib.never_imported_module", "APIError"),
    ],
)
def test_a_recorded_anthropic_name_that_is_no_sdk_error_is_not_built(module: str, type_name: str) -> None:
    record = {"type": type_name, "module": module, "message": "boom", "args": ["boom"], "fields": {"status_code": 400}}
    info = _error_records.decode_error(orjson.dumps(record))
    assert _errors.rebuild_anthropic_error(info) is None
    assert isinstance(_error_records.rebuild_error(info), spanreplay.RecordedError)
    assert "anthropic.lib.never_imported_module" not in sys.modules


@pytest.mark.parametrize(
    "fields",
    [
        {"response_headers": {"bad\nname": "x\r\ny", "\u00e9": "\u20ac"}},
        {"request_url": "http://[::1", "request_method": "POST"},
        {"request_url": "::not a url::", "request_method": "\u00e9 \n"},
        {"response_headers": ["not", "a", "dict"], "request_url": 7},
    ],
)
def test_hostile_headers_and_urls_give_the_error_or_none_never_a_crash(fields: dict[str, Any]) -> None:
    record = {
        "type": "RateLimitError",
        "module": "anthropic",
        "message": "boom",
        "args": ["boom"],
        "fields": {"status_code": 429, **fields},
    }
    rebuilt = _errors.rebuild_anthropic_error(_error_records.decode_error(orjson.dumps(record)))
    assert rebuilt is None or (type(rebuilt) is anthropic.RateLimitError and str(rebuilt) == "boom")

"""Bad input: a replay that asks for another request, an unsupported SDK, uninstrumenting."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic import _base_client
from hypothesis import given
from hypothesis import strategies as st

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, serve
from spanreplay.instrumentation.anthropic import AnthropicInstrumentor
from spanreplay.instrumentation.anthropic._exchange import encode_sse, parse_sse

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

USER = [{"role": "user", "content": "Where is my order A-17?"}]


def _record(server: MessagesAPIServer, **args: Any) -> str:
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client, spanreplay.record() as run:
        client.messages.create(**{"model": MODEL, "max_tokens": 256, "messages": USER, **args})
    server.stop()
    return run.run_id


def test_changed_request_parameters_raise_input_changed_with_a_diff(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    run_id = _record(server)
    with (
        anthropic.Anthropic(base_url=server.url, api_key="test-key") as client,
        pytest.raises(spanreplay.InputChangedError) as caught,
        spanreplay.replay(trace_dir, run_id),
    ):
        client.messages.create(model=MODEL, max_tokens=512, messages=USER)
    assert '-    "max_tokens": 256' in caught.value.diff
    assert '+    "max_tokens": 512' in caught.value.diff
    assert caught.value.seq == 1


def test_a_changed_model_raises_input_changed_naming_both_models(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    run_id = _record(server)
    with (
        anthropic.Anthropic(base_url=server.url, api_key="test-key") as client,
        pytest.raises(spanreplay.InputChangedError) as caught,
        spanreplay.replay(trace_dir, run_id),
    ):
        client.messages.create(model="claude-haiku-4-5", max_tokens=256, messages=USER)
    message = str(caught.value)
    assert f"model '{MODEL}' recorded" in message
    assert "'claude-haiku-4-5' attempted" in message
    assert f'-    "model": "{MODEL}"' in caught.value.diff
    assert '+    "model": "claude-haiku-4-5"' in caught.value.diff


def test_more_retries_than_recorded_is_a_divergence(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    from helpers.messages_api_server import api_error

    server.script(api_error(529))
    with anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0) as client:
        with spanreplay.record() as run, pytest.raises(anthropic.APIStatusError, match="529"):
            client.messages.create(model=MODEL, max_tokens=256, messages=USER)
        server.stop()
        with (
            pytest.raises(spanreplay.ReplayDivergenceError, match="give it the recorded max_retries"),
            spanreplay.replay(trace_dir, run.run_id),
        ):
            client.with_options(max_retries=2).messages.create(model=MODEL, max_tokens=256, messages=USER)


def test_uninstrument_restores_the_sdk(server: MessagesAPIServer, trace_dir: Path) -> None:
    originals = {
        name: getattr(_base_client.SyncAPIClient, name) for name in ("request", "_attempt_request", "_sleep_for_retry")
    }
    tracer = _base_client.BaseClient.__dict__["_tracer"]
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(zero_code=False)
    assert _base_client.SyncAPIClient.request is not originals["request"]
    instrumentor.uninstrument()

    for name, original in originals.items():
        assert getattr(_base_client.SyncAPIClient, name) is original
    assert _base_client.BaseClient.__dict__["_tracer"] is tracer
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client, spanreplay.record() as run:
        client.messages.create(model=MODEL, max_tokens=256, messages=USER)
    assert len(spanreplay.load(trace_dir, run.run_id)) == 0


def test_an_sdk_outside_the_supported_range_logs_one_line_and_instruments_nothing(tmp_path: Path) -> None:
    # A distribution record that says anthropic 1.17.0 shadows the installed one for this process.
    dist = tmp_path / "anthropic-1.17.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: anthropic\nVersion: 1.17.0\n")
    script = textwrap.dedent(
        """
        import logging, sys
        logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(name)s %(levelname)s %(message)s")
        from anthropic import _base_client
        before = _base_client.SyncAPIClient.request
        from spanreplay.instrumentation.anthropic import AnthropicInstrumentor
        result = AnthropicInstrumentor().instrument()
        assert _base_client.SyncAPIClient.request is before, "instrumented anyway"
        assert not AnthropicInstrumentor().is_instrumented_by_opentelemetry
        print("untouched")
        """
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "untouched"
    lines = [line for line in done.stderr.splitlines() if "anthropic 1.17.0" in line]
    assert len(lines) == 1
    assert "outside the supported range (anthropic >= 2.0, < 3)" in lines[0]
    assert "pip install 'anthropic>=2.0,<3'" in lines[0]


@given(st.binary(max_size=400))
def test_sse_parsing_of_arbitrary_bytes_never_raises_and_keeps_only_complete_events(data: bytes) -> None:
    events = parse_sse(data)
    for event in events:
        assert set(event) in ({"event", "data"}, {"event", "text"})
    if not data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").endswith(b"\n\n"):
        assert len(events) <= data.count(b"\n\n") + data.count(b"\r\r") + data.count(b"\r\n\r\n")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["message_start", "content_block_delta", "ping", "error"]),
            st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=10), max_size=3),
        ),
        max_size=6,
    )
)
def test_recorded_events_survive_a_round_trip_through_sse(pairs: list[tuple[str, dict[str, Any]]]) -> None:
    events = [{"event": name, "data": data} for name, data in pairs]
    assert parse_sse(encode_sse(events)) == events


def test_recorded_api_errors_rebuild_from_their_payload_alone(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    from helpers.messages_api_server import api_error
    from spanreplay.model import error_records as _error_records

    server.script(api_error(429, "slow down"))
    with (
        anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0) as client,
        pytest.raises(anthropic.RateLimitError) as caught,
    ):
        client.messages.create(model=MODEL, max_tokens=256, messages=USER)
    original = caught.value
    rebuilt = _error_records.rebuild_error(_error_records.decode_error(_error_records.encode_error(original)))
    assert type(rebuilt) is anthropic.RateLimitError
    assert isinstance(rebuilt, anthropic.RateLimitError)
    assert (rebuilt.status_code, rebuilt.request_id, rebuilt.body, str(rebuilt)) == (
        original.status_code,
        original.request_id,
        original.body,
        str(original),
    )
    request = anthropic._base_client.httpx2.Request("POST", "https://api.anthropic.com/v1/messages")
    for error in (anthropic.APITimeoutError(request=request), anthropic.APIConnectionError(request=request)):
        again = _error_records.rebuild_error(_error_records.decode_error(_error_records.encode_error(error)))
        assert type(again) is type(error)
        assert str(again) == str(error)


def test_a_body_in_other_bytes_than_compact_json_replays_byte_for_byte(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None
) -> None:
    from helpers.messages_api_server import Reply, message, text

    spaced = message(text("Spaced out."))
    server.default = lambda body: Reply(body=spaced)
    server.spaced_json = True
    args: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": USER}
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client:
        with spanreplay.record() as run, client.messages.with_streaming_response.create(**args) as response:
            raw = response.read()
        server.stop()
        with spanreplay.replay(trace_dir, run.run_id), client.messages.with_streaming_response.create(**args) as again:
            assert again.read() == raw
    (event,) = spanreplay.load(trace_dir, run.run_id).events
    assert event.output["attempts"][0]["body"]["content"][0]["text"] == "Spaced out."

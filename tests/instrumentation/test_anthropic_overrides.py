"""A model call's override, streamed or not, comes back from the SDK as the message it describes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, serve
from spanreplay.instrumentation.anthropic._overrides import model_output

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

USER = [{"role": "user", "content": "Where is my order A-17?"}]
_TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)
_SCALAR = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT
_BLOCKS = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _TEXT),
    st.builds(
        lambda n, i, args: {"type": "tool_use", "id": f"toolu_{i:04d}", "name": n, "input": args},
        st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
        st.integers(0, 9999),
        st.dictionaries(
            st.from_regex(r"[a-z]{1,6}", fullmatch=True), _SCALAR | st.lists(_SCALAR, max_size=3), max_size=4
        ),
    ),
    st.builds(
        lambda t, s: {"type": "thinking", "thinking": t, "signature": s},
        _TEXT,
        st.from_regex(r"[A-Za-z0-9+/]{0,24}", fullmatch=True),
    ),
)


@pytest.fixture
def streamed_run(server: MessagesAPIServer, trace_dir: Path, instrumented: None) -> tuple[Path, str, str]:
    """One recorded streaming call; the server is stopped, so a replay that sent anything would fail."""
    with (
        anthropic.Anthropic(base_url=server.url, api_key="test-key") as client,
        spanreplay.record() as run,
        client.messages.stream(model=MODEL, max_tokens=256, messages=USER) as stream,
    ):
        stream.get_final_message()
    server.stop()
    return trace_dir, run.run_id, server.url


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(blocks=st.lists(_BLOCKS, min_size=1, max_size=4))
def test_a_streamed_override_comes_back_as_the_same_message(
    streamed_run: tuple[Path, str, str], blocks: list[dict[str, Any]]
) -> None:
    trace_dir, run_id, url = streamed_run
    with (
        anthropic.Anthropic(base_url=url, api_key="test-key") as client,
        spanreplay.replay(trace_dir, run_id, overrides={1: {"content": blocks}}) as run,
        client.messages.stream(model=MODEL, max_tokens=256, messages=USER) as stream,
    ):
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert run.outcome == "completed"
    assert [block.model_dump(mode="json", exclude_none=True) for block in final.content] == blocks
    assert text == "".join(b["text"] for b in blocks if b["type"] == "text")
    assert final.stop_reason == ("tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn")
    assert final.model == MODEL


def test_a_recorded_exchange_is_taken_as_it_is() -> None:
    exchange = {"attempts": [{"status": 529, "headers": {}, "body": {"type": "error"}}]}
    assert model_output(exchange, {"endpoint": "messages", "body": {}}, MODEL, "here") is exchange


def test_a_token_count_override_is_the_count() -> None:
    output = model_output(17, {"endpoint": "count_tokens", "body": {}}, MODEL, "here")
    assert output["attempts"][0]["body"] == {"input_tokens": 17}
    assert json.loads(json.dumps(output)) == output

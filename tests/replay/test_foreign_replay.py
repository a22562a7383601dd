"""Replaying traces OpenInference and OpenLLMetry recorded, with spanreplay's Anthropic instrumentation.

Each Messages call is served from the recorded span, with nothing listening
on the API's address; the tools, which the traces do not hold, run for real.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest

import spanreplay
from helpers.foreign_fixtures import ANSWER, FILES, FOREIGN, TOOLS_RUN, trace_id
from helpers.messages_api_server import instrument

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "helpers"))
import foreign_agent

instrumented = pytest.fixture(instrument, name="instrumented")
# Nothing listens on port 9: a call that reached the network would fail loudly.
OFFLINE = "http://127.0.0.1:9"


@pytest.fixture(name="client")
def offline_client() -> Iterator[anthropic.Anthropic]:
    foreign_agent.TOOL_LOG.clear()
    with anthropic.Anthropic(base_url=OFFLINE, api_key="offline", max_retries=0) as client:
        yield client


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("name", sorted(FILES))
def test_the_agent_gives_the_recorded_answer_with_the_api_unreachable(
    instrumented: None, client: anthropic.Anthropic, name: str, stream: bool
) -> None:
    # A trace recorded from create() replays into stream() and back: the span holds the final message.
    path = FOREIGN / name
    with contextlib.ExitStack() as stack:
        if FILES[name] == "anthropic-sdk":
            # What the SDK's spans lack is said before the replay starts.
            stack.enter_context(pytest.warns(spanreplay.SpanReplayWarning, match="no tool definitions"))
        run = stack.enter_context(spanreplay.replay(path, trace_id(path)))
        answer = foreign_agent.answer(client, stream=stream)
    assert answer == ANSWER
    assert run.outcome == "completed"
    assert foreign_agent.TOOL_LOG == TOOLS_RUN  # not in the trace: they ran


def test_a_streamed_replay_yields_the_text_as_events(instrumented: None, client: anthropic.Anthropic) -> None:
    path = FOREIGN / "openllmetry-create.binpb"
    request = {
        "model": foreign_agent.MODEL,
        "max_tokens": 512,
        "system": foreign_agent.SYSTEM,
        "tools": foreign_agent.TOOLS,
        "messages": [{"role": "user", "content": foreign_agent.QUESTION}],
    }
    with (
        spanreplay.replay(path, trace_id(path), require_all_steps=False),
        client.messages.stream(**request) as events,
    ):
        kinds = [event.type for event in events]
        message = events.get_final_message()
    assert kinds[0] == "message_start"
    assert kinds[-1] == "message_stop"
    assert [b.type for b in message.content] == ["text", "tool_use", "tool_use"]
    assert message.content[1].input == {"order_id": "A-17"}
    assert message.usage.output_tokens == 48


def test_a_changed_request_diverges_with_a_diff_of_what_was_recorded(
    instrumented: None, client: anthropic.Anthropic
) -> None:
    path = FOREIGN / "openinference-create.binpb"
    with pytest.raises(spanreplay.InputChangedError) as caught, spanreplay.replay(path, trace_id(path)):
        foreign_agent.answer(client, "Where is my order B-2? I live in Spain.")
    message = str(caught.value)
    assert "B-2" in message
    assert "A-17" in message
    assert foreign_agent.TOOL_LOG == []  # nothing ran past the divergence

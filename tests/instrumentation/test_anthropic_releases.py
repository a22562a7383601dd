"""A trace recorded under one anthropic release replays under the installed one.

``tests/fixtures/releases/`` holds the same agent (``helpers/release_fixture.py``)
recorded under the oldest supported release and under a recent one. Each is
replayed here, with the network gone, under whatever anthropic is installed,
and what the agent sees (tool_use blocks, usage, stop reasons, stream events, a
recorded API error) is compared with the values written below, not with
another replay: a release that builds other objects from the same bytes fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

import spanreplay
from helpers.messages_api_server import MessagesAPIServer, instrument
from helpers.release_fixture import FIXTURES, agent, script

instrumented = pytest.fixture(instrument, name="instrumented")

RECORDED_UNDER = sorted(path.stem for path in FIXTURES.glob("run_anthropic_*.jsonl"))

RATE_LIMIT_BODY = {
    "type": "error",
    "error": {"type": "rate_limit_error", "message": "Number of requests has exceeded your rate limit"},
}
STREAMED_TEXT = "It arrives on Friday between nine and"
# The SDK words a status error itself, and its wording changed within 2.x: replay gives
# the error the message the agent saw when it was recorded, whichever release replays it.
RATE_LIMIT_WORDINGS = {
    f"Error code: 429 - {RATE_LIMIT_BODY!r}",
    "429 Number of requests has exceeded your rate limit (request_id: req_000004, path: /v1/messages, "
    "type: rate_limit_error)",
}


def block(value: Any) -> tuple[Any, ...]:
    if value.type == "tool_use":
        return (type(value).__name__, value.id, value.name, value.input)
    return (type(value).__name__, value.text)


def message(value: anthropic.types.Message) -> dict[str, Any]:
    """What an agent reads of a Message."""
    usage = value.usage
    return {
        "class": type(value).__name__,
        "id": value.id,
        "model": value.model,
        "stop_reason": value.stop_reason,
        "content": [block(b) for b in value.content],
        "usage": (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens,
        ),
        "request_id": value._request_id,
    }


def test_both_ends_of_the_range_have_a_fixture() -> None:
    assert "run_anthropic_2_0_0" in RECORDED_UNDER
    assert len(RECORDED_UNDER) >= 2, "record one under the newest release too (see the README beside them)"


@pytest.mark.parametrize("run_id", RECORDED_UNDER)
def test_a_trace_from_another_release_replays_the_same_objects(run_id: str, instrumented: None) -> None:
    # No server: a request that left the process would fail to connect.
    with (
        anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key="replay-key", max_retries=0) as client,
        spanreplay.replay(FIXTURES / f"{run_id}.jsonl", run_id) as replay,
    ):
        seen = agent(client)
    assert replay.outcome == "completed"

    assert message(seen["first"]) == {
        "class": "Message",
        "id": "msg_fixture_1",
        "model": "claude-sonnet-4-6",
        "stop_reason": "tool_use",
        "content": [
            ("TextBlock", "Let me look that up."),
            ("ToolUseBlock", "toolu_fixture_1", "get_order_status", {"order_id": "A-17"}),
        ],
        "usage": (310, 41, 120, 16),
        "request_id": "req_000001",
    }
    assert message(seen["second"]) == {
        "class": "Message",
        "id": "msg_fixture_2",
        "model": "claude-sonnet-4-6",
        "stop_reason": "end_turn",
        "content": [("TextBlock", "Order A-17 shipped yesterday.")],
        "usage": (402, 9, 0, 0),
        "request_id": "req_000002",
    }

    events = seen["events"]
    kinds = [type(event).__name__ for event in events]
    assert kinds[:2] == ["RawMessageStartEvent", "RawContentBlockStartEvent"]
    assert kinds[-3:] == ["RawContentBlockStopEvent", "RawMessageDeltaEvent", "RawMessageStopEvent"]
    assert set(kinds[2:-3]) == {"RawContentBlockDeltaEvent"}
    assert events[0].message.id == "msg_fixture_3"
    assert events[0].message.usage.input_tokens == 25
    assert "".join(event.delta.text for event in events[2:-3]) == STREAMED_TEXT
    assert events[-2].delta.stop_reason == "max_tokens"
    assert events[-2].usage.output_tokens == 12

    assert seen["error"][:4] == ("RateLimitError", 429, "req_000004", RATE_LIMIT_BODY)
    recorded_error = spanreplay.load(FIXTURES / f"{run_id}.jsonl", run_id).events[3].error
    assert recorded_error is not None
    assert seen["error"][4] == recorded_error.message
    assert seen["error"][4] in RATE_LIMIT_WORDINGS

    # And all of it what the installed release shows the agent live, from the same exchanges,
    # but the error's wording, which is the recording's.
    with MessagesAPIServer() as server, live_client(server.url) as client:
        server.script(*script())
        live = agent(client)
    live["error"] = (*live["error"][:4], recorded_error.message)
    assert summary(seen) == summary(live)


def live_client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="live-key", max_retries=0)


def summary(seen: dict[str, Any]) -> dict[str, Any]:
    """Everything the agent read, but the ids a live server gives anew (none here) and dates."""
    return {
        "first": seen["first"].to_dict(),
        "second": seen["second"].to_dict(),
        "request_ids": (seen["first"]._request_id, seen["second"]._request_id),
        "events": [(type(event).__name__, event.to_dict()) for event in seen["events"]],
        "error": seen["error"],
    }


def test_the_fixtures_hold_the_exchanges_the_agent_saw() -> None:
    # The fixtures themselves: one model call per step, the error recorded on the fourth.
    for run_id in RECORDED_UNDER:
        log = spanreplay.load(Path(FIXTURES / f"{run_id}.jsonl"), run_id)
        assert [(e.seq, e.kind) for e in log.events] == [(n, "model") for n in range(1, 5)]
        error = log.events[3].error
        assert error is not None
        assert error.type_name == "RateLimitError"

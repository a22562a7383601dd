"""What-if edits: ``replay(..., overrides={seq or call id: value})`` serves the value in place of the recording."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.types import Message, TextBlock, Usage
from hypothesis import given, settings
from hypothesis import strategies as st

import spanreplay
from helpers.demo_runs import TRACKED, demo_sdk_restored, final_message, record_demo
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, serve
from spanreplay import _demo
from spanreplay.replaying.overrides import overrides_from_file

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

NEXT_MODEL_CALL = f"model:{_demo.MODEL}#2"  # the third model call: the failed run never made it


@pytest.fixture(autouse=True)
def sdk_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from demo_sdk_restored(monkeypatch)


# --- the demo's failed run -------------------------------------------------------------------


def test_overrides_turn_the_demos_failed_run_into_a_completed_replay_with_zero_real_tool_calls(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = record_demo(monkeypatch, failure_rate=1.0)
    log = spanreplay.load(trace_dir, run_id)
    assert log.run.status == "error"
    failed = [e for e in log if e.error is not None]
    assert [(e.seq, e.key) for e in failed] == [(6, "track_shipment")]
    answer = "Order A-17 was scanned at Lyon hub and arrives in 2 days."

    streamed = io.StringIO()
    with spanreplay.replay(trace_dir, run_id, overrides={6: TRACKED, NEXT_MODEL_CALL: final_message(answer)}) as run:
        result = asyncio.run(_demo.main(streamed))
    assert run.outcome == "completed"
    assert result == answer
    # The streamed reply was built by the SDK from the override, chunk by chunk, as from the API.
    assert streamed.getvalue().endswith(answer + "\n")
    assert not _demo.real_calls


def test_without_the_next_model_call_the_edited_run_diverges_where_the_recording_ends(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = record_demo(monkeypatch, failure_rate=1.0)
    run = spanreplay.replay(trace_dir, run_id, overrides={6: TRACKED})
    with pytest.raises(spanreplay.UnexpectedCallError) as caught, run:
        asyncio.run(_demo.main())
    assert run.outcome == "diverged"
    assert caught.value.call_id == NEXT_MODEL_CALL
    assert not _demo.real_calls


def test_an_exception_instance_is_raised_in_place_of_the_recorded_output(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_id = record_demo(monkeypatch, failure_rate=0.0)
    timeout = _demo.CarrierTimeout("what if the carrier had timed out?")
    run = spanreplay.replay(trace_dir, run_id, overrides={"branch:track_shipment#0/tool:track_shipment#0": timeout})
    with pytest.raises(_demo.CarrierTimeout) as caught, run:
        asyncio.run(_demo.main())
    assert caught.value is timeout
    # The recorded run completed; the edit made it fail, and no OutcomeChangedError hides that.
    assert run.outcome == "failed"
    assert not _demo.real_calls


def test_a_model_call_can_be_made_to_raise_an_sdk_error(trace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = record_demo(monkeypatch, failure_rate=0.0)
    overloaded = anthropic.APIConnectionError(request=_request())
    run = spanreplay.replay(trace_dir, run_id, overrides={2: overloaded})
    with pytest.raises(anthropic.APIConnectionError) as caught, run:
        asyncio.run(_demo.main())
    assert caught.value is overloaded
    assert not _demo.real_calls


def _request() -> Any:
    import httpx2

    return httpx2.Request("POST", "http://127.0.0.1:9/v1/messages")


# --- model calls: the response as the Messages API returns it ---------------------------------


def _record_one_call(server: MessagesAPIServer, trace_dir: Path) -> str:
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client, spanreplay.record() as run:
        client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hello"}])
    server.stop()
    return run.run_id


def _sdk_message(text: str) -> Message:
    return Message(
        id="msg_edit",
        type="message",
        role="assistant",
        model=MODEL,
        content=[TextBlock(type="text", text=text)],
        stop_reason="end_turn",
        stop_sequence=None,
        usage=Usage(input_tokens=3, output_tokens=4),
    )


@pytest.mark.parametrize(
    "override",
    [
        pytest.param({"content": [{"type": "text", "text": "Edited."}]}, id="dict"),
        pytest.param(_sdk_message("Edited."), id="sdk-message"),
        pytest.param("Edited.", id="text"),
    ],
)
def test_a_model_override_comes_back_as_the_sdks_own_message(
    server: MessagesAPIServer, trace_dir: Path, instrumented: None, override: Any
) -> None:
    run_id = _record_one_call(server, trace_dir)
    with (
        anthropic.Anthropic(base_url=server.url, api_key="test-key") as client,
        spanreplay.replay(trace_dir, run_id, overrides={1: override}) as run,
    ):
        reply = client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hello"}])
    assert isinstance(reply, Message)
    assert isinstance(reply.content[0], TextBlock)
    assert reply.content[0].text == "Edited."
    assert reply.model == MODEL
    assert reply.stop_reason == "end_turn"
    assert run.outcome == "completed"
    assert len(server.message_requests) == 1  # the recording's own; the replay sent nothing


def test_a_model_override_must_hold_content(server: MessagesAPIServer, trace_dir: Path, instrumented: None) -> None:
    run_id = _record_one_call(server, trace_dir)
    with (
        anthropic.Anthropic(base_url=server.url, api_key="test-key") as client,
        pytest.raises(spanreplay.ConfigurationError, match="no usable content"),
        spanreplay.replay(trace_dir, run_id, overrides={1: {"content": 42}}),
    ):
        client.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hello"}])


# --- tools: inputs still compared, values served with their types -------------------------------


@dataclasses.dataclass
class Order:
    id: str
    status: str


class Opaque:
    """Not JSON data: served as the object it is."""


@spanreplay.tool
def find_order(order_id: str) -> Order:
    return Order(order_id, "shipped")


@spanreplay.tool
def notify(status: str) -> str:
    return f"told the customer: {status}"


@spanreplay.tool
def handle() -> Any:
    return {"handled": True}


def _agent(order_id: str = "A-17") -> str:
    order = find_order(order_id)
    return notify(order.status)


def _record_agent(trace_dir: Path) -> str:
    with spanreplay.record() as run:
        _agent()
    return run.run_id


def test_a_dict_override_of_a_typed_tool_comes_back_as_its_type(trace_dir: Path) -> None:
    run_id = _record_agent(trace_dir)
    run = spanreplay.replay(trace_dir, run_id, overrides={1: {"id": "A-17", "status": "lost"}})
    served: list[Any] = []

    def edited_agent() -> None:
        order = find_order("A-17")
        served.append(order)
        # The edited status reaches the next call's input: it no longer matches the recording.
        notify(order.status)

    with pytest.raises(spanreplay.InputChangedError) as caught, run:
        edited_agent()
    assert isinstance(served[0], Order)
    assert served[0].status == "lost"
    assert caught.value.seq == 2
    assert '"lost"' in caught.value.diff
    assert run.outcome == "diverged"


def test_an_override_of_the_same_status_replays_to_completion(trace_dir: Path) -> None:
    run_id = _record_agent(trace_dir)
    given = Order("A-17", "shipped")
    with spanreplay.replay(trace_dir, run_id, overrides={"tool:find_order#0": given}) as run:
        assert _agent() == "told the customer: shipped"
    assert run.outcome == "completed"


def test_a_value_that_is_not_json_data_is_served_as_given(trace_dir: Path) -> None:
    with spanreplay.record() as recorded:
        handle()
    given = Opaque()
    with spanreplay.replay(trace_dir, recorded.run_id, overrides={1: given}) as run:
        assert handle() is given
    assert run.outcome == "completed"


def test_an_overridden_step_still_compares_its_input(trace_dir: Path) -> None:
    run_id = _record_agent(trace_dir)
    with (
        pytest.raises(spanreplay.InputChangedError) as caught,
        spanreplay.replay(trace_dir, run_id, overrides={1: {"id": "B-2", "status": "lost"}}),
    ):
        _agent("B-2")
    assert caught.value.seq == 1


def test_an_added_call_that_is_never_made_is_named_in_a_warning(trace_dir: Path) -> None:
    run_id = _record_agent(trace_dir)
    with (
        pytest.warns(spanreplay.SpanReplayWarning, match=r"tool:notify#1"),
        spanreplay.replay(trace_dir, run_id, overrides={"tool:notify#1": "never asked"}) as run,
    ):
        _agent()
    assert run.outcome == "completed"


# --- bad overrides: refused up front, with the fix -----------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({9: "x"}, r"has no step at seq 9 .*its steps are seq 1 to 2"),
        ({"find_order": "x"}, r"not a call id \(kind:key#n"),
        ({True: "x"}, r"neither a seq"),
        ({1: TimeoutError}, r"exception class TimeoutError; give an instance"),
        ({1: "x", "tool:find_order#0": "y"}, r"name the step tool:find_order#0 twice"),
    ],
)
def test_bad_overrides_are_refused_with_the_fix(trace_dir: Path, overrides: dict[Any, Any], message: str) -> None:
    run_id = _record_agent(trace_dir)
    with pytest.raises(spanreplay.ConfigurationError, match=message):
        spanreplay.replay(trace_dir, run_id, overrides=overrides)


def test_a_step_nested_in_another_cannot_be_overridden(trace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = record_demo(monkeypatch, failure_rate=1.0)
    with pytest.raises(
        spanreplay.ConfigurationError, match=r"ran inside seq 6 \(tool 'track_shipment'\).*Override seq 6"
    ):
        spanreplay.replay(trace_dir, run_id, overrides={7: 0.99})


# --- the overrides file of zero-code mode (SPANREPLAY_OVERRIDES) ------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200, deadline=None)
@given(document=_JSON | st.builds(lambda s, r: {"set": s, "raise": r}, _JSON, _JSON))
def test_an_overrides_file_is_read_or_refused_with_a_sentence(tmp_path_factory: Any, document: Any) -> None:
    path = tmp_path_factory.mktemp("overrides") / "overrides.json"
    path.write_text(json.dumps(document))
    refused = ""
    overrides: dict[Any, Any] = {}
    try:
        overrides = overrides_from_file(path)
    except spanreplay.ConfigurationError as exc:
        refused = str(exc)
    if refused:
        assert refused.endswith(".")  # a sentence with the fix, not a traceback from deep inside
        return
    assert isinstance(overrides, dict)
    for key, value in overrides.items():
        assert isinstance(key, (int, str))
        if key in document.get("raise", {}) or str(key) in document.get("raise", {}):
            assert isinstance(value, BaseException)


def test_an_overrides_file_sets_and_raises(tmp_path: Path) -> None:
    path = tmp_path / "overrides.json"
    path.write_text(json.dumps({"set": {"6": {"ok": True}, "tool:x#0": 1}, "raise": {"7": "TimeoutError:slow"}}))
    overrides = overrides_from_file(path)
    assert overrides[6] == {"ok": True}
    assert overrides["tool:x#0"] == 1
    assert isinstance(overrides[7], TimeoutError)
    assert str(overrides[7]) == "slow"

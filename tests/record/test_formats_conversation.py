"""Inputs that repeat the previous call's messages are stored as a reference plus the new messages.

A conversation sends its whole history on every model call; written whole, a
run's trace grows with the square of its turns. These tests pin down that the
trace grows linearly, that loading rebuilds and verifies every full input, that
replay compares the full input, and that the switch turns it off.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import spanreplay
from fixtures.recordings import lines
from spanreplay import InputChangedError, PayloadIntegrityError, SpanReplayWarning, TraceFormatError
from spanreplay.model.input_refs import InputHistory
from spanreplay.readers import iter_spans

TURNS = 50


def converse(turns: int = TURNS, *, nested: bool = False, edit_at: int | None = None) -> list[Any]:
    """An agent loop: each model call sends the whole conversation, then appends the answer and a reply."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Plan a trip to Oslo, step by step."}]
    answers = []
    for turn in range(turns):
        if edit_at == turn:
            messages[0] = {"role": "user", "content": "Plan a trip to Bergen instead."}
        request = {"model": "claude-x", "max_tokens": 512, "messages": list(messages)}
        value = {"body": request, "options": {"timeout": 30}} if nested else request
        answer = spanreplay.boundary(
            "model", "claude-x", value, lambda turn=turn: {"content": f"Step {turn}: " + "details " * 40}
        )
        answers.append(answer)
        messages.append({"role": "assistant", "content": answer["content"]})
        messages.append({"role": "user", "content": f"Thanks, and then after step {turn}?"})
    return answers


def record(run_id: str, **kwargs: Any) -> None:
    with spanreplay.record(agent="planner", run_id=run_id):
        converse(**kwargs)


def input_attributes(path: Path) -> list[dict[str, Any]]:
    """The attributes of each model span of the file, in seq order."""
    spans = [s for s in iter_spans(path) if s.attributes.get("spanreplay.kind") == "model" and s.ended]
    return [s.attributes for s in sorted(spans, key=lambda s: s.attributes["spanreplay.seq"])]


def test_each_call_stores_only_its_new_messages_and_the_loader_rebuilds_the_whole_input(trace_dir: Path) -> None:
    record("run_conv")
    attributes = input_attributes(trace_dir / "run_conv.jsonl")
    assert "spanreplay.input.base_seq" not in attributes[0]
    for seq, attrs in enumerate(attributes[1:], start=2):
        assert attrs["spanreplay.input.base_seq"] == seq - 1
        assert attrs["spanreplay.input.base_messages"] == 2 * seq - 3
        assert attrs["spanreplay.schema_version"] == 3  # a release reading only version 1 refuses it
        stored = orjson.loads(attrs["spanreplay.input"])
        assert [m["role"] for m in stored["messages"]] == ["assistant", "user"]
    log = spanreplay.load(trace_dir, "run_conv")
    last = log.events[-1]
    assert len(last.input["messages"]) == 2 * TURNS - 1
    assert last.input["messages"][0]["content"] == "Plan a trip to Oslo, step by step."
    assert last.input["max_tokens"] == 512
    assert "spanreplay.input.base_seq" not in last.attributes


def test_the_trace_grows_linearly_with_the_turns(trace_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record("run_refs")
    monkeypatch.setenv("SPANREPLAY_INPUT_REFS", "0")
    record("run_whole")
    refs, whole = (trace_dir / "run_refs.jsonl").stat().st_size, (trace_dir / "run_whole.jsonl").stat().st_size
    stored_refs = sum(a["spanreplay.input.size"] for a in input_attributes(trace_dir / "run_refs.jsonl"))
    stored_whole = sum(a["spanreplay.input.size"] for a in input_attributes(trace_dir / "run_whole.jsonl"))
    assert stored_refs * 15 < stored_whole  # 50 turns: whole inputs hold each message ~25 times over
    assert refs * 3 < whole  # the file, outputs and span metadata included
    assert all("spanreplay.input.base_seq" not in a for a in input_attributes(trace_dir / "run_whole.jsonl"))
    # Both load to the same inputs.
    by_refs, by_whole = spanreplay.load(trace_dir, "run_refs"), spanreplay.load(trace_dir, "run_whole")
    assert [e.input_json for e in by_refs] == [e.input_json for e in by_whole]


def test_doubling_the_turns_about_doubles_the_bytes(trace_dir: Path) -> None:
    record("run_10", turns=10)
    record("run_20", turns=20)
    small, large = (trace_dir / "run_10.jsonl").stat().st_size, (trace_dir / "run_20.jsonl").stat().st_size
    assert 1.7 < large / small < 2.4


def test_replay_compares_the_full_rebuilt_input(trace_dir: Path) -> None:
    record("run_conv", turns=6)
    with spanreplay.replay(trace_dir, "run_conv") as run:
        converse(6)
    assert run.outcome == "completed"
    with pytest.raises(InputChangedError) as info, spanreplay.replay(trace_dir, "run_conv"):
        converse(6, edit_at=4)
    assert info.value.seq == 5
    assert "Bergen" in info.value.diff


def test_a_changed_conversation_is_written_whole_and_starts_a_new_base(trace_dir: Path) -> None:
    record("run_edit", turns=6, edit_at=3)
    attributes = input_attributes(trace_dir / "run_edit.jsonl")
    assert [a.get("spanreplay.input.base_seq") for a in attributes] == [None, 1, 2, None, 4, 5]
    assert spanreplay.load(trace_dir, "run_edit").events[3].input["messages"][0]["content"].endswith("Bergen instead.")


def test_messages_in_a_request_body_are_referenced_too(trace_dir: Path) -> None:
    record("run_body", turns=4, nested=True)
    attributes = input_attributes(trace_dir / "run_body.jsonl")
    assert attributes[3]["spanreplay.input.messages_path"] == "body.messages"
    log = spanreplay.load(trace_dir, "run_body")
    assert log.events[3].input["options"] == {"timeout": 30}
    assert len(log.events[3].input["body"]["messages"]) == 7


def test_a_missing_base_input_is_named_with_the_switch(trace_dir: Path) -> None:
    # A run that crashed while its seq 2 was still running: seq 3 continues an input never written.
    record("run_conv", turns=4)
    path = trace_dir / "run_conv.jsonl"
    gone = (b'"spanreplay.seq","value":{"intValue":"2"}', b'"spanreplay.run.status","value":{"stringValue":"ok"}')
    path.write_bytes(b"".join(raw for raw in lines(path) if not any(g in raw for g in gone)))
    with (
        pytest.warns(SpanReplayWarning, match="crashed"),
        pytest.raises(TraceFormatError, match=r"seq 3: the input continues the messages of seq 2, which the source"),
    ):
        spanreplay.load(path, "run_conv")


def test_a_rebuilt_input_that_does_not_match_its_digest_is_refused(trace_dir: Path) -> None:
    record("run_conv", turns=4)
    path = trace_dir / "run_conv.jsonl"
    # The first input is edited consistently (its own length and digest still match): the
    # inputs built on it no longer match theirs.
    original = lines(path)
    text = b"".join(original)
    first = next(raw for raw in original if b'"spanreplay.seq","value":{"intValue":"1"}' in raw)
    doc = orjson.loads(first)
    span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    attrs = {a["key"]: a for a in span["attributes"]}
    edited = attrs["spanreplay.input"]["value"]["stringValue"].replace("Oslo", "Rome")
    attrs["spanreplay.input"]["value"]["stringValue"] = edited
    attrs["spanreplay.input.sha256"]["value"]["stringValue"] = hashlib.sha256(edited.encode()).hexdigest()
    path.write_bytes(text.replace(first, orjson.dumps(doc) + b"\n"))
    with pytest.raises(PayloadIntegrityError, match=r"seq 2: the input rebuilt from seq 1's messages does not match"):
        spanreplay.load(path, "run_conv")


# Messages whose JSON texts are prefixes of one another: "ab" and "abc", 1 and 12, a
# dict and the same dict with one more key. Drawn from a few values, so that a later
# input often does continue the earlier one.
_MESSAGE = st.sampled_from(
    ["ab", "abc", 1, 12, {"role": "user", "content": "ab"}, {"role": "user", "content": "ab", "x": 1}, [1], [1, 2]]
)


@given(first=st.lists(_MESSAGE, min_size=1, max_size=5), second=st.lists(_MESSAGE, min_size=1, max_size=7))
@example(first=[1], second=[12])  # the text of the one is the start of the other's
@example(first=["ab", 1], second=["ab", 12, "abc"])
@example(first=["ab", 1], second=["ab", 1, "abc"])
def test_an_input_references_the_last_one_exactly_when_its_messages_continue_them(
    first: list[Any], second: list[Any]
) -> None:
    history = InputHistory(enabled=True)
    history.add_input({}, "model", "m", 1, {"messages": first})
    attributes: dict[str, Any] = {}
    history.add_input(attributes, "model", "m", 2, {"messages": second})
    continues = len(second) >= len(first) and second[: len(first)] == first
    assert (attributes.get("spanreplay.input.base_seq") == 1) is continues
    if continues:
        assert attributes["spanreplay.input.base_messages"] == len(first)
        assert orjson.loads(attributes["spanreplay.input"]) == {"messages": second[len(first) :]}
    else:
        assert orjson.loads(attributes["spanreplay.input"]) == {"messages": second}


def raw_events(path: Path) -> list[Any]:
    """The run's model events as the spans hold them (inputs not rebuilt), in seq order."""
    from spanreplay.model.codec import is_boundary_span, span_to_event

    events = [span_to_event(s) for s in iter_spans(path) if is_boundary_span(s) and s.ended]
    return sorted(events, key=lambda e: e.seq)


def test_a_rebuilder_that_keeps_few_bases_reads_an_older_one_again(trace_dir: Path) -> None:
    from spanreplay.model.input_refs import InputRebuilder, rebuild_inputs

    record("run_stream", turns=12)
    events = raw_events(trace_dir / "run_stream.jsonl")
    assert sum("spanreplay.input.base_seq" in e.attributes for e in events) == 11
    whole = rebuild_inputs(events)
    # Fed in seq order, keeping one base per key: each reference finds its base held.
    fetched: list[int] = []
    by_seq = {e.seq: e for e in events}

    def fetch(seq: int) -> Any:
        fetched.append(seq)
        return by_seq.get(seq)

    kept_one = InputRebuilder(keep=1, fetch=fetch)
    assert [kept_one.rebuild(e) for e in events] == whole
    assert fetched == []
    # The last call on its own: its base, and that one's base, are read again, back to the first.
    assert InputRebuilder(keep=1, fetch=fetch).rebuild(events[-1]) == whole[-1]
    assert fetched == list(range(events[-1].seq - 1, 0, -1))
    # A base the source does not hold fails as load() fails.
    with pytest.raises(TraceFormatError, match="which the source does not hold"):
        InputRebuilder(keep=1, fetch=lambda seq: None).rebuild(events[-1])


def test_show_streams_a_conversation_with_its_inputs_whole(trace_dir: Path) -> None:
    from click.testing import CliRunner

    from spanreplay.cli import cli

    record("run_shown", turns=15)
    path = trace_dir / "run_shown.jsonl"
    result = CliRunner().invoke(cli, ["show", str(path), "run_shown", "--json"])
    assert result.exit_code == 0, result.output
    shown = [step["input"] for step in orjson.loads(result.stdout)["steps"]]
    assert shown == [event.input for event in spanreplay.load(path, "run_shown")]
    assert len(shown[-1]["messages"]) == 29

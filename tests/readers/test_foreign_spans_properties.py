"""Foreign spans with any attribute values: read, or left out, never a crash.

Another instrumentation's attributes are untrusted input: a backend may cut
them, an older release may write other shapes, and a hand-made span anything.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from spanreplay.model.spans import SpanRecord
from spanreplay.sources.foreign import foreign_log, read_span

TRACE = "0af7651916cd43dd8448eb211c80319c"
json_values = st.recursive(
    # OTLP integers are 64-bit; JSON text may hold any.
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["type", "role", "parts", "content", "text", "id", "name", "arguments", "response"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)
# An attribute value: a scalar, or JSON text of any shape (as the conventions write them).
attribute_values = json_values.map(lambda v: v if not isinstance(v, (list, dict)) else json.dumps(v)) | json_values.map(
    json.dumps
)
names = st.sampled_from(
    [
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.definitions",
        "gen_ai.request.model",
        "gen_ai.request.max_tokens",
        "gen_ai.response.finish_reasons",
        "gen_ai.usage.input_tokens",
        "gen_ai.prompt.0.role",
        "gen_ai.prompt.0.content",
        "gen_ai.completion.0.content",
        "gen_ai.completion.0.tool_calls.0.arguments",
        "gen_ai.completion.0.tool_calls.0.name",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "input.value",
        "input.mime_type",
        "output.value",
        "output.mime_type",
        "llm.input_messages.0.message.role",
        "llm.input_messages.0.message.content",
        "llm.input_messages.1.message.contents.0.message_content.type",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
        "llm.output_messages.0.message.contents.0.message_content.type",
        "llm.tools.0.tool.json_schema",
        "llm.invocation_parameters",
        "llm.token_count.prompt",
    ]
)
kinds: list[dict[str, Any]] = [
    {"gen_ai.operation.name": "chat"},
    {"gen_ai.operation.name": "execute_tool"},
    {"openinference.span.kind": "LLM", "input.mime_type": "application/json", "output.mime_type": "application/json"},
    {"openinference.span.kind": "TOOL"},
]


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(kinds), extra=st.dictionaries(names, attribute_values, max_size=8))
def test_any_attribute_values_read_or_are_left_out(kind: dict[str, Any], extra: dict[str, Any]) -> None:
    span = SpanRecord(trace_id=TRACE, span_id="00f067aa0ba902b7", name="chat", attributes={**extra, **kind})
    call = read_span(span)
    assert call is not None
    log = foreign_log(TRACE, [span])
    assert log is not None
    assert len(log) <= 1
    for event in log:
        assert event.kind == call.kind
        if event.kind == "model":
            # The input holds only the compared fields; a call it cannot serve says why up front.
            assert set(event.input) == {"endpoint", "body"}
            assert set(event.input["body"]) <= set(log.run.compared)
            if not event.output["attempts"]:
                assert any("no recorded response" in gap for gap in log.run.gaps)
        else:
            assert event.output_json is not None  # a tool span without its result is no step
    if call.kind == "tool" and not call.has_output:
        assert len(log) == 0
        assert log.run.gaps == (f"tool {call.name}: no recorded result, will run live",)

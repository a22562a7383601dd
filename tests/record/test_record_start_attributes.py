"""The attributes a boundary span starts with: the same keys, order and values on every call.

Each run keeps, per kind and key, the attributes every call of it starts with and
copies them per call; these tests hold each call's span, call after call, to the
attributes written out below by hand, including extra attributes that name the same keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from spanreplay import semconv as sc

# Stand-ins for what each call fills in, and the attributes every call of key "k" starts with.
RUN, SEQ, CALL = object(), object(), object()
R, S, C = ("spanreplay.run.id", RUN), ("spanreplay.seq", SEQ), ("spanreplay.call_id", CALL)
K, V, T = ("spanreplay.key", "k"), ("spanreplay.schema_version", 3), ("app.tenant", "acme")
TOOL, MODEL, FETCH = ("spanreplay.kind", "tool"), ("spanreplay.kind", "model"), ("spanreplay.kind", "fetch")
EXECUTE, TOOL_NAME = ("gen_ai.operation.name", "execute_tool"), ("gen_ai.tool.name", "k")

# The names of the extra attributes each test passes (below), in the order it passes them.
PLAIN, TENANT = (), ("app.tenant",)
FORGED = ("spanreplay.seq", "app.tenant", "spanreplay.call_id", "gen_ai.operation.name")

# Written out by hand, per kind of boundary and extra attributes.
EXPECTED: dict[tuple[str, tuple[str, ...]], list[tuple[str, Any]]] = {
    ("tool", PLAIN): [R, S, C, TOOL, K, V, EXECUTE, TOOL_NAME],
    ("model", PLAIN): [R, S, C, MODEL, K, V],
    ("fetch", PLAIN): [R, S, C, FETCH, K, V],
    ("tool", TENANT): [T, R, S, C, TOOL, K, V, EXECUTE, TOOL_NAME],
    ("model", TENANT): [T, R, S, C, MODEL, K, V],
    ("fetch", TENANT): [T, R, S, C, FETCH, K, V],
    ("tool", FORGED): [S, T, C, EXECUTE, R, TOOL, K, V, TOOL_NAME],
    # Not a tool: the operation name is not spanreplay's to set, so the caller's stays.
    ("model", FORGED): [S, T, C, ("gen_ai.operation.name", "other"), R, MODEL, K, V],
    ("fetch", FORGED): [S, T, C, ("gen_ai.operation.name", "other"), R, FETCH, K, V],
}
SPAN_NAMES = {"tool": "execute_tool k", "model": "chat k", "fetch": "fetch k"}


def _reference(
    run_id: str, seq: int, call_id: str, kind: str, key: str, extra: dict[str, Any]
) -> list[tuple[str, Any]]:
    """The start attributes (before the input payload) of one call of ``key`` "k", from the table above."""
    assert key == "k"
    filled = {RUN: run_id, SEQ: seq, CALL: call_id}
    return [(name, filled.get(value, value)) for name, value in EXPECTED[kind, tuple(extra)]]


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"app.tenant": "acme"},
        # Extra attributes that name spanreplay's own keys keep their place; the run's values win.
        {sc.SEQ: 99, "app.tenant": "acme", sc.CALL_ID: "forged", sc.GEN_AI_OPERATION_NAME: "other"},
    ],
)
@pytest.mark.parametrize("kind", [sc.KIND_TOOL, sc.KIND_MODEL, "fetch"])
def test_start_attributes_match_the_reference_on_every_call(
    trace_dir: Path, memory_exporter: InMemorySpanExporter, kind: str, extra: dict[str, Any]
) -> None:
    with spanreplay.record(agent="order") as run:
        for n in range(3):
            spanreplay.boundary(kind, "k", {"n": n}, lambda v=n: v, attributes=dict(extra))
            # Another key between two calls of the same one: each key keeps its own attributes.
            spanreplay.boundary(kind, "other", {"n": n}, lambda v=n: v)
    spans = [s for s in memory_exporter.get_finished_spans() if (s.attributes or {}).get(sc.KEY) == "k"]
    assert len(spans) == 3
    for n, span in enumerate(spans):
        attributes = dict(span.attributes or {})
        # Calls of "k" take the odd seqs (1, 3, 5) and count their own call ids from 0.
        expected = _reference(run.run_id, 2 * n + 1, f"{kind}:k#{n}", kind, "k", extra)
        assert list(attributes.items())[: len(expected)] == expected
        assert span.name == SPAN_NAMES[kind]


def test_extra_attributes_of_one_call_do_not_stay_for_the_next(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with spanreplay.record(agent="order"):
        spanreplay.boundary("tool", "k", {}, lambda: 1, attributes={"app.once": "yes"})
        spanreplay.boundary("tool", "k", {}, lambda: 2)
    first, second = (s for s in memory_exporter.get_finished_spans() if (s.attributes or {}).get(sc.KEY) == "k")
    assert (first.attributes or {}).get("app.once") == "yes"
    assert "app.once" not in (second.attributes or {})


def test_attributes_of_one_call_do_not_stay_for_the_next(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    # The first input is masked (its span names what was masked), the second is not.
    with spanreplay.record(agent="order"):
        spanreplay.boundary("tool", "k", {"email": "jane.doe@example.com"}, lambda: 1)
        spanreplay.boundary("tool", "k", {"n": 1}, lambda: 2)
    first, second = (s for s in memory_exporter.get_finished_spans() if (s.attributes or {}).get(sc.KEY) == "k")
    assert sc.INPUT + sc.MASKED_SUFFIX in (first.attributes or {})
    assert sc.INPUT + sc.MASKED_SUFFIX not in (second.attributes or {})

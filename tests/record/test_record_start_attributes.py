"""The attributes a boundary span starts with: the same keys, order and values on every call.

Each run keeps, per kind and key, the attributes every call of it starts with and
copies them per call; these tests hold the copies to the dict the record path has
always built, call after call, including extra attributes that name the same keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from spanreplay import _semconv as sc


def _reference(
    run_id: str, seq: int, call_id: str, kind: str, key: str, extra: dict[str, Any]
) -> list[tuple[str, Any]]:
    """The start attributes (before the input payload) as the record path wrote them before the cache."""
    attributes: dict[str, Any] = {
        **extra,
        sc.RUN_ID: run_id,
        sc.SEQ: seq,
        sc.CALL_ID: call_id,
        sc.KIND: kind,
        sc.KEY: key,
        sc.SCHEMA: sc.SCHEMA_VERSION,
    }
    if kind == sc.KIND_TOOL:
        attributes[sc.GEN_AI_OPERATION_NAME] = sc.OPERATION_EXECUTE_TOOL
        attributes[sc.GEN_AI_TOOL_NAME] = key
    return list(attributes.items())


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
        expected = _reference(run.run_id, 2 * n + 1, f"{kind}:k#{n}", kind, "k", extra)
        assert list(attributes.items())[: len(expected)] == expected
        assert span.name == sc.boundary_span_name(kind, "k")


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

"""SpanRecord behaves as the frozen dataclass it replaced: equality, repr, immutability, fresh defaults."""

from __future__ import annotations

import pickle
from typing import Any

import msgspec
import pytest

from spanreplay.model.spans import SpanEventRecord, SpanRecord


def record(**changes: Any) -> SpanRecord:
    return SpanRecord(trace_id="0af7651916cd43dd8448eb211c80319c", span_id="b7ad6b7169203331", name="op", **changes)


def test_records_compare_by_value() -> None:
    assert record(attributes={"a": 1}) == record(attributes={"a": 1})
    assert record(attributes={"a": 1}) != record(attributes={"a": 2})
    assert record(events=(SpanEventRecord("e", 1),)) != record()
    assert record() != ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")


def test_a_record_cannot_be_changed_but_can_be_copied_with_changes() -> None:
    span = record()
    with pytest.raises(AttributeError):
        span.name = "other"  # type: ignore[misc]
    assert msgspec.structs.replace(span, origin="f:1") == record(origin="f:1")
    assert pickle.loads(pickle.dumps(span)) == span


def test_each_record_gets_its_own_empty_attributes() -> None:
    first, second = record(), record()
    first.attributes["a"] = 1
    assert second.attributes == {}
    assert second.resource is not first.resource


def test_the_repr_names_every_field_in_order() -> None:
    shown = repr(record(kind=2))
    assert shown.startswith("SpanRecord(trace_id='0af7651916cd43dd8448eb211c80319c', span_id='b7ad6b7169203331', ")
    assert "kind=2" in shown
    assert shown.endswith("origin='')")

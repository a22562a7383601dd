"""State checkpoints: ``spanreplay.checkpoint(name, value)`` records the agent's own state, replay compares it.

A state that goes wrong between two boundaries is caught at the checkpoint
(StateChangedError, a ReplayDivergenceError), not at the next boundary whose
input it changes, nor never when it changes none.
"""

from __future__ import annotations

import contextlib
import dataclasses
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay

EMAIL = "ann.lee@example.com"


@spanreplay.tool
def lookup(order: str) -> dict[str, Any]:
    return {"order": order, "items": [{"sku": "kettle", "price": 30}, {"sku": "mug", "price": 8}]}


@spanreplay.tool
def notify(order: str, total: int) -> str:
    return f"told {order}: {total}"


def agent(discount: int = 0, tell_total: bool = True) -> str:
    """Totals an order between two tools; ``discount`` is the bug a replay should find."""
    found = lookup("A-17")
    total = sum(item["price"] for item in found["items"]) - discount
    spanreplay.checkpoint("cart", {"order": found["order"], "total": total, "customer": EMAIL})
    # With tell_total off the next boundary does not see the total: only the checkpoint can.
    return notify(found["order"], total if tell_total else 0)


def _record(fn: Any = agent, **kwargs: Any) -> str:
    with spanreplay.record(agent="cart") as run:
        fn(**kwargs)
    return run.run_id


def test_a_checkpoint_is_a_state_update_step_whose_output_is_the_masked_value(trace_dir: Path) -> None:
    run_id = _record()
    log = spanreplay.load(trace_dir, run_id)
    assert [(e.seq, e.kind, e.key) for e in log] == [
        (1, "tool", "lookup"),
        (2, "state_update", "cart"),
        (3, "tool", "notify"),
    ]
    state = log.by_seq(2)
    assert state is not None
    assert state.call_id == "state_update:cart#0"
    assert state.input is None
    assert state.output["order"] == "A-17"
    assert state.output["total"] == 38
    assert state.output["customer"] != EMAIL  # masked, like a boundary's output
    assert EMAIL.encode() not in (trace_dir / f"{run_id}.jsonl").read_bytes()


def test_replaying_the_same_state_completes(trace_dir: Path) -> None:
    run_id = _record()
    with spanreplay.replay(trace_dir, run_id) as run:
        assert agent() == "told A-17: 38"
    assert run.outcome == "completed"


def test_a_changed_state_raises_at_the_checkpoint_not_at_the_next_boundary(trace_dir: Path) -> None:
    run_id = _record()
    with pytest.raises(spanreplay.StateChangedError) as caught, spanreplay.replay(trace_dir, run_id) as run:
        agent(discount=5)
    assert run.outcome == "diverged"
    error = caught.value
    assert isinstance(error, spanreplay.ReplayDivergenceError)
    assert (error.run_id, error.seq, error.call_id, error.name) == (run_id, 2, "state_update:cart#0", "cart")
    assert '-  "total": 38' in error.diff
    assert '+  "total": 33' in error.diff
    message = str(error)
    assert "checkpoint 'cart'" in message
    assert "seq 2" in message
    assert message.index("Recorded:") < message.index('"total":38') < message.index("Attempted:")
    assert EMAIL not in message  # both sides are shown masked


def test_without_the_checkpoint_a_changed_state_that_reaches_no_boundary_goes_unseen(trace_dir: Path) -> None:
    def unchecked(discount: int = 0) -> str:
        found = lookup("A-17")
        total = sum(item["price"] for item in found["items"]) - discount
        assert total > 0
        return notify(found["order"], 0)

    run_id = _record(unchecked)
    with spanreplay.replay(trace_dir, run_id) as run:
        unchecked(discount=5)
    assert run.outcome == "completed"  # what the checkpoint adds: the same change, caught
    run_id = _record(tell_total=False)
    with pytest.raises(spanreplay.StateChangedError), spanreplay.replay(trace_dir, run_id) as run:
        agent(discount=5, tell_total=False)
    assert run.outcome == "diverged"


def test_a_caught_state_change_still_ends_the_replay_as_diverged(trace_dir: Path) -> None:
    run_id = _record()

    def forgiving() -> str:
        found = lookup("A-17")
        with contextlib.suppress(spanreplay.StateChangedError):
            spanreplay.checkpoint("cart", {"order": found["order"], "total": 1, "customer": EMAIL})
        return notify(found["order"], 38)

    with pytest.raises(spanreplay.StateChangedError) as caught, spanreplay.replay(trace_dir, run_id) as run:
        forgiving()
    assert run.outcome == "diverged"
    assert caught.value.seq == 2
    assert any("caught this error" in note for note in caught.value.__notes__)


def test_checkpoints_of_one_name_are_compared_in_order(trace_dir: Path) -> None:
    def steps(values: list[int]) -> None:
        for value in values:
            spanreplay.checkpoint("step", value)

    run_id = _record(lambda: steps([1, 2, 3]))
    with spanreplay.replay(trace_dir, run_id) as run:
        steps([1, 2, 3])
    assert run.outcome == "completed"
    with pytest.raises(spanreplay.StateChangedError) as caught, spanreplay.replay(trace_dir, run_id):
        steps([1, 2, 4])
    assert (caught.value.seq, caught.value.call_id) == (3, "state_update:step#2")


@dataclasses.dataclass
class Plan:
    steps: list[str]
    due: datetime
    ref: uuid.UUID


def test_a_typed_state_is_compared_as_recorded(trace_dir: Path) -> None:
    due = datetime(2026, 5, 1, 12, tzinfo=UTC)
    ref = uuid.UUID(int=7)
    run_id = _record(lambda: spanreplay.checkpoint("plan", Plan(["pack", "ship"], due, ref)))
    with spanreplay.replay(trace_dir, run_id) as run:
        assert spanreplay.checkpoint("plan", Plan(["pack", "ship"], due, ref)) == Plan(["pack", "ship"], due, ref)
    assert run.outcome == "completed"
    with pytest.raises(spanreplay.StateChangedError, match="2026-05-02"), spanreplay.replay(trace_dir, run_id):
        spanreplay.checkpoint("plan", Plan(["pack", "ship"], due.replace(day=2), ref))


def test_a_recording_without_the_checkpoint_is_replayed_with_a_warning(trace_dir: Path) -> None:
    def before() -> str:
        return notify("A-17", 38)

    def after() -> str:
        spanreplay.checkpoint("cart", {"total": 38})
        spanreplay.checkpoint("cart", {"total": 38})
        return notify("A-17", 38)

    run_id = _record(before)
    with (
        pytest.warns(spanreplay.SpanReplayWarning, match="holds no checkpoint 'cart'") as warned,
        spanreplay.replay(trace_dir, run_id) as run,
    ):
        after()
    assert run.outcome == "completed"
    assert len(warned) == 1  # once per replay and name


def test_outside_a_run_a_checkpoint_returns_its_value_and_records_nothing(trace_dir: Path) -> None:
    value = {"a": [1, 2]}
    assert spanreplay.checkpoint("free", value) is value
    assert not trace_dir.exists()


def test_a_checkpoint_returns_the_current_value_in_both_modes(trace_dir: Path) -> None:
    value = {"n": 1}
    with spanreplay.record() as run:
        assert spanreplay.checkpoint("s", value) is value
    with spanreplay.replay(trace_dir, run.run_id):
        same = {"n": 1}
        assert spanreplay.checkpoint("s", same) is same


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(recorded=JSON, attempted=JSON)
def test_a_state_replays_when_it_is_equal_and_raises_when_it_is_not(
    tmp_path: Path, provider: TracerProvider, recorded: Any, attempted: Any
) -> None:
    # Masking off: a detector may fire on generated text, and two values that mask alike compare equal.
    spanreplay.configure(
        trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True, masking=False
    )
    with spanreplay.record() as run:
        spanreplay.checkpoint("state", recorded)
    with spanreplay.replay(tmp_path / "traces", run.run_id) as replaying:
        spanreplay.checkpoint("state", recorded)
    assert replaying.outcome == "completed"
    if orjson.dumps(attempted, option=orjson.OPT_SORT_KEYS) == orjson.dumps(recorded, option=orjson.OPT_SORT_KEYS):
        return  # equal as JSON (1 and 1.0 are not)
    with pytest.raises(spanreplay.StateChangedError), spanreplay.replay(tmp_path / "traces", run.run_id):
        spanreplay.checkpoint("state", attempted)


def test_a_checkpoint_is_a_state_update_row_in_postgres(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    monkeypatch.setenv("SPANREPLAY_POSTGRES_WAIT", "60")
    spanreplay.configure(
        trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn
    )
    run_id = _record()
    provider.force_flush()
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            "SELECT step_number, step_type, key, output->>'total' FROM agent_steps WHERE run_id = %s "
            "AND step_type = 'state_update'",
            (run_id,),
        ).fetchall()
    assert rows == [(2, "state_update", "cart", "38")]
    with pytest.raises(spanreplay.StateChangedError), spanreplay.replay(pg_dsn, run_id):
        agent(discount=1)

"""Side effects (``effect=True``): write-ahead intents, and what replay and fork do with them.

Record: a boundary marked ``effect=True`` carries ``spanreplay.effect`` from the
start of its span. The durable file processor writes the span when it starts
(the intent: run, seq, call id, kind, key and the masked input) and the Postgres
processor commits it as a step row without an outcome, both before the work
runs; the ended span (the outcome) replaces it. A run killed inside the work
keeps the intent and no outcome: an ``Event`` whose ``unfinished`` is true.

Replay: an unfinished effect cannot be served (there is nothing to serve, and
the real work never runs on replay), so reaching it raises
``UnfinishedEffectError``, which says that the effect may have happened.

Fork (the hook): a fork that would go live at a recorded step calls
``refuse_live_effect(event, run_id=..., allow_effects=...)`` with the recorded
event at that step first. For an unfinished effect it raises
``LiveEffectRefusedError`` unless ``allow_effects`` is true: running the work
live again could pay twice. A fork that serves recorded steps and meets an
unfinished one gets ``UnfinishedEffectError`` from the replay; its ``event``
is what to hand to ``refuse_live_effect`` before going live there.
``unfinished_effects(log)`` lists them up front (to refuse a fork before it starts).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from spanreplay import semconv as sc
from spanreplay.errors import LiveEffectRefusedError, UnfinishedEffectError

if TYPE_CHECKING:
    from spanreplay.model.events import Event, EventLog

    from .engine import ReplayEngine

__all__ = ["effect_attributes", "refuse_live_effect", "served_effect", "unfinished_effects"]

# The span attribute an effect starts with. Shared by every call of an effect tool:
# the recording copies extra attributes into each span's own dict and never changes this one.
EFFECT_ATTRIBUTES: Final[dict[str, Any]] = {sc.EFFECT: True}


def effect_attributes(attributes: dict[str, Any] | None) -> dict[str, Any]:
    """``attributes`` (extra span attributes, or None) with the effect marker added."""
    if not attributes:
        return EFFECT_ATTRIBUTES
    return {**attributes, sc.EFFECT: True}


def unfinished_effects(log: EventLog) -> tuple[Event, ...]:
    """The side effects of a run whose intent was recorded and their outcome never was, by seq."""
    return tuple(event for event in log if event.unfinished)


def served_effect(engine: ReplayEngine, event: Event) -> None:
    """Refuse to serve ``event`` when it is an unfinished effect (the replay then ends with the error)."""
    if not event.unfinished:
        return
    error = _unfinished(engine.run_id, event)
    engine.refuse(error)
    raise error


def refuse_live_effect(event: Event | None, *, run_id: str, allow_effects: bool = False) -> None:
    """The fork's check before it runs the step of ``event`` live (see the module docstring).

    Args:
        event: the recorded event at the step where the fork would go live (None
            when the recording has none there: nothing to refuse).
        run_id: the run being forked, named in the error.
        allow_effects: run the work live even when it may have happened already.

    Raises:
        LiveEffectRefusedError: ``event`` is an unfinished side effect and
            ``allow_effects`` is false.
    """
    if event is None or not event.unfinished or allow_effects:
        return
    what = _what(event)
    raise LiveEffectRefusedError(
        f"A fork of run {run_id} would go live at seq {event.seq}, {what}, a side effect whose intent was "
        "recorded but whose outcome never was: the recorded process died while it ran, so it may have "
        "happened already, and running it live again could do it twice.\n"
        f"Recorded: the intent of {event.describe()}, and no outcome\n"
        f"Attempted: run {what} live\n"
        "Check whether it happened (the payment, the email, the change it makes); then pass "
        "allow_effects=True (--allow-effects) to run it live anyway, or give the step an outcome with "
        "overrides={" + str(event.seq) + ": ...}.",
        event=event,
        run_id=run_id,
        seq=event.seq,
        call_id=event.call_id,
        recorded=None,
        attempted=f"run {what} live",
    )


def _unfinished(run_id: str, event: Event) -> UnfinishedEffectError:
    what = _what(event)
    return UnfinishedEffectError(
        f"Replay of run {run_id} reached seq {event.seq}, {what}, a side effect whose intent was recorded but "
        "whose outcome never was: the recorded process died while it ran, so the side effect may have "
        "happened (look for the payment, the email, the change it makes).\n"
        f"Recorded: the intent of {event.describe()}, and no outcome (the run crashed here)\n"
        f"Attempted: {event.describe()}\n"
        "Replay has nothing to serve for it and never runs the real work; a fork that goes live here "
        "needs allow_effects=True (--allow-effects).",
        event=event,
        run_id=run_id,
        seq=event.seq,
        call_id=event.call_id,
        recorded=None,
        attempted=event.describe(),
    )


def _what(event: Event) -> str:
    return f"{event.kind} {event.key!r} (call id {event.call_id})"

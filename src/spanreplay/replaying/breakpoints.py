"""Stopping a replay in the debugger before a chosen step is served, or where the code diverges.

``replay(..., break_at=...)`` names the places. The debugger is entered through
``sys.breakpointhook()``, what ``breakpoint()`` calls, so pdb, a ``PYTHONBREAKPOINT``
hook and IDE debuggers all stop there. They stop in one of the two small functions
at the end of this module, whose locals are what there is to look at and nothing
else: ``step``, the recorded ``Event`` about to be handed to the code (kind, key,
call id, input, output, attributes with the tokens); at a divergence also
``recorded`` (the Event the recording holds there, or None), ``attempted`` (the call
the code made) and ``error`` (the divergence, raised once the debugger continues).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, Literal

import orjson

from spanreplay import semconv as sc
from spanreplay.errors import ConfigurationError, ReplayDivergenceError
from spanreplay.model.events import Event, EventLog

__all__ = ["DIVERGENCE", "AttemptedCall", "BreakAt", "Breakpoints"]

DIVERGENCE: Final = "divergence"

# What ``break_at=`` takes: a seq, the word "divergence", or several of them.
BreakAt = int | Literal["divergence"] | Iterable[int | Literal["divergence"]] | None


@dataclass(frozen=True, slots=True)
class AttemptedCall:
    """The call the code made where the replay diverged, as the replay compared it (input masked)."""

    kind: str
    key: str
    call_id: str
    input_json: bytes

    @property
    def input(self) -> Any:
        return orjson.loads(self.input_json)


class Breakpoints:
    """The seqs a replay stops before, and whether it stops at the first divergence."""

    __slots__ = ("_divergence_seen", "_lock", "at_divergence", "log", "seqs")

    def __init__(self, log: EventLog, break_at: BreakAt) -> None:
        self.log = log
        seqs, self.at_divergence = _parse(break_at, log.run_id)
        for seq in sorted(seqs):
            _check_step(log, seq)
        self.seqs = frozenset(seqs)
        self._lock = threading.Lock()
        self._divergence_seen = False

    def __bool__(self) -> bool:
        return bool(self.seqs) or self.at_divergence

    def before_serving(self, event: Event) -> None:
        """Stop before ``event``'s recorded value goes to the code, when its seq was asked for."""
        if event.seq in self.seqs:
            _break_before_step(event)

    def diverged(self, error: ReplayDivergenceError, attempted: AttemptedCall) -> None:
        """Stop at the replay's first divergence, when ``"divergence"`` was asked for.

        Only the first: the replay ends with it whatever follows (a later one is its consequence).
        """
        if not self.at_divergence:
            return
        with self._lock:
            if self._divergence_seen:
                return
            self._divergence_seen = True
        # The error's seq is the recorded step's when the recording holds one at this point;
        # for a call the recording does not have at all (recorded None) it is the code's own count.
        event = self.log.by_seq(error.seq) if error.recorded is not None and error.seq is not None else None
        _break_at_divergence(event, event, attempted, error)


def _parse(break_at: BreakAt, run_id: str) -> tuple[set[int], bool]:
    items: Iterable[object]
    if break_at is None:
        return set(), False
    if isinstance(break_at, (int, str)):
        items = [break_at]
    elif isinstance(break_at, Iterable):
        items = list(break_at)
    else:
        items = [break_at]
    seqs: set[int] = set()
    at_divergence = False
    for item in items:
        if item == DIVERGENCE:
            at_divergence = True
        elif isinstance(item, int) and not isinstance(item, bool):
            seqs.add(item)
        else:
            raise ConfigurationError(
                f"break_at={item!r} for run {run_id} is neither a step's seq (an int, as spanreplay show lists "
                f'them) nor "{DIVERGENCE}"; pass a seq, a list of seqs, or "{DIVERGENCE}".'
            )
    return seqs, at_divergence


def _check_step(log: EventLog, seq: int) -> None:
    """A seq to break at must be a step the replay hands to the code itself."""
    event = log.by_seq(seq)
    if event is None:
        where = (
            f"its steps run from seq {log.events[0].seq} to {log.events[-1].seq}"
            if len(log)
            else "it has no steps at all"
        )
        raise ConfigurationError(
            f"break_at={seq}: run {log.run_id} has no step at seq {seq}; {where} (spanreplay show lists them)."
        )
    enclosing = _enclosing_step(log, event)
    if enclosing is not None:
        raise ConfigurationError(
            f"break_at={seq}: in run {log.run_id}, seq {seq} ({event.kind} {event.key!r}) ran inside seq "
            f"{enclosing.seq} ({enclosing.kind} {enclosing.key!r}, call id {enclosing.call_id}); replay serves "
            f"that step whole and never reaches seq {seq} on its own. Break at seq {enclosing.seq}."
        )


def _enclosing_step(log: EventLog, event: Event) -> Event | None:
    """The recorded boundary ``event`` was made inside (past branch scopes), or None at top level."""
    head = event.call_id.rpartition("/")[0]
    while head:
        parent, _, last = head.rpartition("/")
        if not last.startswith(sc.KIND_BRANCH + ":"):
            return log.by_call_id(head)
        head = parent
    return None


# The frames a debugger stops in. Their locals are the point: keep them to the arguments.


def _break_before_step(step: Event) -> None:
    """Replay stopped before the recorded value of ``step`` goes to the code; continue to serve it."""
    sys.breakpointhook()


def _break_at_divergence(
    step: Event | None, recorded: Event | None, attempted: AttemptedCall, error: ReplayDivergenceError
) -> None:
    """Replay diverged: ``recorded`` is what the recording holds here, ``attempted`` the call the
    code made; continue to raise ``error``."""
    sys.breakpointhook()

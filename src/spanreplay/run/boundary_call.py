"""``BoundaryCall``: one call of a boundary, as every kind of run takes it.

The contract between an instrumentation and a run: the instrumentation says
what the call is (its kind, key and input) and hands over the real work as a
no-argument function; the run decides what happens to it. A recording runs the
work and writes a span; a replay serves the recorded outcome and never runs it;
a fork serves it up to its fork point and runs it from there. The
instrumentation never asks which kind of run it is in: it calls ``Run.call()``
(or ``Run.call_async()`` when the function is async) and asks the run's
properties (``Run.records``, ``Run.serves_recorded``) what to prepare.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["BoundaryCall", "Decoder"]

Decoder = Callable[[Any], Any]


# Neither frozen nor keyword-only: one BoundaryCall is made per boundary, and on the
# replay path a frozen dataclass (each field set through object.__setattr__) or keyword
# matching costs as much as the lookup of the recorded step. No run changes a call it is
# handed; the hot callers (``@tool``, ``boundary()``) pass the fields by position.
@dataclass(slots=True)
class BoundaryCall:
    """One call of boundary ``kind``/``key``, handed to ``Run.call()`` or ``Run.call_async()``.

    Attributes:
        kind: what kind of boundary (``"tool"``, ``"model"``, ``"clock"``, ...).
        key: which one of that kind (a tool name, a model name).
        input: the call's input, JSON-serializable: recorded, and compared on replay.
        function: the real work, a no-argument callable. A recording runs it; a
            replay never does. For ``Run.call_async()`` it returns an awaitable.
        decode: turns the recorded JSON back into the object the caller expects;
            read only by a run that serves recorded outputs (``Run.serves_recorded``).
        attributes: extra span attributes (token counts, GenAI names, a tool call id).
    """

    kind: str
    key: str
    input: Any
    function: Callable[[], Any]
    decode: Decoder | None = None
    attributes: dict[str, Any] | None = None

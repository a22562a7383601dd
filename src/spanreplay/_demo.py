"""The agent behind ``spanreplay demo``: a small help-desk bot, with no model and no network.

A scripted planner stands in for the model (it is recorded as a ``model``
boundary all the same), and three tools stand in for backends. One of them, the
carrier's tracking API, times out now and then: the draw that decides it is
``spanreplay.random()``, so a replay serves the recorded draw, or rather never
asks for it, because the tool body never runs on replay. The answer depends on
the clock (``spanreplay.now()``): inside office hours the bot offers a callback,
outside them it opens a ticket. Replaying a run made at night the next morning
takes the night branch again, because the recorded instant comes back.

``main()`` is the entry point: ``spanreplay replay traces/ RUN --entry
spanreplay._demo:main`` calls it inside a replay. ``spanreplay demo`` records it
inside ``spanreplay.record()``.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from . import _semconv as sc
from ._builtins import now, random, uuid4
from ._run import boundary
from .instrumentation.tools import tool

__all__ = ["AGENT", "FAILURE_RATE", "CarrierTimeout", "main", "real_calls"]

AGENT = "helpdesk"
QUESTION = "Where is my order #1042? It was due yesterday."
# How often the carrier API times out. High enough that a handful of runs shows one.
FAILURE_RATE = 0.4
MAX_TURNS = 6
PLANNER = "scripted-planner"

# How many times each tool body really ran: replay must leave these at zero.
real_calls: collections.Counter[str] = collections.Counter()


class CarrierTimeout(TimeoutError):
    """The carrier's tracking API did not answer in time."""


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """The order as the shop's database holds it."""
    real_calls["lookup_order"] += 1
    return {"order_id": order_id, "status": "shipped", "carrier": "ParcelCo", "tracking": "PC-88412-X"}


@tool
def track_shipment(carrier: str, tracking: str) -> dict[str, Any]:
    """The carrier's tracking API: answers most of the time, times out sometimes."""
    real_calls["track_shipment"] += 1
    if random() < FAILURE_RATE:
        raise CarrierTimeout(f"{carrier} tracking API timed out after 10s for {tracking}")
    return {"tracking": tracking, "last_scan": "Leipzig hub", "eta_days": 2}


@tool
def open_ticket(order_id: str, summary: str, callback: bool) -> dict[str, Any]:
    """A ticket for a person to follow up on."""
    real_calls["open_ticket"] += 1
    return {"ticket": f"T-{order_id}-{len(summary)}", "callback": callback}


TOOLS: dict[str, Callable[..., dict[str, Any]]] = {
    "lookup_order": lookup_order,
    "track_shipment": track_shipment,
    "open_ticket": open_ticket,
}


def _plan(messages: list[dict[str, Any]], office_hours: bool) -> dict[str, Any]:
    """What a model would answer: the next tool call, or the final answer."""
    done = {m["tool"]: m["content"] for m in messages if m["role"] == "tool"}
    if "lookup_order" not in done:
        return {"tool": "lookup_order", "args": {"order_id": "1042"}}
    order = done["lookup_order"]
    if "track_shipment" not in done:
        return {"tool": "track_shipment", "args": {"carrier": order["carrier"], "tracking": order["tracking"]}}
    scan = done["track_shipment"]
    summary = f"Order 1042 last seen at {scan['last_scan']}, due in {scan['eta_days']} days."
    if "open_ticket" not in done:
        return {"tool": "open_ticket", "args": {"order_id": "1042", "summary": summary, "callback": office_hours}}
    follow_up = "A colleague will call you back today." if office_hours else "We will reply by email tomorrow."
    return {"answer": f"{summary} {follow_up} (ticket {done['open_ticket']['ticket']})"}


def plan(messages: list[dict[str, Any]], office_hours: bool) -> dict[str, Any]:
    """The planner as a ``model`` boundary: on replay the recorded plan comes back."""
    request = {"messages": messages, "office_hours": office_hours}
    result: dict[str, Any] = boundary(sc.KIND_MODEL, PLANNER, request, lambda: _plan(messages, office_hours))
    return result


def main() -> str:
    """Answer one help-desk question and return the answer.

    Raises:
        CarrierTimeout: when the carrier's tracking API times out (the failure
            ``spanreplay demo`` waits for and then reproduces).
    """
    conversation = str(uuid4())
    started = now()
    office_hours = started.weekday() < 5 and 9 <= started.hour < 17
    messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION, "conversation": conversation}]
    for _ in range(MAX_TURNS):
        step = plan(messages, office_hours)
        if "answer" in step:
            return str(step["answer"])
        result = TOOLS[step["tool"]](**step["args"])
        messages.append({"role": "tool", "tool": step["tool"], "content": result})
    raise RuntimeError(f"the planner gave no answer within {MAX_TURNS} turns")

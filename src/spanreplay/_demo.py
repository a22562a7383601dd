"""The agent behind ``spanreplay demo``: a Claude support agent for an online shop.

It is an ordinary agent on the ``anthropic`` SDK, instrumented with
``instrument_anthropic()``: each turn streams Claude's reply
(``messages.stream``), the ``tool_use`` blocks of a turn run at once with
``asyncio.gather``, and the results go back until Claude answers in text.

Inside ``local_api()`` (``spanreplay demo`` runs it there) it calls the local
Messages API server of ``spanreplay.testing``, a rule-based support model on
127.0.0.1. Outside it, it calls the real API when ANTHROPIC_API_KEY is set and
otherwise starts a local server of its own for the call. A
replay needs no server at all: every model call is served from the trace, so
the client points at a closed port, where any call that leaked would fail.

One tool, the carrier's tracking API, times out now and then: the draw that
decides it is ``spanreplay.random()``, nested in the tool call, so a replay
never asks for it (the tool body does not run; its recorded outcome comes
back). The system prompt depends on the clock (``spanreplay.now()``): inside
office hours the desk offers a callback, outside them an email reply, and a
replay takes the recorded branch whatever the hour.

``main()`` is the entry point: ``spanreplay replay traces/ RUN --entry
spanreplay._demo:main`` calls it inside a replay.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TextIO

import anthropic

from spanreplay.api.builtins import now, random
from spanreplay.instrumentation.anthropic import instrument_anthropic
from spanreplay.instrumentation.tools import tool
from spanreplay.run.base import current_run
from spanreplay.testing.messages_api import MessagesAPIServer, support_model

__all__ = ["AGENT", "FAILURE_RATE", "MODEL", "QUESTION", "CarrierTimeout", "answer", "local_api", "main", "real_calls"]

AGENT = "support"
MODEL = "claude-sonnet-4-6"
QUESTION = "Where is my order A-17? I live in France."
# How often the carrier API times out. High enough that a handful of runs shows one.
FAILURE_RATE = 0.4
MAX_TURNS = 6
SYSTEM = "You are a concise support agent for an online shop. Use the tools to answer questions about orders."
DESK_OPEN = "The help desk is open now: offer a callback today."
DESK_CLOSED = "The help desk is closed now: promise an email reply tomorrow."
# Nothing listens on port 9 (discard): a replay sends nothing, and if it did, the call would fail loudly.
OFFLINE_URL = "http://127.0.0.1:9"

TOOLS: list[dict[str, Any]] = [
    {
        "name": "lookup_order",
        "description": "The status, carrier and tracking number of an order.",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    },
    {
        "name": "shipping_policy",
        "description": "The shop's shipping policy for a country (ISO code).",
        "input_schema": {"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]},
    },
    {
        "name": "track_shipment",
        "description": "Where the carrier last scanned a parcel, and its expected delivery.",
        "input_schema": {
            "type": "object",
            "properties": {"carrier": {"type": "string"}, "tracking": {"type": "string"}},
            "required": ["carrier", "tracking"],
        },
    },
]

# How many times each tool body really ran: replay must leave these at zero.
real_calls: collections.Counter[str] = collections.Counter()


class CarrierTimeout(TimeoutError):
    """The carrier's tracking API did not answer in time."""


@tool
async def lookup_order(order_id: str) -> dict[str, Any]:
    """The order as the shop's database holds it."""
    real_calls["lookup_order"] += 1
    orders = {"A-17": ("shipped", "La Poste", "LP-88412-FR"), "B-2": ("processing", None, None)}
    status, carrier, tracking = orders.get(order_id, ("unknown", None, None))
    return {"order_id": order_id, "status": status, "carrier": carrier, "tracking": tracking}


@tool
async def shipping_policy(country: str) -> dict[str, Any]:
    """The shop's shipping policy for one country."""
    real_calls["shipping_policy"] += 1
    return {"country": country, "policy": f"Orders to {country} arrive within 3 working days of shipping."}


@tool
async def track_shipment(carrier: str, tracking: str) -> dict[str, Any]:
    """The carrier's tracking API: answers most of the time, times out sometimes."""
    real_calls["track_shipment"] += 1
    if random() < FAILURE_RATE:
        raise CarrierTimeout(f"{carrier} tracking API timed out after 10s for {tracking}")
    return {"tracking": tracking, "last_scan": "Lyon hub", "eta_days": 2}


RUNNERS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "lookup_order": lookup_order,
    "shipping_policy": shipping_policy,
    "track_shipment": track_shipment,
}


async def answer(client: anthropic.AsyncAnthropic, question: str, out: TextIO | None = None) -> str:
    """Run the support loop for one question; returns Claude's final text.

    The streamed text goes to ``out`` as it arrives, when given.
    """
    started = now()
    office_hours = started.weekday() < 5 and 9 <= started.hour < 17
    system = f"{SYSTEM} {DESK_OPEN if office_hours else DESK_CLOSED}"
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    for _ in range(MAX_TURNS):
        async with client.messages.stream(
            model=MODEL,
            max_tokens=512,
            system=system,
            tools=TOOLS,  # type: ignore[arg-type]  # plain dicts, as most agents write them
            messages=messages,  # type: ignore[arg-type]
        ) as stream:
            async for chunk in stream.text_stream:
                if out is not None:
                    out.write(chunk)
            reply = await stream.get_final_message()
        if out is not None:
            out.write("\n")
        calls = [block for block in reply.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in reply.content if block.type == "text")
        # The turn's tools run at once; the first to fail fails the turn (and the run).
        results = await asyncio.gather(*(RUNNERS[call.name](**dict(call.input)) for call in calls))
        messages.append(
            {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in reply.content]}
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": call.id, "content": json.dumps(result)}
                    for call, result in zip(calls, results, strict=True)
                ],
            }
        )
    raise RuntimeError(f"Claude gave no answer within {MAX_TURNS} turns")


# The URL of the server local_api() started, for main() calls made while it runs.
_local_url: str | None = None


@contextlib.contextmanager
def local_api() -> Iterator[MessagesAPIServer]:
    """Start the local Messages API server for the ``main()`` calls in this block, then stop it."""
    global _local_url
    with MessagesAPIServer(default=support_model) as server:
        _local_url = server.url
        try:
            yield server
        finally:
            _local_url = None


def _base_url(stack: contextlib.ExitStack) -> str | None:
    """Where the client sends its calls: None for the real API."""
    # The demo's own server first: ``spanreplay demo`` promises no key and no network.
    if _local_url is not None:
        return _local_url
    if os.environ.get("ANTHROPIC_API_KEY"):
        return None
    run = current_run()
    if run is not None and run.replayed_log is not None:
        return OFFLINE_URL
    return stack.enter_context(local_api()).url


async def main(out: TextIO | None = None) -> str:
    """Answer the demo's question and return the answer.

    Raises:
        CarrierTimeout: when the carrier's tracking API times out (the failure
            ``spanreplay demo`` waits for and then reproduces).
    """
    instrument_anthropic(zero_code=False)
    with contextlib.ExitStack() as stack:
        base_url = _base_url(stack)
        if base_url is None:
            client = anthropic.AsyncAnthropic()
        else:
            client = anthropic.AsyncAnthropic(base_url=base_url, api_key="local-stand-in")
        async with client:
            return await answer(client, QUESTION, out)
    raise AssertionError("unreachable")  # pragma: no cover  # ExitStack does not swallow exceptions

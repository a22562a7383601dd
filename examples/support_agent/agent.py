"""A Claude customer-support agent: streaming replies, parallel tool calls, recorded and replayed.

Each turn streams Claude's reply; when the reply holds several ``tool_use``
blocks, the agent runs them at once with ``asyncio.gather`` and sends the
results back, until Claude answers in text. The carrier's tracking API times
out now and then (a ``spanreplay.random()`` draw decides), and the answer
depends on the clock (``spanreplay.now()``): inside office hours the desk
offers a callback, outside them an email reply.

With ANTHROPIC_API_KEY set it talks to the real API; without it, to the local
Messages API server that ships with spanreplay (``spanreplay.testing``), so it
runs anywhere with no key and no network::

    python examples/support_agent/agent.py                      # record into ./traces
    python examples/support_agent/agent.py --replay RUN_ID      # replay offline
    spanreplay replay traces/ RUN_ID --entry agent:support      # the same, from examples/support_agent

Or with no spanreplay code in the agent at all (docs/anthropic.md)::

    SPANREPLAY_MODE=record opentelemetry-instrument python examples/support_agent/agent.py --plain
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from typing import Any

import anthropic

import spanreplay
from spanreplay.testing import MessagesAPIServer, support_model

MODEL = os.environ.get("SUPPORT_AGENT_MODEL", "claude-sonnet-4-6")
QUESTION = "Where is my order A-17? I live in France."
# How often the carrier's tracking API times out.
CARRIER_FAILURE_RATE = float(os.environ.get("SUPPORT_AGENT_CARRIER_FAILURE_RATE", "0.3"))
SYSTEM = "You are a concise support agent for an online shop. Use the tools to answer questions about orders."
DESK_OPEN = "The help desk is open now: offer a callback today."
DESK_CLOSED = "The help desk is closed now: promise an email reply tomorrow."
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


class CarrierTimeout(TimeoutError):
    """The carrier's tracking API did not answer in time."""


@spanreplay.tool
async def lookup_order(order_id: str) -> dict[str, Any]:
    orders = {"A-17": ("shipped", "La Poste", "LP-88412-FR"), "B-2": ("processing", None, None)}
    status, carrier, tracking = orders.get(order_id, ("unknown", None, None))
    return {"order_id": order_id, "status": status, "carrier": carrier, "tracking": tracking}


@spanreplay.tool
async def shipping_policy(country: str) -> dict[str, Any]:
    return {"country": country, "policy": f"Orders to {country} arrive within 3 working days of shipping."}


@spanreplay.tool
async def track_shipment(carrier: str, tracking: str) -> dict[str, Any]:
    # spanreplay.random(): recorded, so a replay of a run that timed out times out again.
    if spanreplay.random() < CARRIER_FAILURE_RATE:
        raise CarrierTimeout(f"{carrier} tracking API timed out after 10s for {tracking}")
    return {"tracking": tracking, "last_scan": "Lyon hub", "eta_days": 2}


RUNNERS = {"lookup_order": lookup_order, "shipping_policy": shipping_policy, "track_shipment": track_shipment}


async def answer(client: anthropic.AsyncAnthropic, question: str, out: Any = sys.stdout) -> str:
    """Run the support loop for one question; returns Claude's final text."""
    started = spanreplay.now()  # recorded: a replay takes the branch the recorded run took
    office_hours = started.weekday() < 5 and 9 <= started.hour < 17
    system = f"{SYSTEM} {DESK_OPEN if office_hours else DESK_CLOSED}"
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    while True:
        async with client.messages.stream(
            model=MODEL,
            max_tokens=512,
            system=system,
            tools=TOOLS,  # type: ignore[arg-type]
            messages=messages,  # type: ignore[arg-type]
        ) as stream:
            async for chunk in stream.text_stream:
                out.write(chunk)
                out.flush()
            reply = await stream.get_final_message()
        out.write("\n")
        calls = [block for block in reply.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in reply.content if block.type == "text")
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


def make_client(stack: contextlib.ExitStack) -> anthropic.AsyncAnthropic:
    if os.environ.get("ANTHROPIC_API_KEY"):
        return anthropic.AsyncAnthropic()
    if isinstance(spanreplay.current_run(), spanreplay.ReplayingRun):
        # A replay sends nothing; nothing listens on port 9, so a call that leaked would fail loudly.
        return anthropic.AsyncAnthropic(base_url="http://127.0.0.1:9", api_key="offline")
    server = stack.enter_context(MessagesAPIServer(default=support_model))
    return anthropic.AsyncAnthropic(base_url=server.url, api_key="local-stand-in")


async def support(question: str = QUESTION) -> str:
    """Answer one question; the entry point for ``spanreplay replay ... --entry agent:support``."""
    spanreplay.instrument_anthropic(zero_code=False)
    with contextlib.ExitStack() as stack:
        async with make_client(stack) as client:
            return await answer(client, question)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("question", nargs="?", default=QUESTION)
    parser.add_argument("--replay", metavar="RUN_ID", help="replay this run from --traces instead of recording")
    parser.add_argument("--traces", default=os.environ.get("SPANREPLAY_TRACE_DIR", "traces"))
    parser.add_argument("--plain", action="store_true", help="no spanreplay calls (for opentelemetry-instrument)")
    args = parser.parse_args(argv)
    if args.plain:
        with contextlib.ExitStack() as stack:
            client = make_client(stack)
            asyncio.run(answer(client, args.question))
        return 0
    run: spanreplay.Run
    try:
        if args.replay:
            with spanreplay.replay(args.traces, args.replay) as run:
                asyncio.run(support(args.question))
        else:
            spanreplay.configure(service_name="support-agent", trace_dir=args.traces)
            with spanreplay.record(agent="support") as run:
                asyncio.run(support(args.question))
    except CarrierTimeout as exc:
        verb = "replayed" if args.replay else "recorded"
        print(f"{verb} run {run.run_id}: failed with CarrierTimeout: {exc}", file=sys.stderr)
        return 1
    if args.replay:
        print(f"replayed run {run.run_id}: {run.outcome}", file=sys.stderr)
    else:
        print(f"recorded run {run.run_id} into {args.traces}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

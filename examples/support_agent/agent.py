"""A Claude customer-support agent: streaming replies, parallel tool calls, recorded and replayed.

Each turn streams Claude's reply; when the reply holds several ``tool_use``
blocks, the agent runs them at once with ``asyncio.gather`` and sends the
results back, until Claude answers in text.

With ANTHROPIC_API_KEY set it talks to the real API; without it, to the bundled
local stand-in (local_api.py), so it runs anywhere with no key and no network::

    python examples/support_agent/agent.py                      # record into ./traces
    python examples/support_agent/agent.py --replay RUN_ID      # replay offline

Or with no spanreplay code in the agent at all (docs/anthropic.md)::

    SPANREPLAY_MODE=record opentelemetry-instrument python examples/support_agent/agent.py --plain
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
from typing import Any

import anthropic

import spanreplay
from spanreplay.instrumentation.anthropic import instrument_anthropic

sys.path.insert(0, os.path.dirname(__file__))
import local_api

MODEL = os.environ.get("SUPPORT_AGENT_MODEL", "claude-sonnet-4-6")
SYSTEM = "You are a concise support agent for an online shop. Use the tools to answer questions about orders."
TOOLS: list[dict[str, Any]] = [
    {
        "name": "lookup_order",
        "description": "The status and carrier of an order.",
        "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    },
    {
        "name": "shipping_policy",
        "description": "The shop's shipping policy for a country (ISO code).",
        "input_schema": {"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]},
    },
]


@spanreplay.tool
async def lookup_order(order_id: str) -> dict[str, Any]:
    await asyncio.sleep(random.uniform(0.01, 0.05))  # a database that answers at its own pace
    orders = {"A-17": ("shipped", "La Poste"), "B-2": ("processing", None)}
    status, carrier = orders.get(order_id, ("unknown", None))
    return {"order_id": order_id, "status": status, "carrier": carrier}


@spanreplay.tool
async def shipping_policy(country: str) -> dict[str, Any]:
    await asyncio.sleep(random.uniform(0.01, 0.05))
    return {"country": country, "policy": "Orders to France arrive within 3 working days of shipping."}


RUNNERS = {"lookup_order": lookup_order, "shipping_policy": shipping_policy}


async def answer(client: anthropic.AsyncAnthropic, question: str, out: Any = sys.stdout) -> str:
    """Run the support loop for one question; returns Claude's final text."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    while True:
        async with client.messages.stream(
            model=MODEL, max_tokens=512, system=SYSTEM, tools=TOOLS, messages=messages
        ) as stream:
            async for chunk in stream.text_stream:
                out.write(chunk)
                out.flush()
            reply = await stream.get_final_message()
        out.write("\n")
        calls = [block for block in reply.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in reply.content if block.type == "text")
        results = await asyncio.gather(*(RUNNERS[call.name](**call.input) for call in calls))
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


def make_client() -> tuple[anthropic.AsyncAnthropic, Any]:
    if os.environ.get("ANTHROPIC_API_KEY"):
        return anthropic.AsyncAnthropic(), None
    url, server = local_api.start()
    return anthropic.AsyncAnthropic(base_url=url, api_key="local-stand-in"), server


async def main_async(question: str) -> str:
    client, server = make_client()
    try:
        async with client:
            return await answer(client, question)
    finally:
        if server is not None:
            server.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("question", nargs="?", default="Where is my order A-17? I live in France.")
    parser.add_argument("--replay", metavar="RUN_ID", help="replay this run from --traces instead of recording")
    parser.add_argument("--traces", default=os.environ.get("SPANREPLAY_TRACE_DIR", "traces"))
    parser.add_argument("--plain", action="store_true", help="no spanreplay calls (for opentelemetry-instrument)")
    args = parser.parse_args(argv)
    if args.plain:
        asyncio.run(main_async(args.question))
        return 0
    instrument_anthropic(zero_code=False)
    if args.replay:
        with spanreplay.replay(args.traces, args.replay) as run:
            asyncio.run(main_async(args.question))
        print(f"replayed run {run.run_id}: {run.outcome}", file=sys.stderr)
        return 0
    spanreplay.configure(service_name="support-agent", trace_dir=args.traces)
    with spanreplay.record(agent="support") as run:
        asyncio.run(main_async(args.question))
    print(f"recorded run {run.run_id} into {args.traces}/", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A plain Claude agent with a tool loop and no spanreplay code: what other instrumentors record.

It imports only ``anthropic``, so it runs both in the test-only environment that
holds OpenInference's and OpenLLMetry's instrumentors (where it is recorded) and
in the project's environment (where spanreplay replays what they recorded).
Against ``support_model`` it asks for two tools in one turn, then a third, then
answers in text: three Messages calls and three tool executions.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

MODEL = "claude-sonnet-4-6"
QUESTION = "Where is my order A-17? I live in France."
SYSTEM = "You are a concise support agent for an online shop. The help desk is open now."
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

# What each tool ran, in order: a replay that runs the tools live runs them again.
TOOL_LOG: list[str] = []


def lookup_order(order_id: str) -> dict[str, Any]:
    TOOL_LOG.append(f"lookup_order({order_id})")
    orders = {"A-17": ("shipped", "La Poste", "LP-88412-FR")}
    status, carrier, tracking = orders.get(order_id, ("unknown", None, None))
    return {"order_id": order_id, "status": status, "carrier": carrier, "tracking": tracking}


def shipping_policy(country: str) -> dict[str, Any]:
    TOOL_LOG.append(f"shipping_policy({country})")
    return {"country": country, "policy": f"Orders to {country} arrive within 3 working days of shipping."}


def track_shipment(carrier: str, tracking: str) -> dict[str, Any]:
    TOOL_LOG.append(f"track_shipment({carrier}, {tracking})")
    return {"tracking": tracking, "last_scan": "Lyon hub", "eta_days": 2}


RUNNERS = {"lookup_order": lookup_order, "shipping_policy": shipping_policy, "track_shipment": track_shipment}


def answer(client: anthropic.Anthropic, question: str = QUESTION, *, stream: bool = False) -> str:
    """Run the tool loop until Claude answers in text; returns that text."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    while True:
        request: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": 512,
            "system": SYSTEM,
            "tools": TOOLS,
            "messages": messages,
        }
        if stream:
            with client.messages.stream(**request) as events:
                for _ in events.text_stream:
                    pass
                reply = events.get_final_message()
        else:
            reply = client.messages.create(**request)
        calls = [block for block in reply.content if block.type == "tool_use"]
        if not calls:
            return "".join(block.text for block in reply.content if block.type == "text")
        messages.append(
            {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in reply.content]}
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call.id,
                        "content": json.dumps(RUNNERS[call.name](**dict(call.input))),
                    }
                    for call in calls
                ],
            }
        )

"""The traces OpenInference and OpenLLMetry recorded of ``foreign_agent`` (tests/fixtures/foreign), and what they hold.

The expected figures are read from the files with opentelemetry-proto alone,
not through spanreplay's readers, so a test that compares them checks the readers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from opentelemetry.proto.trace.v1.trace_pb2 import TracesData

from helpers.paths import FIXTURES

FOREIGN: Final = FIXTURES / "foreign"
ANSWER: Final = (
    "Order A-17 is shipped, last scanned at Lyon hub and due in 2 days. Orders to FR arrive within "
    "3 working days of shipping. A colleague will call you back today."
)
TOOLS_RUN: Final = ["lookup_order(A-17)", "shipping_policy(FR)", "track_shipment(La Poste, LP-88412-FR)"]
FILES: Final = {
    "openinference-create.binpb": "openinference",
    "openinference-stream.binpb": "openinference",
    "openllmetry-create.binpb": "openllmetry",
    "openllmetry-stream.binpb": "openllmetry",
    "anthropic-sdk-create.binpb": "anthropic-sdk",
    "anthropic-sdk-stream.binpb": "anthropic-sdk",
}
_TOTAL_TOKENS: Final = ("llm.token_count.total", "gen_ai.usage.total_tokens")
# The SDK's spans give no total: input and output tokens, the cache counts as the API splits them.
_PARTS: Final = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_write.input_tokens",
)


def raw_spans(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """``(trace id, attributes)`` of every span, decoded from the length-prefixed records by hand."""
    data = path.read_bytes()
    out: list[tuple[str, dict[str, Any]]] = []
    while data:
        size = int.from_bytes(data[:4], "big")
        message = TracesData()
        message.ParseFromString(data[4 : 4 + size])
        data = data[4 + size :]
        for resource in message.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes = {kv.key: getattr(kv.value, kv.value.WhichOneof("value")) for kv in span.attributes}
                    out.append((span.trace_id.hex(), attributes))
    return out


def trace_id(path: Path) -> str:
    (only,) = {tid for tid, _ in raw_spans(path)}
    return only


def total_tokens(path: Path) -> int:
    total = 0
    for _, attributes in raw_spans(path):
        named = [name for name in _TOTAL_TOKENS if name in attributes]
        total += sum(int(attributes[name]) for name in (named or [n for n in _PARTS if n in attributes]))
    return total

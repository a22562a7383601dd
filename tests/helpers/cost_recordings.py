"""Recordings for the cost and report tests: agents calling Claude through the real SDK.

``record_fleet`` records a small fleet of runs through the real recorder and the
real Anthropic SDK, talking to ``MessagesAPIServer`` (the caller has configured
spanreplay and instrumented the SDK):

- five ordinary ``support`` runs: two model turns and a tool call each;
- a ``support`` run whose retry looped: the same request sent eight times;
- a ``support`` run whose context grew: six turns, each prompt larger than the last;
- three ``triage`` runs on Claude Haiku 4.5, and one on a model no table prices;
- a ``legacy`` run whose model call carries no usage (an older instrumentation),
  and a span of another instrumentation without usage inside it.

``shift_days`` moves a run's spans by whole days in its trace file, the way a
recording made on another day reads, so the fleet spans several days.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import orjson

import spanreplay
from helpers.messages_api_server import MessagesAPIServer, reply, text, tool_use

SONNET = "claude-sonnet-4-6"
HAIKU = "claude-haiku-4-5"
UNPRICED = "claude-experimental-9"
NS_PER_DAY = 86_400 * 1_000_000_000


@spanreplay.tool
def lookup_order(order: str) -> dict[str, Any]:
    return {"order": order, "status": "shipped"}


def _turn(client: anthropic.Anthropic, model: str, messages: list[dict[str, Any]]) -> Any:
    return client.messages.create(model=model, max_tokens=512, messages=messages)


def support_agent(client: anthropic.Anthropic, question: str, *, turns: int = 2) -> str:
    """Ask, look the order up, answer: each turn sends the whole conversation so far."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    answer: Any = None
    for turn in range(turns):
        answer = _turn(client, SONNET, messages)
        result = lookup_order(f"A-{turn}")
        messages.append({"role": "assistant", "content": [b.model_dump() for b in answer.content]})
        messages.append({"role": "user", "content": f"lookup said {result}"})
    return str(answer.content[0].text) if answer is not None and answer.content else ""


def looping_agent(client: anthropic.Anthropic, question: str, *, repeats: int) -> None:
    """A bug: the agent ignores the answer and sends the very same request again."""
    messages = [{"role": "user", "content": question}]
    for _ in range(repeats):
        _turn(client, SONNET, messages)


@dataclass
class Fleet:
    """The run ids of a recorded fleet, by role."""

    normal: list[str] = field(default_factory=list)
    loop: str = ""
    growing: str = ""
    triage: list[str] = field(default_factory=list)
    unpriced: str = ""
    legacy: str = ""

    @property
    def all(self) -> list[str]:
        return [*self.normal, self.loop, self.growing, *self.triage, self.unpriced, self.legacy]


def _usage(input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cache_read": cache_read,
        "cache_write": cache_write,
    }


def record_fleet(server: MessagesAPIServer) -> Fleet:
    fleet = Fleet()
    with anthropic.Anthropic(base_url=server.url, api_key="test-key", max_retries=0) as client:
        for n in range(5):
            server.script(
                reply(tool_use("lookup_order", {"order": "A-0"}, f"toolu_{n}"), **_usage(1000, 100, cache_write=200)),
                reply(text("It shipped."), **_usage(150, 150, cache_read=1000)),
            )
            with spanreplay.record(agent="support") as run:
                support_agent(client, f"Where is order {n}?")
            fleet.normal.append(run.run_id)
        server.script(*(reply(text("Let me check."), **_usage(1000, 100)) for _ in range(8)))
        with spanreplay.record(agent="support") as run:
            looping_agent(client, "Where is order 7?", repeats=8)
        fleet.loop = run.run_id
        server.script(*(reply(text(f"Turn {k}."), **_usage(200, 120, cache_read=1000 * 2**k)) for k in range(6)))
        with spanreplay.record(agent="support") as run:
            support_agent(client, "Tell me everything about my orders.", turns=6)
        fleet.growing = run.run_id
        for n in range(3):
            server.script(reply(text("billing"), model=HAIKU, **_usage(300, 50)))
            with spanreplay.record(agent="triage") as run:
                _turn(client, HAIKU, [{"role": "user", "content": f"Route ticket {n}"}])
            fleet.triage.append(run.run_id)
        server.script(reply(text("billing"), model=UNPRICED, **_usage(400, 40)))
        with spanreplay.record(agent="triage") as run:
            _turn(client, UNPRICED, [{"role": "user", "content": "Route ticket 9"}])
        fleet.unpriced = run.run_id
    with spanreplay.record(agent="legacy") as run:
        # A model call recorded by hand, without usage attributes, as older code did...
        spanreplay.boundary("model", "legacy-llm", {"prompt": "hello"}, lambda: {"text": "hi"})
        # ... and another instrumentation's chat span, without usage either.
        tracer = spanreplay.settings().provider.get_tracer("other.instrumentation")
        with tracer.start_as_current_span(
            "chat other-model", attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "other-model"}
        ):
            pass
    fleet.legacy = run.run_id
    return fleet


def shift_days(directory: Path, run_id: str, days: int) -> None:
    """Move every span of a run by ``days`` days in its trace file (OTLP/JSON lines)."""
    path = directory / f"{run_id}.jsonl"
    lines = []
    for line in path.read_bytes().splitlines():
        if not line.strip():
            continue
        document = orjson.loads(line)
        for resource_spans in document["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    for name in ("startTimeUnixNano", "endTimeUnixNano"):
                        if name in span:
                            span[name] = str(int(span[name]) + days * NS_PER_DAY)
        lines.append(orjson.dumps(document))
    path.write_bytes(b"\n".join(lines) + b"\n")


def read_png(path: Path) -> tuple[int, int, list[bytes]]:
    """Width, height and RGBA rows of an 8-bit, non-interlaced PNG (what matplotlib and Chromium write).

    A small decoder, so the picture tests need no imaging library.
    """
    import struct
    import zlib

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    offset, idat = 8, b""
    width = height = channels = 0
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        body = data[offset + 8 : offset + 8 + length]
        offset += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8, depth
            assert interlace == 0, interlace
            assert colour in (2, 6), colour
            channels = 4 if colour == 6 else 3
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = width * channels
    rows: list[bytes] = []
    previous = bytearray(stride)
    position = 0
    for _ in range(height):
        kind, line = raw[position], bytearray(raw[position + 1 : position + 1 + stride])
        position += 1 + stride
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif kind == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, previous, strict=True))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = previous[i]
                c = previous[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        rows.append(bytes(line) if channels == 4 else _rgba(bytes(line)))
        previous = line
    return width, height, rows


def _rgba(rgb: bytes) -> bytes:
    out = bytearray()
    for i in range(0, len(rgb), 3):
        out += rgb[i : i + 3] + b"\xff"
    return bytes(out)


def count_colour(
    rows: list[bytes], colour: str, *, tolerance: int = 24, region: tuple[int, int, int, int] | None = None
) -> int:
    """Pixels within ``tolerance`` of ``colour`` (``#rrggbb``), in ``region`` (x0, y0, x1, y1) if given."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    x0, y0, x1, y1 = region or (0, 0, len(rows[0]) // 4, len(rows))
    found = 0
    for row in rows[y0:y1]:
        for x in range(x0, x1):
            pr, pg, pb = row[4 * x], row[4 * x + 1], row[4 * x + 2]
            if abs(pr - r) <= tolerance and abs(pg - g) <= tolerance and abs(pb - b) <= tolerance:
                found += 1
    return found

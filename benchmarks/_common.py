"""Shared helpers: interleaved timing with medians, figures, and the output table.

Every benchmark measures its subject and its baseline in the same process, one
after the other inside each repeat, so a machine that slows down (another job,
frequency scaling) slows both sides alike and the ratio stays meaningful.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import string
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

# A case runs one batch of its subject and returns the nanoseconds its hot loop took
# (measured with time.perf_counter_ns by the case itself, so per-batch set-up such as
# opening a run stays outside the figure).
Case = Callable[[], int]


@dataclass(frozen=True)
class Figure:
    """One reported number."""

    benchmark: str
    metric: str
    value: float
    unit: str
    goal: str = ""
    met: bool | None = None
    note: str = ""


def interleaved(cases: dict[str, Case], *, repeats: int, warmup: int = 1) -> dict[str, list[int]]:
    """Run every case ``warmup`` times untimed, then ``repeats`` rounds of all cases.

    The order of the cases rotates from round to round, so no case always runs
    right after the same neighbour (whose garbage it would collect).
    """
    names = list(cases)
    for _ in range(warmup):
        for name in names:
            cases[name]()
    samples: dict[str, list[int]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            gc.collect()
            samples[name].append(cases[name]())
    return samples


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def spread(values: Sequence[float]) -> float:
    """(max - min) / median: how noisy the repeats were."""
    mid = median(values)
    return (max(values) - min(values)) / mid if mid else 0.0


def noise(values: Sequence[float]) -> str:
    """The best repeat and the spread, for a note beside a median."""
    return f"best {format_value(min(values))}, spread {spread(values):.0%}"


def timed(name: str, metric: str, samples: Sequence[float], unit: str = "us/call") -> Figure:
    """The row for a timed case: its median, with its best repeat and spread as the note."""
    return Figure(name, metric, median(samples), unit, note=noise(samples))


def peer_and_count(
    name: str, us: dict[str, list[float]], ours: str, metric: str, rewind_note: str, *, calls: int, repeats: int
) -> list[Figure]:
    """The rows that compare case ``ours`` with agent-rewind's (case ``agent_rewind``), and the call count.

    ``metric`` names agent-rewind's figure; without agent-rewind installed it is
    reported as not measured, with ``rewind_note`` saying why.
    """
    figures: list[Figure] = []
    if "agent_rewind" in us:
        peer = median(us["agent_rewind"])
        figures.append(Figure(name, metric, peer, "us/call", note="peer; " + noise(us["agent_rewind"])))
        figures.append(
            Figure(
                name,
                "ratio spanreplay / agent-rewind",
                median(us[ours]) / peer,
                "x",
                note=f"best/best {min(us[ours]) / min(us['agent_rewind']):.2f}x",
            )
        )
    else:
        figures.append(Figure(name, metric, float("nan"), "us/call", note=rewind_note))
    figures.append(Figure(name, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"))
    return figures


def text_of_size(size: int, seed: int) -> str:
    """Deterministic word-like ASCII text of exactly ``size`` characters."""
    rng = random.Random(seed)
    words: list[str] = []
    length = 0
    while length < size:
        word = "".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9)))
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def parse_args(description: str, argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (for run_all.py)")
    parser.add_argument("--quick", action="store_true", help="fewer calls and repeats: a smoke run, not a measurement")
    parser.add_argument(
        "--accelerate",
        choices=("on", "off", "both"),
        default="on",
        help="the accelerators (configure(accelerate=)): on, off, or both side by side in one run "
        "(the benchmarks that have a spanreplay path they change)",
    )
    return parser.parse_args(argv)


def emit(figures: Sequence[Figure], *, as_json: bool) -> None:
    if as_json:
        json.dump([asdict(f) for f in figures], sys.stdout)
        sys.stdout.write("\n")
    else:
        print(table(figures))


def format_value(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def table(figures: Sequence[Figure]) -> str:
    rows = [("benchmark", "metric", "value", "unit", "goal", "met", "note")]
    for f in figures:
        met = "" if f.met is None else ("yes" if f.met else "NO")
        rows.append((f.benchmark, f.metric, format_value(f.value), f.unit, f.goal, met, f.note))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        cells = [cell.rjust(widths[i]) if i == 2 else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# The 1 KB tool call of the record and replay benchmarks: its input encodes to
# {"query": "..."} of 1,024 bytes and its output to {"text": "..."} of 1,024 bytes.
QUERY = text_of_size(1024 - len('{"query":""}'), seed=1)
RESULT = {"text": text_of_size(1024 - len('{"text":""}'), seed=2)}


def lookup_plain(query: str) -> dict[str, str]:
    """The tool's body: returns a prepared 1 KB answer, so the figures time the wrapping."""
    return RESULT


def conversation(size: int = 40_000) -> list[dict[str, Any]]:
    """Alternating turns of plausible support chat, about ``size`` bytes of JSON."""
    messages: list[dict[str, Any]] = []
    n = 0
    while len(json.dumps(messages)) < size:
        role = "user" if n % 2 == 0 else "assistant"
        text = f"Turn {n}: " + "the parcel for order A-17 left the depot and the customer asks when it arrives. " * 6
        messages.append({"role": role, "content": text})
        n += 1
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": "And now?"})
    return messages

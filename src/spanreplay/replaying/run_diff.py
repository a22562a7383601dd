"""Two runs compared step by step: what ``spanreplay diff`` prints and ``diff_runs()`` returns.

Steps are paired by call id, the name a call keeps whatever was called around it
(``tool:search#1``), so a step added or dropped in one run does not shift every
pairing after it. A pair differs in its call (kind or key), its input, its
output or its error; a call id found in one run only is missing from the other.
Timing, trace ids and token counts are not compared: two runs of the same code
never share them. Nor, by default, is what differs between any two runs by its
nature: the outputs of clock, random and uuid steps (a replay serves them, a
second run draws new ones) and the parts of a model call's recorded response
that change on every call whatever the model said (the HTTP headers, with their
date and request id, and the message id). ``compare_volatile=True`` compares those too. Other
fields are left out with ``ignore_paths``, as replay leaves them out of inputs.
Payloads are compared as recorded, that is masked: two runs recorded with
different mask keys hold different pseudonyms for the same value, and the
comparison says so (``masking_differs``).

Tokens and US dollars come from the cost code (``spanreplay.cost.step_costs``),
priced as ``spanreplay cost`` prices them.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

import orjson

from spanreplay import semconv as sc
from spanreplay.model import jsonpath as _jsonpath
from spanreplay.model.events import ErrorInfo, Event, EventLog, RunInfo

if TYPE_CHECKING:
    from spanreplay.cost import PriceTable

__all__ = ["RunCost", "RunDiff", "StepDiff", "diff_runs", "json_lines", "outcome_of"]

Part = Literal["call", "input", "output", "error", "missing"]
# A unified diff longer than this is cut: the rest is in spanreplay show --seq N.
MAX_DIFF_LINES: Final = 80
# What differs between any two model calls, as the Anthropic instrumentation records them
# (``{"attempts": [{"status", "headers", "body" | "events"}]}``): left out unless compare_volatile.
MODEL_RESPONSE_NOISE: Final = (
    "attempts[*].headers",
    "attempts[*].body.id",
    "attempts[*].events[*].data.message.id",
)
# Steps whose output differs between any two runs (a new instant, a new draw): not compared unless compare_volatile.
VOLATILE_KINDS: Final = (sc.KIND_CLOCK, sc.KIND_RANDOM, sc.KIND_UUID)


@dataclass(frozen=True, slots=True)
class StepDiff:
    """One call id whose steps differ: ``a`` and ``b`` are its step in each run (None: missing there)."""

    call_id: str
    a: Event | None
    b: Event | None
    parts: tuple[Part, ...]
    # The parsed ignore paths, left out of inputs and outputs before they are compared and shown.
    ignored: tuple[tuple[str | int, ...], ...] = ()

    @property
    def seq(self) -> int:
        """Where it sits: its seq in run A, or in run B when A lacks it."""
        step = self.a if self.a is not None else self.b
        assert step is not None
        return step.seq

    @property
    def step(self) -> Event:
        step = self.a if self.a is not None else self.b
        assert step is not None
        return step

    def describe(self) -> str:
        """``seq 3 tool 'search' (call id tool:search#1): output differs``."""
        step = self.step
        where = f"{step.kind} {step.key!r} (call id {self.call_id})"
        if self.a is None:
            return f"B seq {step.seq} {where}: missing in run A"
        if self.b is None:
            return f"A seq {step.seq} {where}: missing in run B"
        seqs = f"seq {self.a.seq}" if self.a.seq == self.b.seq else f"A seq {self.a.seq} / B seq {self.b.seq}"
        return f"{seqs} {where}: {', '.join(self.parts)} differ{'s' if len(self.parts) == 1 else ''}"

    def payload(self, part: Part, side: Literal["a", "b"]) -> Any:
        """The compared value of ``part`` on one side, as JSON (None where the step is missing)."""
        step = self.a if side == "a" else self.b
        if step is None:
            return None
        if part == "call":
            return {"kind": step.kind, "key": step.key}
        if part == "input":
            return _pruned(step.input, self.ignored)
        if part == "output":
            return _pruned(step.output, self.ignored)
        if part == "error":
            return _error_value(step.error)
        return step_value(step)

    def unified(self, part: Part, *, limit: int = MAX_DIFF_LINES) -> str:
        """A unified diff of ``part`` (``-`` run A, ``+`` run B), at most ``limit`` lines."""
        a_lines = json_lines(self.payload(part, "a")) if self.a is not None else []
        b_lines = json_lines(self.payload(part, "b")) if self.b is not None else []
        diff = list(difflib.unified_diff(a_lines, b_lines, f"run A {part}", f"run B {part}", lineterm="", n=2))
        if len(diff) > limit:
            diff = [*diff[:limit], f"... ({len(diff) - limit} more diff lines)"]
        return "\n".join(diff)


@dataclass(frozen=True, slots=True)
class RunCost:
    """A run's model calls, tokens and US dollars; ``complete`` is False when some call has no price or usage."""

    model_calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    complete: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_calls": self.model_calls,
            "tokens": self.tokens,
            "usd": round(self.usd, 10),
            "complete": self.complete,
        }


@dataclass(frozen=True, slots=True)
class RunDiff:
    """Runs A and B compared.

    Attributes:
        a, b: the two runs.
        steps: the call ids whose steps differ, in the order they happened (A's seq, else B's).
        matched: how many call ids have the same step in both runs.
        cost_a, cost_b: each run's model calls, tokens and US dollars.
        left_out: the JSON paths left out of the model calls' outputs (empty with compare_volatile).
        uncompared_kinds: the kinds of step whose outputs were not compared (empty with compare_volatile).
    """

    a: EventLog
    b: EventLog
    steps: tuple[StepDiff, ...]
    matched: int
    cost_a: RunCost
    cost_b: RunCost
    left_out: tuple[str, ...] = ()
    uncompared_kinds: tuple[str, ...] = ()

    @property
    def outcome_a(self) -> str:
        return outcome_of(self.a.run)

    @property
    def outcome_b(self) -> str:
        return outcome_of(self.b.run)

    @property
    def same_outcome(self) -> bool:
        return self.outcome_a == self.outcome_b

    @property
    def same(self) -> bool:
        """The runs match step for step and end the same way."""
        return not self.steps and self.same_outcome

    @property
    def first(self) -> StepDiff | None:
        return self.steps[0] if self.steps else None

    @property
    def masking_differs(self) -> bool:
        """The runs were masked differently, so their masked values differ even where the originals agree."""
        return (self.a.run.masking or "off") != (self.b.run.masking or "off")

    def counts(self) -> dict[str, int]:
        """How many differing steps differ in each part (a step may count under several)."""
        counts = dict.fromkeys(("call", "input", "output", "error", "missing_in_a", "missing_in_b"), 0)
        for step in self.steps:
            if step.a is None:
                counts["missing_in_a"] += 1
            elif step.b is None:
                counts["missing_in_b"] += 1
            for part in step.parts:
                if part != "missing":
                    counts[part] += 1
        return counts

    def to_dict(self) -> dict[str, Any]:
        first = self.first
        return {
            "same": self.same,
            "run_a": _run_value(self.a.run, self.cost_a, len(self.a)),
            "run_b": _run_value(self.b.run, self.cost_b, len(self.b)),
            "matched_steps": self.matched,
            "differing_steps": len(self.steps),
            "counts": self.counts(),
            "same_outcome": self.same_outcome,
            "masking_differs": self.masking_differs,
            "model_outputs_left_out": list(self.left_out),
            "outputs_not_compared": list(self.uncompared_kinds),
            "tokens_delta": self.cost_b.tokens - self.cost_a.tokens,
            "usd_delta": round(self.cost_b.usd - self.cost_a.usd, 10),
            "first": None if first is None else _first_value(first),
            "steps": [_step_diff_value(step) for step in self.steps],
        }


def diff_runs(
    a: EventLog,
    b: EventLog,
    *,
    ignore_paths: Sequence[str] = (),
    compare_volatile: bool = False,
    prices: PriceTable | None = None,
) -> RunDiff:
    """Compare run ``a`` with run ``b`` step by step (see the module docstring).

    Args:
        a, b: the runs, as ``spanreplay.load()`` returns them; from one source or two.
        ignore_paths: JSON paths (``"id"``, ``"messages[*].timestamp"``) left out of every
            input and output before they are compared.
        compare_volatile: compare clock, random and uuid outputs, and model calls' outputs whole
            (headers and message ids included).
        prices: the price table for the US dollars; by default the one ``spanreplay cost`` uses.
    """
    ignored = tuple(_jsonpath.parse(path) for path in ignore_paths)
    left_out = () if compare_volatile else MODEL_RESPONSE_NOISE
    uncompared = () if compare_volatile else VOLATILE_KINDS
    model_ignored = ignored + tuple(_jsonpath.parse(path) for path in left_out)

    def ignored_in(step: Event) -> tuple[tuple[str | int, ...], ...]:
        return model_ignored if step.kind == sc.KIND_MODEL else ignored

    b_steps = {event.call_id: event for event in b}
    a_ids = {event.call_id for event in a}
    found: list[StepDiff] = []
    matched = 0
    for step_a in a:
        step_b = b_steps.get(step_a.call_id)
        paths = ignored_in(step_a)
        parts: tuple[Part, ...] = (
            ("missing",)
            if step_b is None
            else _differing_parts(step_a, step_b, paths, compare_output=step_a.kind not in uncompared)
        )
        if parts:
            found.append(StepDiff(step_a.call_id, step_a, step_b, parts, paths))
        else:
            matched += 1
    found.extend(
        StepDiff(step.call_id, None, step, ("missing",), ignored_in(step)) for step in b if step.call_id not in a_ids
    )
    found.sort(key=lambda d: (d.seq, d.a is None))
    if prices is None:
        from spanreplay.cost import price_table

        prices = price_table()
    return RunDiff(a, b, tuple(found), matched, run_cost(a, prices), run_cost(b, prices), left_out, uncompared)


def run_cost(log: EventLog, prices: PriceTable) -> RunCost:
    """A run's model calls, tokens and dollars, each step priced as ``spanreplay report`` prices it."""
    from spanreplay.cost import step_costs

    costs = step_costs(log, prices).values()
    tokens = sum(cost.usage.total for cost in costs if cost.usage is not None)
    usd = sum(cost.usd for cost in costs if cost.usd is not None)
    complete = all(cost.usd is not None for cost in costs)
    return RunCost(len(costs), tokens, usd, complete)


def outcome_of(run: RunInfo) -> str:
    """How a run ended, in words: ``ok``, ``crashed``, ``error: ValueError: bad input``."""
    return f"{run.status}: {run.error}" if run.error is not None else run.status


def json_lines(value: Any) -> list[str]:
    """``value`` as indented JSON with sorted keys, one line per list item: what the diffs compare."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode().splitlines()


def step_value(step: Event) -> dict[str, Any]:
    return {
        "seq": step.seq,
        "call_id": step.call_id,
        "kind": step.kind,
        "key": step.key,
        "input": step.input,
        "output": step.output,
        "error": _error_value(step.error),
    }


def _differing_parts(
    a: Event, b: Event, ignored: tuple[tuple[str | int, ...], ...], *, compare_output: bool
) -> tuple[Part, ...]:
    parts: list[Part] = []
    if (a.kind, a.key) != (b.kind, b.key):
        parts.append("call")
    if not _same_json(a.input_json, b.input_json, ignored):
        parts.append("input")
    if compare_output and (a.output_types != b.output_types or not _same_json(a.output_json, b.output_json, ignored)):
        parts.append("output")
    if _error_value(a.error) != _error_value(b.error):
        parts.append("error")
    return tuple(parts)


def _same_json(a: bytes | None, b: bytes | None, ignored: tuple[tuple[str | int, ...], ...]) -> bool:
    if a == b:
        return True
    if a is None or b is None:
        return False
    # The same value written another way (key order, spacing) by another writer or store. Compared
    # as canonical JSON, not as Python values: true == 1 and 1 == 1.0 in Python, not in JSON.
    return _canonical(orjson.loads(a), ignored) == _canonical(orjson.loads(b), ignored)


def _canonical(value: Any, ignored: tuple[tuple[str | int, ...], ...]) -> bytes:
    return orjson.dumps(_pruned(value, ignored), option=orjson.OPT_SORT_KEYS)


def _pruned(value: Any, ignored: tuple[tuple[str | int, ...], ...]) -> Any:
    for path in ignored:
        value = _jsonpath.delete(value, path)
    return value


def _error_value(error: ErrorInfo | None) -> dict[str, Any] | None:
    # The module is left out, as replay leaves it out: a script run as __main__ names its own types so.
    return None if error is None else {"type": error.type_name, "message": error.message}


def _run_value(run: RunInfo, cost: RunCost, steps: int) -> dict[str, Any]:
    facts = {"run_id": run.run_id, "agent": run.agent, "outcome": outcome_of(run), "status": run.status}
    return {**facts, "steps": steps, **cost.to_dict()}


def _first_value(step: StepDiff) -> dict[str, Any]:
    return {
        **_step_diff_value(step),
        "a": None if step.a is None else step_value(step.a),
        "b": None if step.b is None else step_value(step.b),
        "diff": {part: step.unified(part) for part in step.parts},
    }


def _step_diff_value(step: StepDiff) -> dict[str, Any]:
    return {
        "call_id": step.call_id,
        "kind": step.step.kind,
        "key": step.step.key,
        "seq_a": None if step.a is None else step.a.seq,
        "seq_b": None if step.b is None else step.b.seq,
        "differs": list(step.parts),
        "missing_in": "a" if step.a is None else "b" if step.b is None else None,
    }

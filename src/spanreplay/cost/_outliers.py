"""Runs that burned far more tokens than their agent usually does, and why.

A run is an outlier when its tokens exceed ``factor`` (3 by default) times the
median of the runs of the same agent. Each one gets the likely causes, found
in its model calls in seq order:

- a retry that looped: the same request (equal input digests) sent again and
  again, three times or more;
- a context stuffed with history: the prompt growing call after call, four
  calls or more, to at least twice its size;
- otherwise, many more calls than the agent's median, or one very large call.

Each cause names the seq where it started, for ``spanreplay show ... --seq N``.
"""

from __future__ import annotations

import shlex
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ._calls import RunFacts
from ._totals import PricedCall, Totals

__all__ = ["DEFAULT_FACTOR", "Cause", "Outlier", "causes_of", "find_outliers", "replay_command", "show_command"]

# A run is an outlier when it used this many times its agent's median tokens.
DEFAULT_FACTOR: Final = 3.0
# Two identical requests are an ordinary retry; three are a loop.
LOOP_MIN_REPEATS: Final = 3
# Growth worth naming: this many calls in a row, each prompt larger than the last...
GROWTH_MIN_CALLS: Final = 4
# ... ending at least this many times larger than it started.
GROWTH_MIN_RATIO: Final = 2.0

CauseKind = Literal["retry_loop", "growing_context", "many_calls", "large_call"]


@dataclass(frozen=True, slots=True)
class Cause:
    """A likely reason a run burned its tokens, and the seq where it started."""

    kind: CauseKind
    seq: int | None
    summary: str
    seqs: tuple[int, ...] = ()
    tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "seq": self.seq, "summary": self.summary, "seqs": list(self.seqs)}


@dataclass(frozen=True, slots=True)
class Outlier:
    """A run whose tokens exceed ``factor`` times its agent's median run."""

    run: RunFacts
    totals: Totals
    median_tokens: float
    causes: tuple[Cause, ...]

    @property
    def ratio(self) -> float:
        return self.totals.total_tokens / self.median_tokens if self.median_tokens else float("inf")

    @property
    def seq(self) -> int | None:
        """Where the first cause started: the step to look at."""
        return next((c.seq for c in self.causes if c.seq is not None), None)

    def to_dict(self, source: str) -> dict[str, Any]:
        started = self.run.started
        return {
            "run_id": self.run.run_id,
            "agent": self.run.agent,
            "started": started.isoformat() if started else None,
            "tokens": self.totals.total_tokens,
            "median_tokens": self.median_tokens,
            "ratio": round(self.ratio, 2),
            "usd": round(self.totals.usd, 10),
            "calls": self.totals.calls,
            "seq": self.seq,
            "causes": [c.to_dict() for c in self.causes],
            "show": show_command(source, self.run.run_id, self.seq),
            "replay": replay_command(source, self.run.run_id),
        }


def show_command(source: str, run_id: str, seq: int | None) -> str:
    """``spanreplay show SOURCE RUN --seq N``: the step, its full input and output."""
    command = f"spanreplay show {shlex.quote(source)} {shlex.quote(run_id)}"
    return command + (f" --seq {seq}" if seq is not None else "")


def replay_command(source: str, run_id: str, entry: str | None = None) -> str:
    """``spanreplay replay SOURCE RUN --entry MODULE:FUNCTION``: the run against the current code."""
    return f"spanreplay replay {shlex.quote(source)} {shlex.quote(run_id)} --entry {entry or 'MODULE:FUNCTION'}"


def find_outliers(
    runs: Mapping[str, RunFacts], calls: Mapping[str, Sequence[PricedCall]], *, factor: float = DEFAULT_FACTOR
) -> list[Outlier]:
    """The runs over ``factor`` times their agent's median tokens, most excessive first.

    Only spanreplay runs with model calls count; the median is over the runs of
    the same agent in ``calls``.
    """
    totals: dict[str, Totals] = {}
    for run_id, items in calls.items():
        facts = runs.get(run_id)
        if facts is None or not facts.recorded or not items:
            continue
        total = Totals()
        for item in items:
            total.add(item)
        totals[run_id] = total
    by_agent: dict[str, list[str]] = {}
    for run_id in totals:
        by_agent.setdefault(runs[run_id].agent, []).append(run_id)
    found: list[Outlier] = []
    for members in by_agent.values():
        median = statistics.median(totals[r].total_tokens for r in members)
        median_calls = statistics.median(totals[r].calls for r in members)
        if median <= 0:
            continue
        for run_id in members:
            if totals[run_id].total_tokens > factor * median:
                causes = causes_of(calls[run_id], median_calls=median_calls, factor=factor)
                found.append(Outlier(runs[run_id], totals[run_id], float(median), causes))
    found.sort(key=lambda o: (-o.ratio, o.run.run_id))
    return found


def causes_of(items: Sequence[PricedCall], *, median_calls: float, factor: float = DEFAULT_FACTOR) -> tuple[Cause, ...]:
    """The likely causes of a run's tokens, the most costly first."""
    ordered = sorted(items, key=lambda p: (p.call.seq if p.call.seq is not None else 0, p.call.start_ns))
    causes = [c for c in (_retry_loop(ordered), _growing_context(ordered)) if c is not None]
    if causes:
        return tuple(sorted(causes, key=lambda c: -c.tokens))
    many = _many_calls(ordered, median_calls, factor)
    if many is not None:
        return (many,)
    large = _large_call(ordered)
    return (large,) if large is not None else ()


def _tokens(item: PricedCall) -> int:
    return item.call.usage.total if item.call.usage is not None else 0


def _seqs(items: Sequence[PricedCall]) -> tuple[int, ...]:
    return tuple(i.call.seq for i in items if i.call.seq is not None)


def _listed(seqs: Sequence[int], shown: int = 6) -> str:
    text = ", ".join(map(str, seqs[:shown]))
    return text + (f" and {len(seqs) - shown} more" if len(seqs) > shown else "")


def _retry_loop(items: Sequence[PricedCall]) -> Cause | None:
    same: dict[str, list[PricedCall]] = {}
    for item in items:
        if item.call.input_digest is not None:
            same.setdefault(item.call.input_digest, []).append(item)
    repeated = max(same.values(), key=len, default=[])
    if len(repeated) < LOOP_MIN_REPEATS:
        return None
    seqs = _seqs(repeated)
    tokens = sum(_tokens(i) for i in repeated)
    first = seqs[0] if seqs else None
    return Cause(
        "retry_loop",
        first,
        f"a retry that looped: the same model call ({repeated[0].call.model}) was made {len(repeated)} times "
        f"(seq {_listed(seqs)}), {tokens:,} tokens",
        seqs,
        tokens,
    )


def _growing_context(items: Sequence[PricedCall]) -> Cause | None:
    known = [i for i in items if i.call.usage is not None]
    best: tuple[int, int] = (0, 0)  # [start, end) of the longest run of growing prompts
    start = 0
    for index in range(1, len(known) + 1):
        grew = index < len(known) and _prompt(known[index]) > _prompt(known[index - 1])
        if not grew:
            if index - start > best[1] - best[0]:
                best = (start, index)
            start = index
    streak = known[best[0] : best[1]]
    if len(streak) < GROWTH_MIN_CALLS or _prompt(streak[-1]) < GROWTH_MIN_RATIO * max(_prompt(streak[0]), 1):
        return None
    seqs = _seqs(streak)
    tokens = sum(_tokens(i) for i in streak)
    return Cause(
        "growing_context",
        seqs[0] if seqs else None,
        f"a context stuffed with history: the prompt grew call after call, from {_prompt(streak[0]):,} tokens "
        f"at seq {seqs[0] if seqs else '?'} to {_prompt(streak[-1]):,} at seq {seqs[-1] if seqs else '?'} over "
        f"{len(streak)} calls, {tokens:,} tokens",
        seqs,
        tokens,
    )


def _prompt(item: PricedCall) -> int:
    return item.call.usage.prompt if item.call.usage is not None else 0


def _many_calls(items: Sequence[PricedCall], median_calls: float, factor: float) -> Cause | None:
    if median_calls <= 0 or len(items) <= factor * median_calls:
        return None
    usual = int(median_calls)
    beyond = items[usual:]
    seqs = _seqs(beyond)
    return Cause(
        "many_calls",
        seqs[0] if seqs else None,
        f"{len(items)} model calls where this agent's median run makes {median_calls:g}; the calls past that "
        f"start at seq {seqs[0] if seqs else '?'}",
        seqs,
        sum(_tokens(i) for i in beyond),
    )


def _large_call(items: Sequence[PricedCall]) -> Cause | None:
    if not items:
        return None
    biggest = max(items, key=_tokens)
    total = sum(_tokens(i) for i in items) or 1
    seq = biggest.call.seq
    return Cause(
        "large_call",
        seq,
        f"one large call: seq {seq if seq is not None else '?'} ({biggest.call.model}) used {_tokens(biggest):,} "
        f"tokens, {100 * _tokens(biggest) // total}% of the run",
        (seq,) if seq is not None else (),
        _tokens(biggest),
    )

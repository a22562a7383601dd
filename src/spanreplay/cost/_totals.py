"""Pricing model calls and adding them up by run, agent, model, day or month.

A call's US dollars come from the price table in force (``price_table()``,
plus ``--prices FILE``), on the day the call was made. A model the table does
not know is priced with the span's own recorded ``gen_ai.usage.cost`` when it
has one; otherwise the call stays unpriced, and the totals say so (their USD
leaves it out, ``complete`` is False, ``unpriced_models`` lists it) instead of
counting it as free. A call whose span carries no usage is a call with unknown
tokens, counted and reported, never dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

from ._calls import CallSource, ModelCall, RunFacts
from ._prices import PriceTable

__all__ = ["GROUPINGS", "Group", "PricedCall", "Totals", "group_calls", "price_calls", "run_totals"]

# What cost totals can be grouped by (`spanreplay cost --by`).
Grouping = Literal["run", "agent", "model", "day", "month"]
# Every grouping, in the order `spanreplay cost` offers them.
GROUPINGS: Final[tuple[Grouping, ...]] = ("run", "agent", "model", "day", "month")
PricedBy = Literal["table", "recorded", "unpriced", "no usage"]


@dataclass(frozen=True, slots=True)
class PricedCall:
    """A model call and what it cost: ``usd`` is None when it cannot be priced."""

    call: ModelCall
    usd: float | None
    priced_by: PricedBy


def price_calls(calls: Iterable[ModelCall], table: PriceTable) -> list[PricedCall]:
    """Each call priced with ``table`` on the day it was made."""
    priced = []
    for call in calls:
        if call.usage is None:
            priced.append(PricedCall(call, None, "no usage"))
            continue
        usd = table.usd(call.model, call.usage, when=call.started)
        if usd is not None:
            priced.append(PricedCall(call, usd, "table"))
        elif call.recorded_cost is not None:
            priced.append(PricedCall(call, call.recorded_cost, "recorded"))
        else:
            priced.append(PricedCall(call, None, "unpriced"))
    return priced


@dataclass(slots=True)
class Totals:
    """Model calls, tokens and US dollars of a group of calls.

    ``input_tokens`` is the uncached input: with the cache reads and writes it
    makes the prompt. ``usd`` sums the calls that have a price; ``complete`` is
    False when some call has no price or no known tokens.
    """

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    usd: float = 0.0
    calls_without_usage: int = 0
    unpriced_calls: int = 0
    # Calls to models the table does not know, priced from the span's recorded cost.
    recorded_cost_calls: int = 0
    unpriced_models: dict[str, int] = field(default_factory=dict)

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @property
    def complete(self) -> bool:
        return not self.unpriced_calls and not self.calls_without_usage

    def add(self, priced: PricedCall) -> None:
        self.calls += 1
        usage = priced.call.usage
        if usage is None:
            self.calls_without_usage += 1
            return
        self.input_tokens += usage.input
        self.output_tokens += usage.output
        self.cache_read_tokens += usage.cache_read
        self.cache_write_tokens += usage.cache_write
        if priced.usd is None:
            self.unpriced_calls += 1
            model = priced.call.model
            self.unpriced_models[model] = self.unpriced_models.get(model, 0) + 1
        else:
            self.usd += priced.usd
            if priced.priced_by == "recorded":
                self.recorded_cost_calls += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "total_tokens": self.total_tokens,
            "usd": round(self.usd, 10),
            "complete": self.complete,
            "calls_without_usage": self.calls_without_usage,
            "unpriced_calls": self.unpriced_calls,
            "recorded_cost_calls": self.recorded_cost_calls,
            "unpriced_models": dict(sorted(self.unpriced_models.items())),
        }


@dataclass(slots=True)
class Group:
    """One row of ``spanreplay cost``: a run, agent, model, day or month, and its totals."""

    key: str
    totals: Totals = field(default_factory=Totals)
    # For --by run: the run's agent, status and start.
    run: RunFacts | None = None

    def to_dict(self, by: Grouping) -> dict[str, Any]:
        out: dict[str, Any] = {by: self.key}
        if self.run is not None:
            started = self.run.started
            out.update(
                {
                    "agent": self.run.agent,
                    "status": self.run.status,
                    "started": started.isoformat() if started else None,
                }
            )
        out.update(self.totals.to_dict())
        return out


NO_AGENT: Final = "(no agent)"
OUTSIDE_RUNS: Final = "(outside runs)"


def group_key(by: Grouping, priced: PricedCall, runs: Mapping[str, RunFacts]) -> str:
    call = priced.call
    if by == "run":
        return call.run_id
    if by == "model":
        return call.model
    if by == "agent":
        facts = runs.get(call.run_id)
        if facts is not None and not facts.recorded and not facts.agent:
            # Another instrumentation's trace is under the agent `spanreplay runs` lists it by
            # (its instrumentations); calls that make no such run are outside runs.
            return OUTSIDE_RUNS
        return facts.agent if facts is not None and facts.agent else NO_AGENT
    moment = call.started or _run_start(runs.get(call.run_id))
    if moment is None:
        return "unknown"
    return moment.strftime("%Y-%m-%d" if by == "day" else "%Y-%m")


def _run_start(facts: RunFacts | None) -> datetime | None:
    return facts.started if facts is not None else None


def group_calls(source: CallSource, priced: Iterable[PricedCall], by: Grouping) -> list[Group]:
    """The calls added up per ``by``: runs by start, days and months in order, the rest by cost."""
    groups: dict[str, Group] = {}
    for item in priced:
        key = group_key(by, item, source.runs)
        group = groups.get(key)
        if group is None:
            group = groups[key] = Group(key, run=source.runs.get(key) if by == "run" else None)
        group.totals.add(item)
    out = list(groups.values())
    if by == "run":
        out.sort(key=lambda g: (g.run.start_ns if g.run else 0, g.key))
    elif by in ("day", "month"):
        out.sort(key=lambda g: g.key)
    else:
        out.sort(key=lambda g: (-g.totals.usd, -g.totals.total_tokens, g.key))
    return out


def run_totals(source: CallSource, table: PriceTable) -> dict[str, Totals]:
    """Each run's totals (every call of the run, whatever its date): what ``spanreplay runs`` shows."""
    out: dict[str, Totals] = {}
    for item in price_calls(source.calls, table):
        out.setdefault(item.call.run_id, Totals()).add(item)
    return out


def in_window(call: ModelCall, since: datetime | None, until: datetime | None, runs: Mapping[str, RunFacts]) -> bool:
    """Whether a call was made in [since, until); a call with no time goes by its run's start."""
    moment = call.started or _run_start(runs.get(call.run_id))
    if moment is None:
        return since is None and until is None
    if since is not None and moment < since.astimezone(UTC):
        return False
    return until is None or moment < until.astimezone(UTC)

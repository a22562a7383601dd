"""``summarize()``: a source's model calls priced, grouped, totalled, with the outlier runs."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._calls import CallSource, read_calls
from ._outliers import DEFAULT_FACTOR, Outlier, find_outliers
from ._prices import PriceTable, price_table
from ._totals import Group, Grouping, PricedCall, Totals, group_calls, in_window, price_calls

__all__ = ["CostReport", "summarize"]


@dataclass(frozen=True)
class CostReport:
    """What ``spanreplay cost`` prints: groups, the total, the outliers, and the prices used."""

    source: str
    by: Grouping
    since: datetime | None
    until: datetime | None
    prices: PriceTable
    factor: float
    calls: CallSource
    priced: tuple[PricedCall, ...]
    groups: tuple[Group, ...]
    total: Totals
    outliers: tuple[Outlier, ...]

    def grouped(self, by: Grouping) -> list[Group]:
        """The same calls grouped another way (the plot's days, say)."""
        return group_calls(self.calls, self.priced, by)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "by": self.by,
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "prices": {
                "as_of": self.prices.as_of.isoformat() if self.prices.as_of else None,
                "from": self.prices.describe(),
            },
            "groups": [g.to_dict(self.by) for g in self.groups],
            "total": self.total.to_dict(),
            "outlier_factor": self.factor,
            "outliers": [o.to_dict(self.source) for o in self.outliers],
        }


def summarize(
    source: str | os.PathLike[str] | CallSource,
    *,
    by: Grouping = "agent",
    since: datetime | None = None,
    until: datetime | None = None,
    prices: PriceTable | None = None,
    factor: float = DEFAULT_FACTOR,
) -> CostReport:
    """Price and total the model calls of ``source`` made in [since, until), grouped ``by``.

    Args:
        source: a trace file, directory, glob, ``-``, backend URL or Postgres DSN
            (or the calls already read from one).
        by: ``run``, ``agent``, ``model``, ``day`` or ``month`` (UTC).
        prices: the table to price with; the table in force (``price_table()``) by default.
        factor: a run is an outlier above this multiple of its agent's median tokens.
    """
    calls = source if isinstance(source, CallSource) else read_calls(source)
    table = prices if prices is not None else price_table()
    kept = [c for c in calls.calls if in_window(c, since, until, calls.runs)]
    priced = tuple(price_calls(kept, table))
    total = Totals()
    per_run: dict[str, list[PricedCall]] = {}
    for item in priced:
        total.add(item)
        per_run.setdefault(item.call.run_id, []).append(item)
    return CostReport(
        source=calls.name,
        by=by,
        since=since,
        until=until,
        prices=table,
        factor=factor,
        calls=calls,
        priced=priced,
        groups=tuple(group_calls(calls, priced, by)),
        total=total,
        outliers=tuple(find_outliers(calls.runs, per_run, factor=factor)),
    )

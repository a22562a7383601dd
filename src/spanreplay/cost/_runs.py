"""The cost columns of ``spanreplay runs``: each run's calls, tokens and USD, priced like ``spanreplay cost``."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

from spanreplay.errors import ConfigurationError
from spanreplay.model.events import RunSummary
from spanreplay.readers import warn
from spanreplay.sources import SpanSource, open_source

from ._calls import CallCollector, ModelCall, read_calls
from ._prices import PriceTable, builtin_prices, price_table
from ._totals import Totals, price_calls

__all__ = ["runs_with_costs", "with_costs"]


def runs_with_costs(source: str | os.PathLike[str]) -> list[RunSummary]:
    """What ``spanreplay.runs()`` returns: the source's runs with their cost columns filled in.

    A source of spans is read once: the listing hands each span it reads to the
    call collector. Postgres keeps the calls in its own rows, read on their own.
    """
    opened = open_source(source)
    if isinstance(opened, SpanSource):
        calls = CallCollector()
        found = opened.runs(calls.add)
        return with_costs(found, calls.result(opened.name).calls)
    return with_costs(opened.runs(), read_calls(source).calls)


def with_costs(
    found: list[RunSummary], calls: Iterable[ModelCall], table: PriceTable | None = None
) -> list[RunSummary]:
    """``found`` with each run's model calls, tokens and USD filled in from ``calls``."""
    if table is None:
        try:
            table = price_table()
        except ConfigurationError as exc:
            # A listing of runs is no place to stop over a price file: say so, price with the built-in table.
            warn(f"{str(exc).rstrip('.')}; the runs are priced with spanreplay's built-in table.")
            table = builtin_prices()
    totals: dict[str, Totals] = {}
    for item in price_calls(calls, table):
        totals.setdefault(item.call.run_id, Totals()).add(item)
    out = []
    for run in found:
        total = totals.get(run.run_id)
        if total is None:
            out.append(run)
            continue
        out.append(
            dataclasses.replace(
                run,
                model_calls=total.calls,
                tokens=total.total_tokens,
                usd=total.usd,
                unpriced_calls=total.unpriced_calls,
                calls_without_usage=total.calls_without_usage,
            )
        )
    return out

"""Cost attribution from the spans' own usage attributes.

``spanreplay cost SOURCE`` totals model calls, tokens and US dollars per run,
agent, model, day or month, flags the runs that burned far more tokens than
their agent usually does, and says why; ``spanreplay report SOURCE RUN`` draws
one run as a self-contained HTML page. The prices come from one dated table
(``prices.toml``), shared with the Anthropic instrumentor and overridable by a
user file. See docs/cost.md.
"""

from __future__ import annotations

from ._calls import CallSource, ModelCall, RunFacts, read_calls
from ._html import Replayed, render_run, step_costs
from ._outliers import DEFAULT_FACTOR, Cause, Outlier, find_outliers, replay_command, show_command
from ._plot import plot_days
from ._prices import (
    PRICES_ENV,
    LongPrompt,
    ModelPrice,
    PriceTable,
    Usage,
    builtin_prices,
    cost_usd,
    load_prices,
    model_key,
    price_table,
    prices,
    set_prices,
)
from ._runs import runs_with_costs, with_costs
from ._summary import CostReport, summarize
from ._totals import GROUPINGS, Group, Grouping, PricedCall, Totals, price_calls, run_totals

__all__ = [
    "DEFAULT_FACTOR",
    "GROUPINGS",
    "PRICES_ENV",
    "CallSource",
    "Cause",
    "CostReport",
    "Group",
    "Grouping",
    "LongPrompt",
    "ModelCall",
    "ModelPrice",
    "Outlier",
    "PriceTable",
    "PricedCall",
    "Replayed",
    "RunFacts",
    "Totals",
    "Usage",
    "builtin_prices",
    "cost_usd",
    "find_outliers",
    "load_prices",
    "model_key",
    "plot_days",
    "price_calls",
    "price_table",
    "prices",
    "read_calls",
    "render_run",
    "replay_command",
    "run_totals",
    "runs_with_costs",
    "set_prices",
    "show_command",
    "step_costs",
    "summarize",
    "with_costs",
]

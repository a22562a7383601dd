"""Cost attribution from the spans' own usage attributes.

``spanreplay cost SOURCE`` totals model calls, tokens and US dollars per run,
agent, model, day or month, flags the runs that burned far more tokens than
their agent usually does, and says why; ``spanreplay report SOURCE RUN`` draws
one run as a self-contained HTML page. The prices come from one dated table
(``prices.toml``), shared with the Anthropic instrumentor and overridable by a
user file. See docs/cost.md.
"""

from __future__ import annotations

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

__all__ = [
    "PRICES_ENV",
    "LongPrompt",
    "ModelPrice",
    "PriceTable",
    "Usage",
    "builtin_prices",
    "cost_usd",
    "load_prices",
    "model_key",
    "price_table",
    "prices",
    "set_prices",
]

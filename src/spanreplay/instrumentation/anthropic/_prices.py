"""What a Messages call costs: spanreplay's one price table, in ``spanreplay.cost``.

Kept here so ``from spanreplay.instrumentation.anthropic import set_prices`` goes
on working; the table, its dates and its override files live in
``spanreplay/cost/prices.toml`` and ``spanreplay.cost._prices``.
"""

from __future__ import annotations

from collections.abc import Mapping

from spanreplay.cost._prices import ModelPrice, builtin_prices, cost_usd, prices, set_prices

__all__ = ["DEFAULT_PRICES", "ModelPrice", "cost_usd", "prices", "set_prices"]

# The built-in table, by model key (the SPANREPLAY_PRICES file and set_prices() go on top).
DEFAULT_PRICES: Mapping[str, ModelPrice] = builtin_prices().models

"""What a Messages call costs in US dollars: a price table users can override.

Prices are list prices per million tokens. Cache writes cost 1.25x the input
price for the 5-minute cache and 2x for the 1-hour cache; cache reads cost 0.1x,
as Anthropic's pricing page states. A model matches the longest key that its
name starts with, so dated snapshots (``claude-haiku-4-5-20251001``) find their
family. A model with no matching key gets no cost attribute rather than a guess.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DEFAULT_PRICES", "ModelPrice", "cost_usd", "prices", "set_prices"]


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """US dollars per million tokens. Cache prices default to the documented multiples of ``input``."""

    input: float
    output: float
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    cache_read: float | None = None

    def cost(self, usage: Mapping[str, Any]) -> float:
        """The cost of one call's ``usage`` (the API's usage object, as JSON)."""
        uncached = _int(usage.get("input_tokens"))
        read = _int(usage.get("cache_read_input_tokens"))
        written = _int(usage.get("cache_creation_input_tokens"))
        breakdown = usage.get("cache_creation")
        written_1h = 0
        if isinstance(breakdown, Mapping):
            written_1h = _int(breakdown.get("ephemeral_1h_input_tokens"))
        written_5m = max(written - written_1h, 0)
        dollars = (
            uncached * self.input
            + written_5m * (self.cache_write_5m if self.cache_write_5m is not None else self.input * 1.25)
            + written_1h * (self.cache_write_1h if self.cache_write_1h is not None else self.input * 2)
            + read * (self.cache_read if self.cache_read is not None else self.input * 0.1)
            + _int(usage.get("output_tokens")) * self.output
        )
        return dollars / 1_000_000


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# List prices when this table was written. Override them with set_prices() or
# AnthropicInstrumentor().instrument(prices={...}) when yours differ (batch,
# negotiated or newer prices).
DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    "claude-opus-4-5": ModelPrice(5.0, 25.0),
    "claude-opus-4-1": ModelPrice(15.0, 75.0),
    "claude-opus-4-0": ModelPrice(15.0, 75.0),
    "claude-opus-4-2025": ModelPrice(15.0, 75.0),
    "claude-sonnet-4": ModelPrice(3.0, 15.0),
    "claude-3-7-sonnet": ModelPrice(3.0, 15.0),
    "claude-3-5-sonnet": ModelPrice(3.0, 15.0),
    "claude-haiku-4-5": ModelPrice(1.0, 5.0),
    "claude-3-5-haiku": ModelPrice(0.8, 4.0),
    "claude-3-haiku": ModelPrice(0.25, 1.25),
    "claude-3-opus": ModelPrice(15.0, 75.0),
}

_lock = threading.Lock()
_prices: dict[str, ModelPrice] = dict(DEFAULT_PRICES)


def set_prices(table: Mapping[str, ModelPrice], *, replace: bool = False) -> None:
    """Add or change model prices (``replace=True`` drops the built-in ones first)."""
    for key, price in table.items():
        if not isinstance(price, ModelPrice):
            raise TypeError(f"The price of {key!r} is {price!r}; give a ModelPrice(input=..., output=...) in USD/MTok.")
    with _lock:
        if replace:
            _prices.clear()
        _prices.update(table)


def prices() -> dict[str, ModelPrice]:
    """A copy of the price table in force."""
    with _lock:
        return dict(_prices)


def cost_usd(model: str, usage: Mapping[str, Any]) -> float | None:
    """The cost of a call to ``model`` with ``usage``, or None when the model has no price."""
    with _lock:
        best = max((key for key in _prices if model.startswith(key)), key=len, default=None)
        price = _prices.get(best) if best is not None else None
    return price.cost(usage) if price is not None else None

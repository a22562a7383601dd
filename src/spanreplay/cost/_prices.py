"""What a model call costs: the dated price table, user overrides, and one pricing function.

The table lives in ``prices.toml`` beside this module: US dollars per million
tokens for each Claude model, with its 5-minute and 1-hour cache writes, cache
reads, the Message Batches discount, long-prompt bands and earlier prices. A
user file of the same form (TOML or JSON) overrides or extends it: passed to
``spanreplay cost --prices FILE``, named by ``SPANREPLAY_PRICES`` for every
process, or given to ``set_prices()`` in code.

A model id matches a table key after its date, a Bedrock prefix, a ``-v1:0``
suffix, ``-latest`` and ``[1m]`` are taken off, so ``claude-haiku-4-5-20251001``
finds ``claude-haiku-4-5`` but ``claude-sonnet-5-7`` never finds
``claude-sonnet-5``: a model the table does not know has no price, and every
caller reports it rather than count it as free. A user key ending in ``*``
matches by prefix (``my-fine-tune-*``).
"""

from __future__ import annotations

import importlib.resources
import logging
import math
import os
import re
import threading
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, Final

import orjson

from spanreplay._environment import environment
from spanreplay.errors import ConfigurationError
from spanreplay.model.usage import Usage

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

logger = logging.getLogger("spanreplay")

# The variable naming a TOML file of prices that replaces the built-in table.
PRICES_ENV: Final = "SPANREPLAY_PRICES"
# The multiples of the input price Anthropic used for cache traffic before the
# 5-series models priced it per model: a price file may leave them out.
CACHE_WRITE_5M_SHARE: Final = 1.25
CACHE_WRITE_1H_SHARE: Final = 2.0
CACHE_READ_SHARE: Final = 0.1
BATCH_SHARE: Final = 0.5
_PRICE_FIELDS: Final = ("input", "output", "cache_write_5m", "cache_write_1h", "cache_read")
_MODEL_KEYS: Final = frozenset({*_PRICE_FIELDS, "batch", "long_prompt", "earlier"})
_TOP_KEYS: Final = frozenset({"as_of", "batch", "models", "replace"})
_FIX: Final = "see docs/cost.md for the form of a price file"


@dataclass(frozen=True, slots=True)
class LongPrompt:
    """The prices of a request whose prompt is longer than ``above`` tokens."""

    above: int
    price: ModelPrice


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """US dollars per million tokens of one model.

    Cache prices left out are the documented multiples of ``input``; ``batch``
    is the share paid for Message Batches usage (None: the table's, 0.5).
    ``earlier`` holds the prices before a change, as ``(until, price)`` pairs.
    """

    input: float
    output: float
    cache_write_5m: float | None = None
    cache_write_1h: float | None = None
    cache_read: float | None = None
    batch: float | None = None
    long_prompt: LongPrompt | None = None
    earlier: tuple[tuple[date, ModelPrice], ...] = field(default=())

    def at(self, day: date | None) -> ModelPrice:
        """The prices in force on ``day`` (today's when None)."""
        if day is not None:
            for until, price in sorted(self.earlier, key=lambda pair: pair[0]):
                if day < until:
                    return price
        return self

    def usd(self, usage: Usage, *, batch: float = BATCH_SHARE) -> float:
        """The cost of one call, in US dollars."""
        price = self
        if self.long_prompt is not None and usage.prompt > self.long_prompt.above:
            price = self.long_prompt.price
        written_5m = max(usage.cache_write - usage.cache_write_1h, 0)
        dollars = (
            usage.input * price.input
            + written_5m * _or(price.cache_write_5m, price.input * CACHE_WRITE_5M_SHARE)
            + usage.cache_write_1h * _or(price.cache_write_1h, price.input * CACHE_WRITE_1H_SHARE)
            + usage.cache_read * _or(price.cache_read, price.input * CACHE_READ_SHARE)
            + usage.output * price.output
        ) / 1_000_000
        if usage.batch:
            dollars *= _or(self.batch, batch)
        return dollars

    def cost(self, usage: Mapping[str, Any]) -> float:
        """The cost of one call's ``usage`` (the API's usage object, as JSON)."""
        return self.usd(Usage.from_api(usage))


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


_BEDROCK = re.compile(r"^(?:[a-z]{2,6}\.)?anthropic\.")
_VERSION = re.compile(r"-v\d+(?::\d+)?$")
_DATE = re.compile(r"[-@]\d{8}$")


def model_key(model: str) -> str:
    """The table key a model id is looked up under: ``claude-sonnet-4-5`` for
    ``us.anthropic.claude-sonnet-4-5-20250929-v1:0`` or ``claude-sonnet-4.5``."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    name = _BEDROCK.sub("", name).removesuffix("[1m]")
    name = _VERSION.sub("", name)
    name = _DATE.sub("", name).removesuffix("-latest")
    return name.replace(".", "-")


class PriceTable:
    """Model prices by table key, with the date they were checked and where they came from."""

    __slots__ = ("_cache", "_prefixes", "as_of", "batch", "models", "sources")

    def __init__(
        self,
        models: Mapping[str, ModelPrice],
        *,
        as_of: date | None = None,
        batch: float = BATCH_SHARE,
        sources: tuple[str, ...] = (),
    ) -> None:
        self.models: dict[str, ModelPrice] = {}
        self._prefixes: list[tuple[str, ModelPrice]] = []
        for key, price in models.items():
            if key.endswith("*"):
                self._prefixes.append((model_key(key[:-1]), price))
            else:
                self.models[model_key(key)] = price
        self._prefixes.sort(key=lambda pair: -len(pair[0]))
        self.as_of = as_of
        self.batch = batch
        self.sources = sources
        self._cache: dict[str, ModelPrice | None] = {}

    def __repr__(self) -> str:
        return f"<PriceTable {self.describe()}: {len(self.models) + len(self._prefixes)} models>"

    def describe(self) -> str:
        """Where the prices come from, for a report's footer."""
        return " + ".join(self.sources) or "no prices"

    def lookup(self, model: str) -> ModelPrice | None:
        """The prices of ``model``, or None when the table does not know it."""
        try:
            return self._cache[model]
        except KeyError:
            pass
        key = model_key(model)
        found = self.models.get(key)
        if found is None:
            found = next((price for prefix, price in self._prefixes if key.startswith(prefix)), None)
        self._cache[model] = found
        return found

    def usd(self, model: str, usage: Usage, *, when: date | datetime | None = None) -> float | None:
        """The cost of a call to ``model``, or None when the model has no price."""
        price = self.lookup(model)
        if price is None:
            return None
        day = when.astimezone(UTC).date() if isinstance(when, datetime) else when
        return price.at(day).usd(usage, batch=price.batch if price.batch is not None else self.batch)

    def merged(self, other: PriceTable, *, replace: bool = False) -> PriceTable:
        """This table with ``other``'s models on top (only ``other``'s when ``replace``)."""
        models: dict[str, ModelPrice] = {} if replace else self.entries()
        models.update(other.entries())
        return PriceTable(
            models,
            as_of=other.as_of or self.as_of,
            batch=self.batch,
            sources=other.sources if replace else (*self.sources, *other.sources),
        )

    def entries(self) -> dict[str, ModelPrice]:
        """Every price in the table by its key, a prefix entry's key ending in ``*`` (a copy)."""
        out = dict(self.models)
        out.update({prefix + "*": price for prefix, price in self._prefixes})
        return out


# --- reading price files ------------------------------------------------------------------


def builtin_prices() -> PriceTable:
    """spanreplay's own table (``prices.toml``), read once."""
    global _builtin
    if _builtin is None:
        text = importlib.resources.files(__package__ or "spanreplay.cost").joinpath("prices.toml").read_text()
        table, _ = _parse(tomllib.loads(text), "spanreplay's prices.toml")
        _builtin = PriceTable(
            table.entries(), as_of=table.as_of, batch=table.batch, sources=(f"spanreplay's table of {table.as_of}",)
        )
    return _builtin


_builtin: PriceTable | None = None


def load_prices(path: str | os.PathLike[str]) -> tuple[PriceTable, bool]:
    """A user price file (TOML, or JSON by its ``.json`` name or its ``{``), and whether it
    replaces the built-in table (``replace = true``) rather than extend it.

    Raises:
        ConfigurationError: the file cannot be read or a price in it is not a price.
    """
    name = os.fspath(path)
    try:
        raw = Path(name).read_bytes()
    except FileNotFoundError:
        raise ConfigurationError(
            f"Price file {name} does not exist; pass a TOML or JSON file of model prices ({_FIX})."
        ) from None
    except OSError as exc:
        raise ConfigurationError(f"Price file {name} cannot be read ({exc.strerror}); check its permissions.") from None
    if name.endswith(".json") or raw.lstrip().startswith(b"{"):
        try:
            document = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise ConfigurationError(
                f"Price file {name} is not valid JSON ({exc}); fix it or write it as TOML."
            ) from None
    else:
        try:
            document = tomllib.loads(raw.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigurationError(f"Price file {name} is not valid TOML ({exc}); fix the line it names.") from None
    table, replace_builtin = _parse(document, f"Price file {name}")
    return PriceTable(table.entries(), as_of=table.as_of, batch=table.batch, sources=(name,)), replace_builtin


def _parse(document: Any, where: str) -> tuple[PriceTable, bool]:
    if not isinstance(document, dict):
        raise ConfigurationError(f"{where} holds a {type(document).__name__}, not a table of prices; {_FIX}.")
    unknown = sorted(set(document) - _TOP_KEYS)
    if unknown:
        raise ConfigurationError(
            f"{where} has an unknown key {unknown[0]!r}; the keys are as_of, batch, replace and models ({_FIX})."
        )
    models = document.get("models")
    if not isinstance(models, dict) or not models:
        raise ConfigurationError(
            f"{where} has no models: write each model under [models.<model id>] with input and output prices."
        )
    batch = _share(document.get("batch", BATCH_SHARE), f"{where}: batch")
    replace_builtin = document.get("replace", False)
    if not isinstance(replace_builtin, bool):
        raise ConfigurationError(f"{where}: replace is {replace_builtin!r}; write replace = true or false.")
    parsed = {str(name): _model(entry, f"{where}: models.{name}", None) for name, entry in models.items()}
    return PriceTable(parsed, as_of=_date(document.get("as_of"), f"{where}: as_of"), batch=batch), replace_builtin


def _model(entry: Any, where: str, base: ModelPrice | None) -> ModelPrice:
    """One model's prices; ``base`` gives the values an ``earlier`` entry leaves out."""
    if not isinstance(entry, dict):
        raise ConfigurationError(f"{where} is {entry!r}, not a table; give it input and output prices.")
    unknown = sorted(set(entry) - _MODEL_KEYS)
    if unknown:
        raise ConfigurationError(
            f"{where} has an unknown key {unknown[0]!r}; the keys are {', '.join(sorted(_MODEL_KEYS))}."
        )
    values: dict[str, float | None] = {}
    for name in _PRICE_FIELDS:
        if name in entry:
            values[name] = _dollars(entry[name], f"{where}.{name}")
        elif base is not None:
            values[name] = getattr(base, name)
        elif name in ("input", "output"):
            raise ConfigurationError(
                f"{where} has no {name} price; every model needs input and output in US dollars per million tokens."
            )
    batch = _share(entry["batch"], f"{where}.batch") if "batch" in entry else None
    price = ModelPrice(
        input=values["input"] or 0.0,  # present: checked above
        output=values["output"] or 0.0,
        cache_write_5m=values.get("cache_write_5m"),
        cache_write_1h=values.get("cache_write_1h"),
        cache_read=values.get("cache_read"),
        batch=batch,
    )
    long_prompt = entry.get("long_prompt")
    if long_prompt is not None:
        price = replace(price, long_prompt=_long_prompt(long_prompt, f"{where}.long_prompt"))
    return replace(price, earlier=_earlier(entry.get("earlier", []), f"{where}.earlier", price))


def _long_prompt(band: Any, where: str) -> LongPrompt:
    """The prices of prompts longer than ``above`` tokens."""
    if not isinstance(band, dict):
        raise ConfigurationError(f"{where} is {band!r}; give it above = N and prices.")
    above = band.get("above")
    if not isinstance(above, int) or isinstance(above, bool) or above <= 0:
        raise ConfigurationError(
            f"{where}.above is {above!r}; give the prompt length in tokens above which "
            "these prices apply (above = 200000)."
        )
    rest = {k: v for k, v in band.items() if k != "above"}
    # The band's own prices: cache prices it leaves out follow its input price, not the base's.
    return LongPrompt(above, _model(rest, where, None))


def _earlier(earlier: Any, where: str, price: ModelPrice) -> tuple[tuple[date, ModelPrice], ...]:
    """The model's earlier prices, each until the day the next one started; ``price`` fills what they leave out."""
    if not isinstance(earlier, list):
        raise ConfigurationError(f"{where} is {earlier!r}; write each earlier price as [[...earlier]].")
    pairs = []
    for index, old in enumerate(earlier):
        spot = f"{where}[{index}]"
        if not isinstance(old, dict) or "until" not in old:
            raise ConfigurationError(f"{spot} has no until date; give the day the next price started (until = ...).")
        until = _date(old["until"], f"{spot}.until")
        assert until is not None
        pairs.append((until, _model({k: v for k, v in old.items() if k != "until"}, spot, price)))
    return tuple(pairs)


def _dollars(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigurationError(
            f"{where} is {value!r}; give a number of US dollars per million tokens, 0 or more (3.0 for $3/MTok)."
        )
    return float(value)


def _share(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ConfigurationError(f"{where} is {value!r}; give the share of the price paid, from 0 to 1 (0.5 for half).")
    return float(value)


def _date(value: Any, where: str) -> date | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise ConfigurationError(f"{where} is {value!r}; write a date as YYYY-MM-DD.")


# --- the table in force ---------------------------------------------------------------------

_lock = threading.Lock()
_added: dict[str, ModelPrice] = {}
_replaced = False
# (SPANREPLAY_PRICES value, the table it gave): rebuilt when the variable changes.
_in_force: tuple[str, int, PriceTable] | None = None
_generation = 0
_warned: set[str] = set()


def set_prices(table: Mapping[str, ModelPrice], *, replace: bool = False) -> None:
    """Add or change model prices for this process (``replace=True`` drops the built-in ones first)."""
    global _replaced, _generation
    for key, price in table.items():
        if not isinstance(price, ModelPrice):
            raise TypeError(f"The price of {key!r} is {price!r}; give a ModelPrice(input=..., output=...) in USD/MTok.")
    with _lock:
        if replace:
            _added.clear()
            _replaced = True
        _added.update(table)
        _generation += 1


def price_table(extra: str | os.PathLike[str] | None = None) -> PriceTable:
    """The prices in force: the built-in table, the ``SPANREPLAY_PRICES`` file, ``set_prices()``,
    then ``extra`` (a price file) on top.

    Raises:
        ConfigurationError: the ``SPANREPLAY_PRICES`` file or ``extra`` cannot be used.
    """
    global _in_force
    env = environment().prices
    with _lock:
        cached = _in_force
        generation = _generation
    if cached is not None and cached[0] == env and cached[1] == generation:
        table = cached[2]
    else:
        table = builtin_prices()
        if env:
            from_env, replace_all = load_prices(env)
            table = table.merged(from_env, replace=replace_all)
        with _lock:
            added, replaced = dict(_added), _replaced
        if added or replaced:
            table = table.merged(PriceTable(added, sources=("set_prices()",)), replace=replaced)
        with _lock:
            _in_force = (env, generation, table)
    if extra is not None:
        from_file, replace_all = load_prices(extra)
        table = table.merged(from_file, replace=replace_all)
    return table


def prices() -> dict[str, ModelPrice]:
    """A copy of the prices in force, by table key."""
    return price_table().entries()


def cost_usd(model: str, usage: Mapping[str, Any] | Usage, *, when: date | datetime | None = None) -> float | None:
    """The cost of a call to ``model`` with ``usage`` (the API's usage JSON or a ``Usage``),
    or None when the model has no price. Never raises: this runs while recording."""
    try:
        table = price_table()
    except ConfigurationError as exc:
        message = str(exc)
        if message not in _warned:
            _warned.add(message)
            logger.warning("spanreplay prices calls with its built-in table: %s", message)
        table = builtin_prices()
    tokens = usage if isinstance(usage, Usage) else Usage.from_api(usage)
    return table.usd(model, tokens, when=when)

"""Token usage as a model call's span records it: the GenAI attributes, older names and OpenInference's.

Part of the trace model: what a step says it used. Prices, and adding calls up, are ``spanreplay.cost``'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spanreplay import semconv as sc

__all__ = ["Usage", "count_of", "model_of", "usage_of"]


@dataclass(frozen=True, slots=True)
class Usage:
    """One call's tokens, split the way Anthropic bills them.

    ``input`` is the uncached input; cache reads and writes are counted apart,
    so ``prompt`` (all three) is what the GenAI conventions call input tokens.
    """

    input: int = 0
    output: int = 0
    cache_read: int = 0
    # Every cache write; ``cache_write_1h`` says how many of them went to the 1-hour cache.
    cache_write: int = 0
    cache_write_1h: int = 0
    batch: bool = False

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write

    @property
    def total(self) -> int:
        return self.prompt + self.output

    @classmethod
    def from_api(cls, usage: Mapping[str, Any]) -> Usage:
        """The usage object of a Messages API response, as JSON."""
        written = _count(usage.get("cache_creation_input_tokens"))
        breakdown = usage.get("cache_creation")
        written_1h = _count(breakdown.get("ephemeral_1h_input_tokens")) if isinstance(breakdown, Mapping) else 0
        return cls(
            input=_count(usage.get("input_tokens")),
            output=_count(usage.get("output_tokens")),
            cache_read=_count(usage.get("cache_read_input_tokens")),
            cache_write=written,
            cache_write_1h=min(written_1h, written),
            batch=usage.get("service_tier") == "batch",
        )


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def model_of(attributes: Mapping[str, Any], span_name: str = "") -> str:
    """The model that answered (the response's), else the one asked for, else the span's key or name."""
    for name in (sc.GEN_AI_RESPONSE_MODEL, sc.GEN_AI_REQUEST_MODEL, sc.KEY, sc.LLM_MODEL_NAME):
        value = attributes.get(name)
        if isinstance(value, str) and value:
            return value
    _, _, rest = span_name.partition(" ")
    return rest or span_name or "unknown"


def usage_of(attributes: Mapping[str, Any]) -> Usage | None:
    """A call's tokens from its span attributes, or None when the span names no token counts.

    The conventions count cached tokens in ``gen_ai.usage.input_tokens``; an
    instrumentation that reports fewer input tokens than cache reads and writes
    together follows Anthropic's own split instead, and its input is taken as
    the uncached part.
    """
    total = _first_int(
        attributes, sc.GEN_AI_USAGE_INPUT_TOKENS, sc.GEN_AI_USAGE_PROMPT_TOKENS, sc.LLM_TOKEN_COUNT_PROMPT
    )
    output = _first_int(
        attributes, sc.GEN_AI_USAGE_OUTPUT_TOKENS, sc.GEN_AI_USAGE_COMPLETION_TOKENS, sc.LLM_TOKEN_COUNT_COMPLETION
    )
    if total is None and output is None:
        return None
    read = _first_int(attributes, sc.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, sc.LLM_TOKEN_COUNT_CACHE_READ) or 0
    written = (
        _first_int(
            attributes,
            sc.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
            sc.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
            sc.LLM_TOKEN_COUNT_CACHE_WRITE,
        )
        or 0
    )
    total = total or 0
    uncached = total - read - written if total >= read + written else total
    written_1h = count_of(attributes.get(sc.ANTHROPIC_USAGE_CACHE_WRITE_1H_INPUT_TOKENS)) or 0
    return Usage(
        input=uncached,
        output=output or 0,
        cache_read=read,
        cache_write=written,
        cache_write_1h=min(written_1h, written),
        batch=attributes.get(sc.ANTHROPIC_USAGE_SERVICE_TIER) == "batch",
    )


def _first_int(attributes: Mapping[str, Any], *names: str) -> int | None:
    """The first of ``names`` that holds a token count (the conventions' names, then older ones)."""
    for name in names:
        found = count_of(attributes.get(name))
        if found is not None:
            return found
    return None


def count_of(value: Any) -> int | None:
    """A count an attribute holds, or None; OTLP/JSON writes 64-bit integers as strings."""
    # OTLP/JSON writes 64-bit integers as strings; readers may hand them over either way.
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and value.is_integer():
        return max(int(value), 0)
    if isinstance(value, str) and value.isdecimal() and len(value) < 19:
        return int(value)
    return None

"""``spanreplay.instrument_all()``: the Anthropic SDK and every framework adapter whose library is installed."""

from __future__ import annotations

import importlib
import importlib.util
import logging
from typing import Any

logger = logging.getLogger("spanreplay")

__all__ = ["ADAPTERS", "instrument_all"]

# (the module a framework installs, the adapter's module, its instrumentor class).
ADAPTERS: tuple[tuple[str, str, str], ...] = (
    ("langchain_core", "spanreplay.instrumentation.langchain", "LangChainToolsInstrumentor"),
    ("mcp", "spanreplay.instrumentation.mcp", "McpInstrumentor"),
    ("pydantic_ai", "spanreplay.instrumentation.pydantic_ai", "PydanticAIToolsInstrumentor"),
)

_instrumented: dict[str, Any] = {}


def instrument_all() -> dict[str, Any]:
    """Record and replay every Anthropic call and every framework tool call spanreplay has an adapter for.

    Safe to call more than once. A framework that is not installed is left alone,
    said once at INFO; one outside its tested range is skipped with one warning.

    Returns:
        ``{name: instrumentor}`` of what is instrumented (``.uninstrument()`` undoes one).
    """
    from spanreplay.instrumentation.anthropic import instrument_anthropic

    # One undone with .uninstrument() since is instrumented again.
    for name in [name for name, done in _instrumented.items() if not done.is_instrumented_by_opentelemetry]:
        del _instrumented[name]
    if importlib.util.find_spec("anthropic") is not None and "anthropic" not in _instrumented:
        _instrumented["anthropic"] = instrument_anthropic()
    for package, module, class_name in ADAPTERS:
        if package in _instrumented:
            continue
        if importlib.util.find_spec(package) is None:
            logger.info("spanreplay: %s is not installed; its tool calls have no adapter to record them.", package)
            continue
        instrumentor = getattr(importlib.import_module(module), class_name)()
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument()
        if instrumentor.is_instrumented_by_opentelemetry:
            _instrumented[package] = instrumentor
    return dict(_instrumented)

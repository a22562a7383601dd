"""Runs of the demo support agent (spanreplay._demo), recorded against its local Messages API server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

import spanreplay
from spanreplay import _demo
from spanreplay.api import builtins as _builtins

# A Wednesday afternoon: the agent's branch follows the clock (office hours or not).
RECORDED_AT = datetime(2026, 3, 4, 14, 0, tzinfo=UTC)
# What the carrier's tracking API answers when it does not time out.
TRACKED = {"tracking": "LP-88412-FR", "last_scan": "Lyon hub", "eta_days": 2}


def record_demo(monkeypatch: pytest.MonkeyPatch, *, failure_rate: float) -> str:
    """One recorded run of the demo agent (failure_rate 1.0: the carrier always times out); its run id.

    The local server is stopped on return: nothing answers a model call afterwards. The
    count of real tool calls (``_demo.real_calls``) starts again from zero.
    """
    with monkeypatch.context() as patched:
        patched.setattr(_demo, "FAILURE_RATE", failure_rate)
        patched.setattr(_builtins, "_utcnow", lambda: RECORDED_AT)
        with _demo.local_api():
            try:
                with spanreplay.record(agent=_demo.AGENT) as run:
                    asyncio.run(_demo.main())
            except _demo.CarrierTimeout:
                pass
    _demo.real_calls.clear()
    return run.run_id


def final_message(text: str) -> dict[str, object]:
    """Claude's last reply, as the Messages API returns it: text only, so the agent stops."""
    return {"content": [{"type": "text", "text": text}]}


def demo_sdk_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An autouse fixture's body: no real API for the agent, no real tool call counted from
    before, the SDK uninstrumented after."""
    from spanreplay.instrumentation.anthropic import AnthropicInstrumentor

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    _demo.real_calls.clear()
    yield
    instrumentor = AnthropicInstrumentor()
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()

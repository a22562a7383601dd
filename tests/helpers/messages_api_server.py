"""The Messages API server the tests run the real SDK against, and their fixtures.

The server itself is ``spanreplay.testing.messages_api`` (``spanreplay demo``
and examples/support_agent use it too); this module adds the pytest fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator

from spanreplay.testing.messages_api import (
    MODEL,
    MessagesAPIServer,
    Received,
    Reply,
    api_error,
    drop_connection,
    echo,
    message,
    reply,
    stall,
    stream_events,
    support_model,
    text,
    tool_use,
)

__all__ = [
    "MODEL",
    "MessagesAPIServer",
    "Received",
    "Reply",
    "api_error",
    "drop_connection",
    "echo",
    "instrument",
    "message",
    "reply",
    "serve",
    "stall",
    "stream_events",
    "support_model",
    "text",
    "tool_use",
]


# --- fixtures: test modules declare ``server = pytest.fixture(serve, name="server")`` -------------


def serve() -> Iterator[MessagesAPIServer]:
    """A fresh server per test; a test may stop it early to unplug the network."""
    with MessagesAPIServer() as running:
        yield running


def instrument() -> Iterator[None]:
    """The Anthropic SDK instrumented for one test, restored afterwards."""
    from spanreplay.instrumentation.anthropic import AnthropicInstrumentor

    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(zero_code=False)
    yield
    instrumentor.uninstrument()

"""Stand-ins for the services an agent talks to, for running agents and tests offline.

``MessagesAPIServer`` is a real HTTP server on 127.0.0.1 that speaks the
Anthropic Messages API, so the real ``anthropic`` SDK talks to it unchanged;
``support_model`` is the small rule-based support model that ``spanreplay
demo`` and examples/support_agent run against when ANTHROPIC_API_KEY is unset.
"""

from __future__ import annotations

from .messages_api import (
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
    "message",
    "reply",
    "stall",
    "stream_events",
    "support_model",
    "text",
    "tool_use",
]

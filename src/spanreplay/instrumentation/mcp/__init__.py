"""Record and replay an MCP client session's tool calls, with no server on replay.

``McpInstrumentor().instrument()`` (or ``spanreplay.instrument_all()``, or
``opentelemetry-instrument`` through the entry point) wraps ``mcp.ClientSession``
and the stdio transport. Inside a run, ``session.call_tool(name, arguments)`` is
one ``tool`` boundary keyed by the tool's name, with the arguments as input; its
``CallToolResult`` (``isError`` results and structured content included) comes
back on replay as a ``CallToolResult``. ``initialize()`` (and ``discover()``) and
``list_tools()`` are ``mcp`` boundaries keyed by their JSON-RPC method, so the
user's unchanged code — ``stdio_client(params)``, ``ClientSession(read, write)``,
``initialize()``, ``list_tools()``, ``call_tool()`` — replays with no server:
``stdio_client`` starts no process inside a replay and yields in-memory streams,
and any request outside those fails at once with an error naming its method.
Outside any run the SDK works untouched.
"""

from __future__ import annotations

from typing import Any

from spanreplay.instrumentation._framework import FrameworkInstrumentor

from . import _offline, _session

__all__ = ["SUPPORTED", "McpInstrumentor"]

SUPPORTED = "mcp >= 2.3, < 3"

_SESSION = "mcp.client.session"


class McpInstrumentor(FrameworkInstrumentor):
    """Records ``ClientSession.call_tool`` as tool boundaries, and what a session needs to replay offline."""

    supported = SUPPORTED
    extra = "mcp"
    what = "MCP tool calls"
    wraps: tuple[tuple[str, str, Any], ...] = (
        (_SESSION, "ClientSession.call_tool", _session.call_tool),
        (_SESSION, "ClientSession.list_tools", _session.list_tools),
        (_SESSION, "ClientSession.initialize", _session.initialize),
        (_SESSION, "ClientSession.discover", _session.discover),
        (_SESSION, "ClientSession.send_request", _session.send_request),
        (_SESSION, "ClientSession.send_notification", _session.send_notification),
        # The transport's own module, and the package's re-export of it (``from mcp import stdio_client``).
        ("mcp.client.stdio", "stdio_client", _offline.stdio_client),
        ("mcp", "stdio_client", _offline.stdio_client),
    )

"""The stdio transport of a replay: in-memory streams, and no server process.

``stdio_client(params)`` inside a replay yields a stream pair with nothing but a
refusing peer behind it: the session's handshake, tool listing and tool calls
are served from the recording before they reach the streams (see _session), and
any request that reaches them anyway (one sent around ``ClientSession``'s
methods) is answered at once with a JSON-RPC error that names its method, so a
replay never waits for a server. Outside a replay the real transport runs.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from spanreplay.run.base import run_for_boundary

__all__ = ["REFUSAL", "offline_streams", "stdio_client"]

REFUSAL = (
    "spanreplay: the MCP request {method!r} reached the transport during a replay, and a replay starts no "
    "MCP server; only the requests recorded as boundaries (initialize, discover, tools/list, tools/call) "
    "are served."
)


@asynccontextmanager
async def offline_streams() -> AsyncIterator[tuple[Any, Any]]:
    """A ``(read_stream, write_stream)`` pair for a ``ClientSession`` with a refusing peer behind it."""
    import anyio
    import mcp.types as types
    from mcp.shared.message import SessionMessage

    to_client, from_server = anyio.create_memory_object_stream[Any](math.inf)
    to_server, from_client = anyio.create_memory_object_stream[Any](math.inf)

    async def refuse() -> None:
        async for item in from_client:
            message = getattr(item.message, "root", item.message)
            if isinstance(message, types.JSONRPCRequest):
                error = types.ErrorData(code=types.INTERNAL_ERROR, message=REFUSAL.format(method=message.method))
                answer = types.JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
                await to_client.send(SessionMessage(message=answer))

    async with to_client, from_server, to_server, from_client, anyio.create_task_group() as tasks:
        tasks.start_soon(refuse)
        try:
            yield from_server, to_server
        finally:
            tasks.cancel_scope.cancel()


def stdio_client(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``mcp.client.stdio.stdio_client``: the real transport, except in a replay, which starts no process."""
    run = run_for_boundary("MCP stdio_client")
    if run is not None and run.replayed_log is not None:
        return offline_streams()
    return wrapped(*args, **kwargs)

"""The wrappers of ``mcp.ClientSession``: each request a session makes is one boundary.

``initialize`` (and ``discover``) and ``list_tools`` are kind ``mcp``, keyed by
their JSON-RPC method; ``call_tool`` is kind ``tool``, keyed by the tool's name,
with its arguments as input. A replay serves each from the recording and installs
what the handshake negotiated on the session (``ClientSession.adopt``), so the
session works with no server. Any other request a replay makes fails closed
with a ``ReplayDivergenceError`` naming the method; notifications are dropped.
"""

from __future__ import annotations

import functools
from typing import Any

from spanreplay import semconv as sc
from spanreplay.errors import ReplayDivergenceError
from spanreplay.run.base import BoundaryCall, Run, run_for_boundary

__all__ = [
    "call_tool",
    "decode_tool_result",
    "discover",
    "initialize",
    "list_tools",
    "send_notification",
    "send_request",
]


def _offline(run: Run) -> bool:
    """Whether ``run`` never runs real work (a replay): the session has no server behind it."""
    return run.replayed_log is not None


def _method_of(request: Any) -> str:
    method = getattr(request, "method", None)
    return method if isinstance(method, str) else type(request).__name__


def _dump(value: Any) -> Any:
    """A pydantic params object (or None) as JSON-able data, the way the SDK sends it."""
    if value is None:
        return {}
    return value.model_dump(mode="json", by_alias=True, exclude_none=True)


def decode_tool_result(data: Any) -> Any:
    """The recorded outcome of ``call_tool`` as the SDK's type: a ``CallToolResult`` (or ``InputRequiredResult``)."""
    import mcp.types as types

    if isinstance(data, types.CallToolResult | types.InputRequiredResult):
        return data
    if (
        isinstance(data, dict)
        and "content" not in data
        and data.get("result_type", data.get("resultType"))
        not in (
            None,
            "complete",
        )
    ):
        return types.InputRequiredResult.model_validate(data)
    return types.CallToolResult.model_validate(data)


async def call_tool(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    name = args[0] if args else kwargs.get("name")
    run = run_for_boundary(f"MCP tool {name!r}")
    if run is None or not isinstance(name, str):
        return await wrapped(*args, **kwargs)
    arguments = args[1] if len(args) > 1 else kwargs.get("arguments")
    call = BoundaryCall(
        kind=sc.KIND_TOOL,
        key=name,
        input=dict(arguments) if arguments else {},
        function=functools.partial(wrapped, *args, **kwargs),
        decode=decode_tool_result if run.serves_recorded else None,
    )
    return await run.call_async(call)


async def list_tools(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    run = run_for_boundary(f"MCP {sc.MCP_TOOLS_LIST}")
    if run is None:
        return await wrapped(*args, **kwargs)
    import mcp.types as types

    call = BoundaryCall(
        kind=sc.KIND_MCP,
        key=sc.MCP_TOOLS_LIST,
        input=_dump(kwargs.get("params")),
        function=functools.partial(wrapped, *args, **kwargs),
        decode=types.ListToolsResult.model_validate if run.serves_recorded else None,
    )
    return await run.call_async(call)


async def _handshake(
    method: str, result_type: Any, wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``initialize()`` or ``discover()``: one boundary; a served result is adopted by the session."""
    run = run_for_boundary(f"MCP {method}")
    done = instance.initialize_result if method == sc.MCP_INITIALIZE else instance.discover_result
    if run is None or done is not None:  # outside a run, or answered from the session's cache
        return await wrapped(*args, **kwargs)
    call = BoundaryCall(
        kind=sc.KIND_MCP,
        key=method,
        input={},
        function=functools.partial(wrapped, *args, **kwargs),
        decode=result_type.model_validate if run.serves_recorded else None,
    )
    result = await run.call_async(call)
    if instance.protocol_version is None:  # served from the recording: the function did not run
        if not _offline(run):
            # A fork that goes live later talks to a real server, which needs its handshake.
            await wrapped(*args, **kwargs)
        instance.adopt(result)
    return result


async def initialize(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    import mcp.types as types

    return await _handshake(sc.MCP_INITIALIZE, types.InitializeResult, wrapped, instance, args, kwargs)


async def discover(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    import mcp.types as types

    return await _handshake(sc.MCP_DISCOVER, types.DiscoverResult, wrapped, instance, args, kwargs)


async def send_request(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Every other request: untouched, except that a replay refuses it rather than wait for a server."""
    request = args[0] if args else kwargs.get("request")
    method = _method_of(request)
    run = run_for_boundary(f"MCP {method}")
    if run is not None and _offline(run):
        raise ReplayDivergenceError(
            f"spanreplay: the MCP request {method!r} was sent during the replay of run {run.run_id}, and a replay "
            f"has no MCP server to answer it. spanreplay records an MCP session's initialize, discover, "
            f"{sc.MCP_TOOLS_LIST} and tools/call; record any other request as a boundary of its own "
            "(spanreplay.boundary) to replay it.",
            run_id=run.run_id,
            seq=None,
            call_id=None,
            recorded=None,
            attempted=f"MCP request {method!r}",
        )
    return await wrapped(*args, **kwargs)


async def send_notification(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """A notification is fire-and-forget: a replay, which has no server, drops it."""
    notification = args[0] if args else kwargs.get("notification")
    run = run_for_boundary(f"MCP {_method_of(notification)}")
    if run is not None and _offline(run):
        return None
    return await wrapped(*args, **kwargs)

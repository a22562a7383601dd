"""The wrapper of ``FunctionToolset.call_tool``: one function tool call as one boundary call."""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from spanreplay import semconv as sc
from spanreplay.model.typed_hints import ReturnDecoder
from spanreplay.run.base import BoundaryCall, run_for_boundary

from ..tools import is_recorded_tool

__all__ = ["call_tool", "tool_input"]

# Each tool function's return decoder (None: its annotation names nothing JSON does not give).
_decoders: weakref.WeakKeyDictionary[Any, ReturnDecoder | None] = weakref.WeakKeyDictionary()

_PARAMETERS = ("name", "tool_args", "ctx", "tool")


async def call_tool(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``FunctionToolset.call_tool(name, tool_args, ctx, tool)`` as one ``tool`` boundary of the current run."""
    name, tool_args, ctx, tool = _arguments(args, kwargs)
    function = _tool_function(instance, name, tool)
    if not isinstance(name, str) or is_recorded_tool(function):
        return await wrapped(*args, **kwargs)
    run = run_for_boundary(f"tool {name!r}")
    if run is None:
        return await wrapped(*args, **kwargs)
    attributes = None
    if run.records:
        # The tool_use block this call answers: PydanticAI carries its id in the run context.
        call_id = getattr(ctx, "tool_call_id", None)
        attributes = {sc.GEN_AI_TOOL_CALL_ID: call_id} if isinstance(call_id, str) else None
    call = BoundaryCall(
        kind=sc.KIND_TOOL,
        key=name,
        input=tool_input(tool_args),
        function=functools.partial(wrapped, *args, **kwargs),
        decode=_decoder(function) if run.serves_recorded else None,
        attributes=attributes,
    )
    return await run.call_async(call)


def tool_input(tool_args: Any) -> Any:
    """The validated arguments as JSON data (a model argument as its fields, a date as ISO text)."""
    try:
        return to_jsonable_python(tool_args, serialize_unknown=True, bytes_mode="base64")
    except Exception:  # recording fails open: spanreplay's own encoder writes what it can
        return tool_args


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    values = dict(zip(_PARAMETERS, args, strict=False))
    values.update(kwargs)
    return values.get("name"), values.get("tool_args"), values.get("ctx"), values.get("tool")


def _tool_function(toolset: Any, name: Any, tool: Any) -> Callable[..., Any] | None:
    """The Python function behind the tool: it says which types the recorded value comes back as."""
    tools = getattr(toolset, "tools", None)
    if not isinstance(tools, Mapping):
        return None
    original = getattr(tool, "original_name", None) or name
    held = tools.get(original)
    function = getattr(held, "function", None)
    return function if callable(function) else None


def _decoder(function: Callable[..., Any] | None) -> ReturnDecoder | None:
    if function is None:
        return None
    try:
        return _decoders[function]
    except KeyError:
        pass
    except TypeError:  # a callable that cannot be weakly referenced: no cache
        return ReturnDecoder(function).decoder()
    decoder = ReturnDecoder(function).decoder()
    _decoders[function] = decoder
    return decoder

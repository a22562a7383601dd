"""The wrappers of ``BaseTool.run`` and ``BaseTool.arun``: one tool call, one boundary."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from spanreplay import semconv as sc
from spanreplay.model.tool_links import answered
from spanreplay.model.typed_classes import register_type
from spanreplay.run.base import BoundaryCall, Run, run_for_boundary

from .._framework import FrameworkInstrumentor
from ..tools import is_recorded_tool
from ._executor import EXECUTOR_MODULE, map_through_submit

__all__ = ["LangChainToolsInstrumentor"]

_MODULE = "langchain_core.tools.base"


def _recorded_inside(tool: Any) -> bool:
    """Whether the tool's own function is a ``@spanreplay.tool``: that records the call, not this adapter."""
    for name in ("func", "coroutine"):
        function = getattr(tool, name, None)
        if is_recorded_tool(function):
            return True
    return False


def _tool_input(tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The arguments the model (or the caller) gave the tool, without those LangChain or LangGraph inject.

    Injected arguments (the graph state, the store, a ``ToolRuntime``, a callback
    manager) are the framework's objects, not the call's input.
    """
    tool_input = args[0] if args else kwargs.get("tool_input")
    if not isinstance(tool_input, dict):
        return tool_input
    drop = getattr(tool, "_filter_injected_args", None)
    if callable(drop):
        try:
            return dict(drop(tool_input))
        except Exception:  # a tool subclass whose schema cannot say: keep the input whole
            return dict(tool_input)
    return dict(tool_input)


def _call(
    run: Run, tool: Any, args: tuple[Any, ...], kwargs: dict[str, Any], function: Callable[[], Any]
) -> BoundaryCall:
    key = str(tool.name)
    tool_input = _tool_input(tool, args, kwargs)
    attributes: dict[str, Any] | None = None
    if run.records:
        tool_call_id = kwargs.get("tool_call_id")
        if isinstance(tool_call_id, str):
            attributes = {sc.GEN_AI_TOOL_CALL_ID: tool_call_id}
        else:
            attributes = answered(run, key, tool_input)
    return BoundaryCall(kind=sc.KIND_TOOL, key=key, input=tool_input, function=function, attributes=attributes)


def _run(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if instance is None or _recorded_inside(instance):
        return wrapped(*args, **kwargs)
    run = run_for_boundary(f"LangChain tool {getattr(instance, 'name', '?')!r}")
    if run is None:
        return wrapped(*args, **kwargs)
    return run.call(_call(run, instance, args, kwargs, functools.partial(wrapped, *args, **kwargs)))


async def _arun(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if instance is None or _recorded_inside(instance):
        return await wrapped(*args, **kwargs)
    run = run_for_boundary(f"LangChain tool {getattr(instance, 'name', '?')!r}")
    if run is None:
        return await wrapped(*args, **kwargs)
    return await run.call_async(_call(run, instance, args, kwargs, functools.partial(wrapped, *args, **kwargs)))


def _register_outputs() -> None:
    """Let replay rebuild what tools return in the framework's own types."""
    from langchain_core.messages import ToolMessage

    register_type(ToolMessage)
    try:
        from langgraph.types import Command
    except ImportError:  # LangChain without LangGraph: no tool returns a Command
        return
    register_type(Command)


class LangChainToolsInstrumentor(FrameworkInstrumentor):
    """Records and replays every ``langchain_core`` tool call (LangGraph's ``ToolNode`` included).

    ``LangChainToolsInstrumentor().instrument()``, or ``spanreplay.instrument_all()``,
    or ``opentelemetry-instrument`` through the entry point. A tool whose function
    is also a ``@spanreplay.tool`` is recorded once, by that decorator.
    """

    supported = "langchain-core >= 1.8, < 2"
    extra = "langchain"
    what = "LangChain and LangGraph tool calls"
    wraps = (
        (_MODULE, "BaseTool.run", _run),
        (_MODULE, "BaseTool.arun", _arun),
        # So that parallel tool calls (ToolNode's) are branches of their own: see _executor.
        (EXECUTOR_MODULE, "ContextThreadPoolExecutor.map", map_through_submit),
    )

    def _instrument(self, **kwargs: Any) -> None:
        _register_outputs()
        super()._instrument(**kwargs)

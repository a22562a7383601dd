"""Record and replay every PydanticAI function tool call as a tool boundary, zero-code.

``PydanticAIToolsInstrumentor().instrument()`` (or ``spanreplay.instrument_all()``,
or ``opentelemetry-instrument`` through the ``opentelemetry_instrumentor`` entry
point) wraps ``FunctionToolset.call_tool``: the one call every function tool of a
PydanticAI agent passes through (``@agent.tool``, ``@agent.tool_plain``,
``Agent(tools=[...])``, a ``FunctionToolset`` of its own), sync or async, after
PydanticAI validated the model's arguments. Inside a run each call is one tool
boundary: key = the tool's name, input = the validated arguments as JSON. On
replay the tool never runs: the recorded value comes back with the types the
tool's return annotation names (pydantic models, dataclasses), and a recorded
``ModelRetry`` is raised again, so PydanticAI sends the model the same retry.

The model calls of an agent with an Anthropic model go through the ``anthropic``
SDK, which the Anthropic instrumentation records. Outside any run the toolset
works untouched.
"""

from __future__ import annotations

from .._framework import FrameworkInstrumentor
from ._call_tool import call_tool

__all__ = ["PydanticAIToolsInstrumentor"]


class PydanticAIToolsInstrumentor(FrameworkInstrumentor):
    """Record and replay each PydanticAI function tool call as one ``tool`` boundary."""

    supported = "pydantic-ai-slim >= 2.68, < 3"
    extra = "pydantic-ai"
    what = "PydanticAI function tool calls"
    wraps = (("pydantic_ai.toolsets.function", "FunctionToolset.call_tool", call_tool),)

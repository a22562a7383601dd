"""LangChain and LangGraph tools, recorded and replayed zero-code.

Every call of a ``langchain_core`` tool passes through ``BaseTool.run`` (sync:
``invoke``, ``run``, LangGraph's ``ToolNode``) or ``BaseTool.arun`` (async:
``ainvoke``, ``arun``). ``LangChainToolsInstrumentor`` wraps those two and makes
each call one ``tool`` boundary of the current run: recorded with the tool's
name as key and its arguments as input, served on replay without running the
tool, with the types it returned (a ``ToolMessage`` when it was invoked with a
tool call).
"""

from __future__ import annotations

from ._tools import LangChainToolsInstrumentor

__all__ = ["LangChainToolsInstrumentor"]

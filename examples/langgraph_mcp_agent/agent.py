"""A LangGraph agent whose tools come from an MCP server, recorded and replayed offline.

The graph is the usual two-node loop: a model node asks Claude (``ChatAnthropic``),
and LangGraph's ``ToolNode`` runs the tools Claude asks for. The tools are not
written here: the agent starts the order desk in ``server.py`` over stdio, lists
its tools through an ``mcp.ClientSession``, and hands them to LangGraph as
LangChain tools whose body is ``session.call_tool``. Run it from the repository root::

    python examples/langgraph_mcp_agent/agent.py record           # records into ./traces
    python examples/langgraph_mcp_agent/agent.py replay RUN_ID    # replays it offline
    spanreplay replay traces/ RUN_ID --entry examples.langgraph_mcp_agent.agent:main

With ANTHROPIC_API_KEY set, Claude is the real API. Without it, Claude is a
stand-in: spanreplay's local Messages API server on 127.0.0.1
(``spanreplay.testing``) answering with the scripted conversation in ``SCRIPT``.
A replay needs neither: no model call, and no MCP server process.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from pathlib import Path
from typing import Any

import mcp
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import HumanMessage
from langchain_core.tools import StructuredTool, ToolException
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

import spanreplay
from spanreplay.testing import MessagesAPIServer, reply, text, tool_use

MODEL = "claude-sonnet-4-6"
QUESTION = "My order A-17 arrived with a dented box. Could you refund 10 EUR on it?"
ORDER_DESK = mcp.StdioServerParameters(command=sys.executable, args=[str(Path(__file__).with_name("server.py"))])
# What the stand-in Claude answers, one reply per request, when ANTHROPIC_API_KEY is unset.
SCRIPT = [
    reply(text("Let me find the order first."), tool_use("lookup_order", {"order_id": "A-17"}, id="toolu_01")),
    reply(tool_use("refund", {"order_id": "A-17", "amount": 10.0}, id="toolu_02")),
    reply(text("Order A-17 was delivered, and I refunded 10.00 EUR on it (reference RF-A-17-1000).")),
]


def claude(stack: contextlib.ExitStack[Any]) -> ChatAnthropic:
    """The real Claude with ANTHROPIC_API_KEY set, else the local stand-in (started only when recording)."""
    if os.environ.get("ANTHROPIC_API_KEY"):
        return ChatAnthropic(model=MODEL, max_tokens=1024)
    if isinstance(spanreplay.current_run(), spanreplay.ReplayingRun):
        # A replay sends nothing; nothing listens on port 9, so a call that leaked would fail loudly.
        return ChatAnthropic(model=MODEL, base_url="http://127.0.0.1:9", api_key="offline", max_tokens=1024)
    stand_in = stack.enter_context(MessagesAPIServer())
    stand_in.script(*SCRIPT)
    return ChatAnthropic(model=MODEL, base_url=stand_in.url, api_key="local-stand-in", max_tokens=1024)


def langchain_tool(session: mcp.ClientSession, spec: mcp.types.Tool) -> StructuredTool:
    """An MCP tool as a LangChain tool: same name, description and schema; its body calls the server."""

    async def call(**arguments: Any) -> str:
        result = await session.call_tool(spec.name, arguments)
        answer = "\n".join(block.text for block in result.content if block.type == "text")
        if result.is_error:
            raise ToolException(answer)  # ToolNode hands it to Claude as an error tool result
        return answer

    return StructuredTool(
        name=spec.name,
        description=spec.description or "",
        args_schema=spec.input_schema,
        coroutine=call,
        handle_tool_error=True,
    )


def build_graph(model: Any, tools: list[StructuredTool]) -> Any:
    """Model node, tool node, and back to the model until Claude answers in text."""

    async def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    graph.add_edge("tools", "model")
    return graph.compile()


async def main(question: str = QUESTION) -> str:
    """Answer one question; returns Claude's final text. What ``spanreplay replay --entry`` names."""
    # Records (and replays) the Anthropic SDK under ChatAnthropic, LangChain tools and MCP sessions.
    # mcp.stdio_client is looked up after this line, so a replay gets the transport that starts no server.
    spanreplay.instrument_all()
    with contextlib.ExitStack() as stack:
        model = claude(stack)
        async with mcp.stdio_client(ORDER_DESK) as (read, write), mcp.ClientSession(read, write) as session:
            await session.initialize()
            tools = [langchain_tool(session, spec) for spec in (await session.list_tools()).tools]
            agent = build_graph(model.bind_tools(tools), tools)
            state = await agent.ainvoke({"messages": [HumanMessage(question)]})
    return str(state["messages"][-1].text)


def cli(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--traces", default="traces", help="the trace directory (default: traces)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("record", help="run the agent and record the run")
    commands.add_parser("replay", help="replay a recorded run offline").add_argument("run_id")
    args = parser.parse_args(argv)
    run: spanreplay.Run
    if args.command == "record":
        spanreplay.configure(service_name="order-desk-agent", trace_dir=args.traces)
        with spanreplay.record(agent="order-desk") as run:
            answer = asyncio.run(main())
        verdict = f"recorded run {run.run_id} into {args.traces}/"
    else:
        with spanreplay.replay(args.traces, args.run_id) as run:
            answer = asyncio.run(main())
        verdict = f"replayed run {run.run_id}: {run.outcome}"
    print(answer)
    print(verdict, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(cli())

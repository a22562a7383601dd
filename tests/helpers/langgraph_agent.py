"""A LangGraph agent for the adapter tests: a Claude model node, a ToolNode, and a parallel fan-out.

Two probe nodes run from START at once, each calling the ``lookup_order`` tool
directly; the agent node then asks Claude (``ChatAnthropic`` against the local
Messages API server), whose scripted answer calls two tools at once through the
``ToolNode``; the second answer is the final one. Tool bodies count their real
calls, so a test can tell that replay never ran one.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

import spanreplay
from helpers.messages_api_server import MODEL, Reply, reply, text, tool_use

FINAL = "Order A-17 ships Tuesday to Oslo, where it is 4 degrees; B-2 is delivered."

# How many times each tool body really ran.
calls: Counter[str] = Counter()


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order's status by its id."""
    calls["lookup_order"] += 1
    return {"order_id": order_id, "status": "shipped" if order_id == "A-17" else "delivered", "city": "Oslo"}


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    calls["get_weather"] += 1
    return f"{city}: 4 degrees, light rain"


@tool(response_format="content_and_artifact")
def ship_date(order_id: str) -> tuple[str, dict[str, Any]]:
    """The day an order ships."""
    calls["ship_date"] += 1
    return "Tuesday", {"order_id": order_id, "weekday": 2}


TOOLS = [lookup_order, get_weather, ship_date]


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    orders: Annotated[list[dict[str, Any]], operator.add]
    probe: str


def script() -> list[Reply]:
    """What the scripted Claude answers: two tool calls at once, then the final answer."""
    return [
        reply(
            text("Checking the weather and the ship date."),
            tool_use("get_weather", {"city": "Oslo"}, id="toolu_weather"),
            tool_use("ship_date", {"order_id": "A-17"}, id="toolu_ship"),
        ),
        reply(text(FINAL)),
    ]


def build(base_url: str) -> Any:
    """The compiled graph; its model calls go to ``base_url``."""
    model = ChatAnthropic(model_name=MODEL, base_url=base_url, api_key="test-key", max_retries=0, timeout=10)
    bound = model.bind_tools(TOOLS)

    def probe_first(state: State) -> dict[str, Any]:
        return {"orders": [lookup_order.invoke({"order_id": state["probe"]})]}

    def probe_second(state: State) -> dict[str, Any]:
        return {"orders": [lookup_order.invoke({"order_id": "B-2"})]}

    async def aprobe_first(state: State) -> dict[str, Any]:
        return {"orders": [await lookup_order.ainvoke({"order_id": state["probe"]})]}

    async def aprobe_second(state: State) -> dict[str, Any]:
        return {"orders": [await lookup_order.ainvoke({"order_id": "B-2"})]}

    def agent(state: State) -> dict[str, Any]:
        return {"messages": [bound.invoke(state["messages"])]}

    async def aagent(state: State) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    graph = StateGraph(State)
    # A RunnableLambda node runs the sync function under invoke() and the async one under ainvoke().
    graph.add_node("probe_first", RunnableLambda(probe_first, afunc=aprobe_first))
    graph.add_node("probe_second", RunnableLambda(probe_second, afunc=aprobe_second))
    graph.add_node("agent", RunnableLambda(agent, afunc=aagent))
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "probe_first")
    graph.add_edge(START, "probe_second")
    graph.add_edge(["probe_first", "probe_second"], "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def question(probe: str = "A-17") -> dict[str, Any]:
    return {
        "messages": [HumanMessage("When does A-17 ship, and what is the weather there?")],
        "orders": [],
        "probe": probe,
    }


def instrumented() -> Iterator[None]:
    """Fixture body: ``spanreplay.instrument_all()`` for one test, undone afterwards."""
    done = spanreplay.instrument_all()
    yield
    for instrumentor in done.values():
        instrumentor.uninstrument()

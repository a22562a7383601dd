"""A small MCP server over stdio for the MCP adapter's tests: ``python mcp_order_server.py CALLS_FILE``.

Its tools append one line to CALLS_FILE each time they really run, so a test can
count the calls that reached the server. ``refund`` refuses amounts over 100 with
an error result (``isError``), as a tool that fails does.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

CALLS = Path(sys.argv[1])
server = MCPServer("orders")


class Order(BaseModel):
    order_id: str
    status: str
    total: float


def _called(name: str, **arguments: object) -> None:
    with CALLS.open("a") as calls:
        calls.write(json.dumps({"tool": name, **arguments}) + "\n")


@server.tool()
def lookup_order(order_id: str) -> Order:
    """The status and total of an order."""
    _called("lookup_order", order_id=order_id)
    return Order(order_id=order_id, status="shipped", total=42.5)


@server.tool()
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order; amounts over 100 are refused."""
    _called("refund", order_id=order_id, amount=amount)
    if amount > 100:
        raise ToolError(f"refund of {amount} for {order_id} exceeds the limit of 100")
    return f"refunded {amount} on {order_id}"


if __name__ == "__main__":
    server.run("stdio")

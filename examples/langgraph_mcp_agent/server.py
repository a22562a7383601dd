"""An order desk as an MCP server over stdio: ``python server.py [CALL_LOG]``.

Its two tools, ``lookup_order`` and ``refund``, append one line to CALL_LOG
(default: ``order_desk_calls.log`` in the current directory) each time they
really run, so you can see that a replay never reaches the server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

CALL_LOG = Path(sys.argv[1] if len(sys.argv) > 1 else "order_desk_calls.log")
# order id: (status, total in EUR)
ORDERS = {"A-17": ("delivered", 42.5), "B-2": ("processing", 18.0)}

server = MCPServer("order-desk")


def _log(tool: str, **arguments: object) -> None:
    with CALL_LOG.open("a") as log:
        log.write(json.dumps({"tool": tool, **arguments}) + "\n")


@server.tool()
def lookup_order(order_id: str) -> dict[str, object]:
    """The status and total of an order."""
    _log("lookup_order", order_id=order_id)
    if order_id not in ORDERS:
        raise ToolError(f"no order {order_id}")
    status, total = ORDERS[order_id]
    return {"order_id": order_id, "status": status, "total": total}


@server.tool()
def refund(order_id: str, amount: float) -> str:
    """Refund part of an order; amounts over its total are refused."""
    _log("refund", order_id=order_id, amount=amount)
    if order_id not in ORDERS or amount > ORDERS[order_id][1]:
        raise ToolError(f"cannot refund {amount} on {order_id}")
    return f"Refunded {amount:.2f} EUR on {order_id}, reference RF-{order_id}-{int(amount * 100)}."


if __name__ == "__main__":
    server.run("stdio")

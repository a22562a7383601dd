"""Tools a foreign trace does not hold: run for real on replay, or refused with ``live=False``.

OpenInference and OpenLLMetry's Anthropic instrumentors record model calls
only; a tool span appears where the application made one. A replay of such a
trace serves every model call, and a ``@spanreplay.tool`` whose runs the trace
does not hold would otherwise diverge at its first call. This is the one place
replay runs real work, only for a trace another instrumentation recorded, and
only for tools of a name the trace holds no recorded result of, and never for a
side effect (``effect=True``): a payment or an email is refused, not run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from spanreplay import semconv as sc
from spanreplay.errors import UnexpectedCallError
from spanreplay.model.events import EventLog

# Returned when the trace holds the tool: replay serves it as usual.
RECORDED: Final = object()


def unrecorded_tool(log: EventLog, key: str, fn: Callable[[], Any], *, live: bool, effect: bool = False) -> Any:
    """``fn()`` when the foreign trace holds no result for tool ``key``; RECORDED when it does.

    Raises UnexpectedCallError instead of running it when ``live`` is false, or when
    the tool changes the world (``effect``): a replay never makes a payment again.
    """
    if not log.run.instrumentation or any(e.kind == sc.KIND_TOOL and e.key == key for e in log):
        return RECORDED
    if effect:
        why = (
            ". It is a side effect (effect=True), so the replay does not run it: it may have happened "
            "when the trace was recorded, and running it again could do it twice. The replay ends here; "
            "record the run with spanreplay's @tool to replay past it."
        )
        attempted = f"side effect tool {key!r}, live"
    elif not live:
        why = ", and live=False forbids running it. Pass live=True (the default) to run tools the trace lacks for real."
        attempted = f"tool {key!r}"
    else:
        return fn()
    raise UnexpectedCallError(
        f"Replay of trace {log.run_id} reached tool {key!r}, which the trace does not hold (it was "
        f"recorded by {log.run.instrumentation}, which records no tool results){why}",
        run_id=log.run_id,
        seq=None,
        call_id=None,
        recorded=None,
        attempted=attempted,
    )

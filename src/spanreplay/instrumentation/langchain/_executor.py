"""LangChain's thread pool, made to start each piece of work where a branch can be given to it.

``ContextThreadPoolExecutor.map`` copies the caller's context once per item up front,
then runs each item in whichever copy it pops when a thread picks it up. The copy the
work runs in is not the one ``submit()`` made, so the branch spanreplay sets at
submission (``spanreplay.run.branches``) is lost: LangGraph's ``ToolNode`` runs a
model response's tool calls through ``map``, and they took their call ids in the
order the threads ran. Inside a run, ``map`` goes through ``submit()`` once per item
instead, as ``Executor.map`` does: each item still runs in a copy of the caller's
context, made at the same moment, and now in the copy that carries its branch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from typing import Any

from spanreplay.run.base import current_run

__all__ = ["EXECUTOR_MODULE", "map_through_submit"]

EXECUTOR_MODULE = "langchain_core.runnables.config"


def map_through_submit(
    wrapped: Callable[..., Iterator[Any]], instance: Executor, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Iterator[Any]:
    if current_run() is None:
        return wrapped(*args, **kwargs)
    return Executor.map(instance, *args, **kwargs)

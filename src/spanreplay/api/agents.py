"""``@agent``: a sub-agent function that runs as a run of its own, nested in the run that calls it."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from .runs import record

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["agent"]


@overload
def agent(fn: F, /) -> F: ...


@overload
def agent(*, name: str | None = None) -> Callable[[F], F]: ...


def agent(fn: Callable[..., Any] | None = None, /, *, name: str | None = None) -> Any:
    """Run a sub-agent function, sync or async, as a run of its own: ``@spanreplay.agent``.

    Each call opens ``record(agent=name)`` around the function: inside an open
    recording, a child run (its own run id, ``spanreplay.run.parent`` naming the
    calling run, its ``invoke_agent {name}`` span a child of the caller's span); inside
    a replay of such a recording, a replay of the child run recorded there; outside
    any run, a top-level run. Calls in parallel (``asyncio.gather``, threads) are
    child runs each, recorded and replayed apart.

    Args:
        fn: the function, when used bare (``@spanreplay.agent``).
        name: the sub-agent's name (``@spanreplay.agent(name="researcher")``); by
            default the function's name.
    """

    def decorate(function: F) -> F:
        agent_name = name or function.__name__
        if inspect.iscoroutinefunction(function):

            @functools.wraps(function)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                async with record(agent=agent_name):
                    return await function(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(function)
        def run(*args: Any, **kwargs: Any) -> Any:
            with record(agent=agent_name):
                return function(*args, **kwargs)

        return run  # type: ignore[return-value]

    if fn is not None:
        return decorate(fn)
    return decorate

"""``@spanreplay.tool``: a tool function as a recorded, replayable boundary."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, overload

from spanreplay import semconv as sc
from spanreplay.model.tool_links import answered
from spanreplay.model.typed_hints import ReturnDecoder
from spanreplay.replaying.effects import EFFECT_ATTRIBUTES
from spanreplay.run.base import BoundaryCall, run_for_boundary

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["RECORDED_TOOL", "is_recorded_tool", "tool"]

# Set on every function ``@spanreplay.tool`` returns: a framework adapter that finds it
# on the function a framework's tool runs leaves the recording to the decorator, so
# the call is recorded once.
RECORDED_TOOL = "__spanreplay_tool__"


def is_recorded_tool(function: object) -> bool:
    """Whether ``function`` is a ``@spanreplay.tool`` wrapper, which records its calls itself.

    A framework adapter that meets one leaves the call to it, so the call is recorded once.
    """
    return bool(getattr(function, RECORDED_TOOL, False))


# Parameters that identify the receiver, not the call: left out of the input.
_RECEIVERS = frozenset({"self", "cls"})


class _Binder:
    """Turns a call's arguments into the input dict ``{parameter: value}``.

    ``inspect.Signature.bind`` costs microseconds; plain positional-or-keyword
    signatures (the common case) take a zip instead.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())
        self.simple = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in params)
        self.names = tuple(p.name for p in params)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self.skip = {n for n in self.names[:1] if n in _RECEIVERS}

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.simple and len(args) <= len(self.names):
            # Fewer args than parameters is the normal case: zip stops at the shorter.
            bound = dict(zip(self.names, args, strict=False))
            if kwargs:
                bound.update(kwargs)
            if len(bound) < len(self.names):
                for name, default in self.defaults.items():
                    bound.setdefault(name, default)
        else:
            ba = self.signature.bind(*args, **kwargs)
            ba.apply_defaults()
            bound = dict(ba.arguments)
        for name in self.skip:
            bound.pop(name, None)
        return bound


@overload
def tool(fn: F, /) -> F: ...
@overload
def tool(*, name: str | None = None, effect: bool = False) -> Callable[[F], F]: ...


def tool(fn: F | None = None, /, *, name: str | None = None, effect: bool = False) -> F | Callable[[F], F]:
    """Record (and replay) each call of a tool function, sync or async.

    The input is the bound arguments, ``{parameter: value}`` with defaults
    applied; the output is the return value. In replay mode the function body
    never runs: the recorded return value or the recorded exception comes back
    instead. The value comes back with the types it had (a dataclass, a datetime,
    a set, ...): the function's return annotation says which where it names them,
    and the types recorded beside the output say the rest (see
    ``spanreplay.register_type`` for classes of your own). Outside any run the
    function runs untouched.

    Use as ``@spanreplay.tool`` or ``@spanreplay.tool(name="search")``.

    ``@spanreplay.tool(effect=True)`` marks a tool that changes the world (a
    payment, an email): its intent (run, seq, call id, masked input) is written
    to the trace file, and committed to Postgres, before the function runs. A
    run killed inside it keeps the intent, which ``spanreplay show`` lists as
    started, never finished; a replay that reaches it raises
    ``UnfinishedEffectError`` (the effect may have happened).
    """

    def decorate(func: F) -> F:
        key = name or func.__name__
        bind = _Binder(func)
        what = f"tool {key!r}"  # how errors and warnings name this boundary
        # The return annotation is read the first time the tool is replayed, not here:
        # it may name a class defined after the function. Then held here: None when the
        # annotation asks for nothing JSON does not give (most tools), so replay skips it.
        returns = ReturnDecoder(func)
        resolved: list[ReturnDecoder | None] = []
        attributes = EFFECT_ATTRIBUTES if effect else None

        def decoder() -> ReturnDecoder | None:
            if not resolved:
                resolved.append(returns.decoder())
            return resolved[0]

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                run = run_for_boundary(what)
                if run is None:
                    return await func(*args, **kwargs)
                bound = bind(args, kwargs)
                decode = (resolved[0] if resolved else decoder()) if run.serves_recorded else None
                linked = _linked(attributes, answered(run, key, bound)) if run.records else attributes
                return await run.call_async(
                    BoundaryCall(sc.KIND_TOOL, key, bound, functools.partial(func, *args, **kwargs), decode, linked)
                )

            setattr(async_wrapper, RECORDED_TOOL, True)
            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            run = run_for_boundary(what)
            if run is None:
                return func(*args, **kwargs)
            bound = bind(args, kwargs)
            decode = (resolved[0] if resolved else decoder()) if run.serves_recorded else None
            # A recording links the call to the tool_use block of the model's last response it answers.
            linked = _linked(attributes, answered(run, key, bound)) if run.records else attributes
            return run.call(
                BoundaryCall(sc.KIND_TOOL, key, bound, functools.partial(func, *args, **kwargs), decode, linked)
            )

        setattr(wrapper, RECORDED_TOOL, True)
        return wrapper  # type: ignore[return-value]

    return decorate(fn) if fn is not None else decorate


def _linked(attributes: dict[str, Any] | None, links: dict[str, Any] | None) -> dict[str, Any] | None:
    """A tool's own start attributes (an effect's mark) with its tool_use link, when it has both."""
    if links is None:
        return attributes
    return links if attributes is None else {**attributes, **links}

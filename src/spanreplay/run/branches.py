"""Tasks and threads started inside a run: each is a branch of the scope that started it.

Parallel work that makes the same call (a uuid, a clock read, a poll with the same
input) must keep its own call ids, or a replay hands one branch another's value:
the ordinal of a call would be taken in whatever order the scheduler ran the
branches, which differs between the recording and the replay. So a task or thread
started inside a run gets a branch scope of its own, ``branch:{name}#{n}``, named
after the function it runs and numbered in the order the code started it. That
order is the code's, not the scheduler's: the number is taken at the start, in the
starting context, not when the branch first reaches a boundary.

Python offers no hook for "a context was copied", so the places that start work
are wrapped, once, the first time a run opens (as OpenTelemetry's threading
instrumentation does for its own context):

- ``asyncio.BaseEventLoop.create_task``: ``create_task``, ``ensure_future``,
  ``gather``, ``TaskGroup`` and ``wait_for`` inside a running loop (``asyncio.run``'s
  main task is not a branch: the code that starts it waits for it);
- ``threading.Thread.start``: a plain thread also runs in a copy of the context
  that started it, so it belongs to the run and scope that started it;
- ``concurrent.futures.ThreadPoolExecutor.submit`` (and so ``map``,
  ``loop.run_in_executor`` and ``asyncio.to_thread``): the work runs in a copy of
  the submitting context; work already wrapped in ``Context.run`` keeps its own
  context, which gets the branch (the innermost one where ``Context.run`` and
  ``functools.partial`` wrap one another: an executor that copies the context
  itself, given work already wrapped, as LangGraph runs its parallel nodes).

While no run is open the wrappers only check a counter and call through. Event
loops that do not derive from ``BaseEventLoop`` (uvloop) and thread pools of
other libraries are not covered: work started there carries no branch, and work
in a thread that carries no context at all is refused on replay (see ``_run``).
When such work makes boundaries at the same time from one scope, the recording
says so as it is made (``spanreplay.recording.concurrent_siblings``).
"""

from __future__ import annotations

import asyncio.base_events
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["install"]

# Set by _run: the number of runs open now, and the function that makes the branch
# scope for work about to start in the calling context (None when there is no run).
# Kept as module state so that the wrappers, installed once, cost one check when idle.
open_runs = 0
BranchStarter = Callable[[str], Callable[[], object] | None]
_starter: BranchStarter | None = None

_installed = False
_install_lock = threading.Lock()


def install(starter: BranchStarter) -> None:
    """Wrap the places that start tasks and threads (once per process)."""
    global _installed, _starter
    _starter = starter
    if _installed:
        return
    with _install_lock:
        if _installed:
            return
        _wrap_create_task()
        _wrap_thread_start()
        _wrap_submit()
        _installed = True


def _enter_branch(name: str) -> Callable[[], object] | None:
    """What sets the new branch's scope in the context the work will run in, if a run is open.

    Callers check ``open_runs`` first, so that idle wrappers cost one comparison.
    """
    starter = _starter
    return starter(name) if starter is not None else None


def _name(fn: Any) -> str:
    """A short, stable name for the work a branch runs: its function's qualified name."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", None) or "work"
    # A call id separates its scopes with "/": keep the name one segment.
    return str(name).replace("/", ".")


def _context_run_target(fn: Any, args: tuple[Any, ...]) -> tuple[contextvars.Context | None, Any]:
    """The context work runs in when it is already wrapped in ``ctx.run``, and the real work.

    Wrappings nest: an executor that copies the context itself (langchain's
    ``ContextThreadPoolExecutor`` submits ``partial(copy_context().run, fn, ...)``) given
    work already wrapped (LangGraph submits ``ctx.run``) runs ``outer.run(inner.run, work)``,
    and the work sees only the innermost context. So the layers of ``functools.partial``
    and ``Context.run`` are peeled to the last one: the branch is set in that context.
    """
    own: contextvars.Context | None = None
    for _ in range(_MAX_LAYERS):
        if isinstance(fn, functools.partial):
            fn, args = fn.func, (*fn.args, *args)
            continue
        owner = getattr(fn, "__self__", None)
        if args and isinstance(owner, contextvars.Context) and getattr(fn, "__name__", "") == "run":
            own, fn, args = owner, args[0], args[1:]
            continue
        break
    return own, fn


# Layers of wrapping peeled at most: only bounds the walk.
_MAX_LAYERS = 32


def _wrap_create_task() -> None:
    original: Any = asyncio.base_events.BaseEventLoop.create_task

    @functools.wraps(original)
    def create_task(
        self: asyncio.base_events.BaseEventLoop,
        coro: Coroutine[Any, Any, T],
        *,
        name: str | None = None,
        context: contextvars.Context | None = None,
    ) -> asyncio.Task[T]:
        # A task made where no loop runs yet is the loop's entry point (asyncio.run's main
        # task, run_until_complete's): its starter waits for it, so it is no parallel branch.
        if open_runs > 0 and asyncio.events._get_running_loop() is not None:
            enter = _enter_branch(_name(coro))
            if enter is not None:
                # A copy even of a context the caller passed: one context given to several
                # tasks must not make them one branch.
                context = contextvars.copy_context() if context is None else context.copy()
                context.run(enter)
        task: asyncio.Task[T] = original(self, coro, name=name, context=context)
        return task

    setattr(asyncio.base_events.BaseEventLoop, "create_task", create_task)  # noqa: B010 (no typed stub fits)


def _wrap_thread_start() -> None:
    original = threading.Thread.start

    @functools.wraps(original)
    def start(self: threading.Thread) -> None:
        if open_runs > 0:
            target = getattr(self, "_target", None)
            enter = _enter_branch(_name(target) if target is not None else type(self).__qualname__)
            if enter is not None:
                context = contextvars.copy_context()
                context.run(enter)
                # An instance attribute: subclasses that override run() are covered too.
                self.run = functools.partial(context.run, self.run)  # type: ignore[method-assign]
        original(self)

    threading.Thread.start = start  # type: ignore[method-assign]


def _wrap_submit() -> None:
    original: Any = ThreadPoolExecutor.submit

    @functools.wraps(original)
    def submit(self: ThreadPoolExecutor, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        if open_runs > 0:
            own, work = _context_run_target(fn, args)
            enter = _enter_branch(_name(work))
            if enter is not None:
                if own is not None:
                    # contextvars.copy_context().run or asyncio.to_thread: the work runs in that
                    # context, made for it alone, so the branch is set there.
                    # A context entered already (RuntimeError) is not the work's own: left as it is.
                    with contextlib.suppress(RuntimeError):
                        own.run(enter)
                else:
                    context = contextvars.copy_context()
                    context.run(enter)
                    fn = functools.partial(context.run, fn)
        future: Future[T] = original(self, fn, *args, **kwargs)
        return future

    setattr(ThreadPoolExecutor, "submit", submit)  # noqa: B010 (no typed stub fits)

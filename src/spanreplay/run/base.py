"""The run base: modes, call-id scopes, and how a boundary finds the run it belongs to.

A run is entered into a context (``with record()``, ``with replay()``) or opened for
the whole process (zero-code mode). A task or thread started inside a run carries it
in its context, in a branch scope of its own (see ``_branches``). A boundary reached
from a context with no run is refused while a replay is open (fail closed) and runs
unrecorded, with a warning, while only recordings are (fail open).
"""

from __future__ import annotations

import enum
import functools
import inspect
import itertools
import logging
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from opentelemetry import context as otel_context

from spanreplay import semconv as sc
from spanreplay.errors import NoRunInContextError, SpanReplayError
from spanreplay.model.error_records import on_refusal
from spanreplay.readers._base import SpanReplayWarning

from . import branches as _branches
from .boundary_call import BoundaryCall, Decoder
from .context import current_run_id

if TYPE_CHECKING:
    from spanreplay.masking import MaskingSession
    from spanreplay.masking._names import NameMasker
    from spanreplay.model.events import EventLog

    from .calls import Call

logger = logging.getLogger("spanreplay")

T = TypeVar("T")

__all__ = [
    "BoundaryCall",
    "Decoder",
    "Mode",
    "Outcome",
    "Run",
    "Scope",
    "current_run",
    "inside_itself",
    "run_for_boundary",
    "set_process_run_factory",
]


class Mode(enum.StrEnum):
    """What a run does at its boundaries."""

    RECORD = "record"
    REPLAY = "replay"


class Outcome(enum.StrEnum):
    """How a replay ended (``ReplayingRun.outcome``); equal to its string value."""

    COMPLETED = "completed"  # every step matched and the run ended as recorded
    REPRODUCED = "reproduced"  # the recorded failure happened again, at the same step
    DIVERGED = "diverged"  # the code stopped matching the recording
    FAILED = "failed"  # the code failed with an error of its own


class Scope:
    """A call-id namespace: the run itself, or one boundary (for calls nested in it)."""

    __slots__ = ("_counters", "busy", "call_id", "context", "run")

    def __init__(self, run: Run, call_id: str, context: otel_context.Context | None) -> None:
        self.run = run
        self.call_id = call_id
        self.context = context
        # Made when a call is first started in this scope: most boundaries nest none.
        self._counters: dict[tuple[str, str], Iterator[int]] | None = None
        # The scope of the sync boundary running from this scope now, if any (record mode):
        # a second one made while it runs came from another thread with no branch between.
        self.busy: Scope | None = None

    def next_call_id(self, kind: str, key: str) -> str:
        counters = self._counters
        counter = counters.get((kind, key)) if counters is not None else None
        if counter is None:
            with _counter_lock:
                if self._counters is None:
                    self._counters = {}
                counter = self._counters.setdefault((kind, key), itertools.count())
        # next() on itertools.count is atomic under the GIL: threads never share an ordinal.
        if self.call_id:
            return f"{self.call_id}/{kind}:{key}#{next(counter)}"
        return f"{kind}:{key}#{next(counter)}"

    def branch(self, name: str) -> Scope:
        """The scope of a task or thread this scope starts: ``branch:{name}#{n}``, n in start order."""
        return Scope(self.run, self.next_call_id(sc.KIND_BRANCH, name), self.context)


# Guards only the creation of a scope's counters, so the hot path takes no lock.
_counter_lock = threading.Lock()

current_run_var: ContextVar[Run | None] = ContextVar("spanreplay_run", default=None)
current_scope_var: ContextVar[Scope | None] = ContextVar("spanreplay_scope", default=None)
# Runs open in this process: bound to a context (``with record()``, ``with replay()``)
# or to the whole process (zero-code mode). A task or thread started inside a run
# carries the run in its context (see _branches); a boundary reached from a context
# with no run can only tell which run it belongs to when the process has one run of
# its own, so otherwise it is refused while a replay is open (fail closed) and runs
# unrecorded while only recordings are (fail open).
_open_runs: list[Run] = []
_process_runs: list[Run] = []
_open_lock = threading.Lock()
# Boundaries already warned about running unrecorded outside any run's context.
_warned_unbound: set[str] = set()


def _process_run() -> Run | None:
    """The run opened for the whole process, when there is exactly one."""
    with _open_lock:
        return _process_runs[0] if len(_process_runs) == 1 else None


def _runs_changed() -> None:
    """Tell the branch wrappers how many runs are open (called with _open_lock held)."""
    _branches.open_runs = len(_open_runs) + len(_process_runs)


def current_run() -> Run | None:
    """The run the calling code executes in, or None.

    Raises:
        NoRunInContextError: a replay is open in this process but the calling code's
            context holds no run (a thread started before the run, say): it cannot
            tell which run it belongs to, and running its real work is not an option.
    """
    return run_for_boundary("")


def run_for_boundary(boundary: str) -> Run | None:
    """``current_run()`` for a boundary named ``boundary`` (``"tool 'lookup'"``), named in errors."""
    run = current_run_var.get()
    if run is not None:
        return run
    only = _process_run()
    if only is not None:
        return only
    factory = _process_run_factory
    if factory is not None:
        run = factory()
        if run is not None:
            return run
    if _open_runs:
        _unbound(boundary)
    return None


def _unbound(boundary: str) -> None:
    """A boundary reached from a context with no run while runs are open elsewhere in the process."""
    with _open_lock:
        replays = [r for r in _open_runs if not r.records]
        recordings = [r.run_id for r in _open_runs if r.records]
    what = boundary or "a boundary"
    fix = (
        "Start the thread or task inside the run (threads, thread pools and asyncio tasks started "
        "there carry it), or hand the work over with contextvars.copy_context().run(fn, ...) or "
        "asyncio.to_thread(fn, ...) from inside the run."
    )
    if replays:
        error = NoRunInContextError(
            f"{what} was called from a thread or task whose context holds no run, while "
            f"{len(replays)} replay(s) are open in this process ({', '.join(r.run_id for r in replays)}); "
            f"spanreplay cannot tell which run it belongs to, and a replay never runs real work. {fix}"
        )
        for replaying in replays:
            replaying.refuse(error)
        raise error
    if recordings and what not in _warned_unbound:
        _warned_unbound.add(what)
        warnings.warn(
            f"spanreplay: {what} was called from a thread or task whose context holds no run while "
            f"run(s) {', '.join(recordings)} are being recorded; it ran unrecorded, and a replay of "
            f"those runs will not have it. {fix}",
            SpanReplayWarning,
            stacklevel=4,
        )
    return None


def _start_branch(name: str) -> Callable[[], object] | None:
    """For _branches: what sets a new task's or thread's scope, when the caller is in a run."""
    run = current_run_var.get() or _process_run()
    if run is None:
        return None
    if not run.branches:
        return _same_scope
    return functools.partial(current_scope_var.set, run._scope().branch(name))


def inside_itself(run: Run, kind: str, key: str) -> bool:
    """Whether the calling code runs inside boundary ``kind``/``key`` of ``run`` itself.

    A boundary made inside the same boundary (a LangChain tool whose body calls the MCP
    tool of its name, each instrumented) is one step: the outer one records it, and its
    replay serves it whole, so the inner one is never asked for.
    """
    scope = current_scope_var.get()
    if scope is None or scope.run is not run or not scope.call_id:
        return False
    return scope.call_id.rpartition("/")[2].startswith(f"{kind}:{key}#")


def joinable_run() -> Run | None:
    """The run that ``record()`` joins when the calling context holds none: the one open."""
    run = current_run_var.get()
    if run is None:
        with _open_lock:
            candidates = _process_runs or _open_runs
            run = candidates[0] if len(candidates) == 1 else None
    return run


def _same_scope() -> None:
    """A run recorded before branches: the new task or thread shares its starter's scope."""


# Zero-code mode (SPANREPLAY_MODE) installs a factory that opens one process-wide
# run the first time a boundary finds no run, so a process that opens runs itself
# never gets an empty extra run.
_process_run_factory: Callable[[], Run | None] | None = None


def set_process_run_factory(factory: Callable[[], Run | None] | None) -> None:
    """Install (or remove, with None) the factory ``current_run()`` falls back to."""
    global _process_run_factory
    _process_run_factory = factory


def is_async(fn: Callable[..., Any]) -> bool:
    # An object whose class defines ``async def __call__`` is async too.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


class Run:
    """One execution of an agent, recorded or replayed. Use ``record()`` or ``replay()``.

    A Run is a context manager, sync (``with``) and async (``async with``).

    What a boundary asks of its run is the contract below, the same for every kind
    of run: ``call()``/``call_async()`` with a ``BoundaryCall``, ``begin()`` for work
    that ends later, and the properties ``records``, ``serves_recorded`` and
    ``replayed_log``. Code above the run never asks which class of run it holds.
    """

    mode: Mode
    # Whether boundaries hand over their decoders: the run serves recorded outputs (a
    # replay, a fork before it goes live), which come back with the types they had.
    # A record() opened inside such a run joins it rather than recording a run of its own.
    serves_recorded: bool = False
    # Whether the run writes its boundaries as spans (a recording, a fork); a replay writes
    # none. Span attributes that cost something to make (request attributes, a tool's link
    # to the model response it answers) are worth making only then. A class attribute, not
    # a property: a boundary reads it on every call.
    records: bool = False
    # Tasks and threads started in the run get branch scopes of their own (see _branches);
    # False only when replaying a run recorded before branches existed.
    branches: bool = True
    # Masks a name outside the payloads (a tool key, the agent, an exception class)
    # where a detector fires: set by each kind of run from the masker it works with.
    _names: NameMasker
    # Masks payloads as the run records them (or as the replayed run recorded them); None: masking is off.
    _masking: MaskingSession | None = None

    def __init__(self, run_id: str, agent: str) -> None:
        self.run_id = run_id
        self.agent = agent
        self._seq = itertools.count(1)
        self.root = Scope(self, "", None)
        self._tokens: list[tuple[Token[Run | None], Token[Scope | None], Token[str | None], object]] = []
        # Calls started with begin() and not yet finished; the run ends them when it ends.
        self.pending_calls: dict[int, Call] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.run_id} mode={self.mode.value}>"

    # -- what the run does ----------------------------------------------------

    @property
    def replayed_log(self) -> EventLog | None:
        """The recording this run serves every boundary from (a replay), or None.

        None when the real work may run: a recording, or a fork (which serves steps up
        to its fork point, and records them anew).
        """
        return None

    def end_note(self, raised: BaseException | None) -> str | None:
        """A line for the person who started the program on how the run ended, or None.

        Zero-code mode writes it to stderr when it ends a run it opened; ``raised``
        is what the run ended with.
        """
        return None

    # -- boundary -------------------------------------------------------------

    def boundary(
        self,
        kind: str,
        key: str,
        input: Any,
        fn: Callable[[], T],
        *,
        decode: Decoder | None = None,
        attributes: dict[str, Any] | None = None,
    ) -> T:
        """Run ``fn`` as boundary ``kind``/``key`` of this run; see ``spanreplay.boundary``."""
        call = BoundaryCall(kind, key, input, fn, decode, attributes)  # by position: see BoundaryCall
        return cast(T, self.call_async(call) if is_async(fn) else self.call(call))

    def call(self, call: BoundaryCall) -> Any:
        """Take boundary ``call``, whose function is sync, and return its result.

        Recording runs the function and records its outcome; replay serves the
        recorded one (an awaitable when the recorded call was awaited) and never runs it.
        """
        raise NotImplementedError

    def call_async(self, call: BoundaryCall) -> Awaitable[Any]:
        """``call()`` for a function that returns an awaitable: awaiting the result gives the outcome.

        The call id and seq are taken now, when the boundary is called, not when it is awaited.
        """
        raise NotImplementedError

    def begin(
        self,
        kind: str,
        key: str,
        input: Any,
        *,
        attributes: dict[str, Any] | None = None,
        span_name: str | None = None,
        input_json: bytes | None = None,
    ) -> Call:
        """Start boundary ``kind``/``key`` whose work ends later than the function that starts it.

        For work that outlives one call, such as a response stream that the agent
        reads after the request returned. The call id and seq are taken now. In
        record mode the span stays open until ``Call.finish()`` or ``Call.fail()``
        (or the run's end); in replay mode ``Call.recorded`` holds the recorded
        event (or the divergence error is raised here) and the real work must not run.
        ``input_json`` is ``input`` already encoded by ``encode_input``, when the
        caller has it: a replay then does not encode a large input twice.
        """
        raise NotImplementedError

    def refuse(self, error: SpanReplayError) -> None:
        """A boundary that could not tell its run was refused while this run was open.

        Only a replay keeps it (it ends with that error); a recording has nothing to refuse.
        """

    def _end_pending_calls(self) -> None:
        for call in list(self.pending_calls.values()):
            call.abandon()

    def _scope(self) -> Scope:
        scope = current_scope_var.get()
        return scope if scope is not None and scope.run is self else self.root

    def _next_call(self, kind: str, key: str) -> tuple[Scope, str, str, int]:
        """A new call's scope, its key as the recording holds it, its call id and its seq.

        The key is in the call id, the span name and its attributes, so it is masked
        first (where a detector fires), alike on record and on replay. Ids are taken
        when the boundary is called, not when its work runs or completes: sibling
        tasks of one gather() get their ordinals in call order.
        """
        # _scope(), inline: every boundary of every kind of run passes here.
        scope = current_scope_var.get()
        if scope is None or scope.run is not self:
            scope = self.root
        key = self._names(key)
        return scope, key, scope.next_call_id(kind, key), next(self._seq)

    # -- context manager ------------------------------------------------------

    def _activate(self, otel_ctx: otel_context.Context | None) -> None:
        otel_token = otel_context.attach(otel_ctx) if otel_ctx is not None else None
        self._tokens.append(
            (
                current_run_var.set(self),
                current_scope_var.set(self.root),
                current_run_id.set(self._context_run_id()),
                otel_token,
            )
        )
        with _open_lock:
            _open_runs.append(self)
            _runs_changed()
        _branches.install(_start_branch)

    def _deactivate(self) -> None:
        with _open_lock:
            if self in _open_runs:
                _open_runs.remove(self)
            _runs_changed()
        self._unbind()

    def _unbind(self) -> None:
        """Reset the context variables ``_activate`` set, the latest first."""
        run_token, scope_token, id_token, otel_token = self._tokens.pop()
        current_run_id.reset(id_token)
        current_scope_var.reset(scope_token)
        current_run_var.reset(run_token)
        if otel_token is not None:
            otel_context.detach(cast(Any, otel_token))

    def _context_run_id(self) -> str | None:
        return self.run_id

    def enter_process_wide(self, *, shared: bool = True) -> Run:
        """Open the run for the whole process rather than for the calling context.

        ``current_run()`` then finds it from every thread and task that has no run
        of its own. Zero-code mode opens its run this way, on first use, from
        whatever task or thread makes the first call. End it with ``exit_process_wide``.

        ``shared=False`` opens it for no context at all: only the factory that
        ``current_run()`` falls back to hands it out (one run per trace does this,
        so that one trace's run is never found from another trace).
        """
        self.__enter__()
        with _open_lock:
            if self in _open_runs:
                _open_runs.remove(self)
            if shared:
                _process_runs.append(self)
            _runs_changed()
        # Unbind it from this context again: a context variable set inside one task
        # would be invisible to the others and could not be reset from another context.
        self._unbind()
        return self

    def exit_process_wide(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """End a run opened with ``enter_process_wide`` (at interpreter exit, say)."""
        with _open_lock:
            if self in _process_runs:
                _process_runs.remove(self)
            _runs_changed()
        self._activate(self.root.context)
        return self.__exit__(exc_type, exc, tb)

    def __enter__(self) -> Run:
        raise NotImplementedError

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        raise NotImplementedError

    async def __aenter__(self) -> Run:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return self.__exit__(exc_type, exc, tb)


def _refused_in_current_run(error: SpanReplayError) -> None:
    """A recorded failure replay refused to raise again ends the open replay with it."""
    run = current_run_var.get()
    if run is not None:
        run.refuse(error)


on_refusal(_refused_in_current_run)

"""Runs, modes, call ids and ``boundary()``: the one choke point of an agent.

In record mode a boundary runs the real work and emits a span that carries its
input and its output or error. In replay mode it serves the recorded result by
call id and never runs the real work. Outside any run it just runs the work.
"""

from __future__ import annotations

import asyncio
import enum
import functools
import inspect
import itertools
import logging
import os
import re
import secrets
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final, TypeVar, cast

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import _branches, _codec, _typed
from . import _semconv as sc
from ._alerts import run_failed
from ._config import masker, settings
from ._context import current_run_id
from ._events import ErrorInfo, Event, EventLog
from ._replay import ReplayEngine
from .errors import (
    ConfigurationError,
    NoRunInContextError,
    OutcomeChangedError,
    RecordedError,
    ReplayDivergenceError,
    SpanReplayError,
)
from .masking import MaskingSession
from .readers._base import SpanReplayWarning

logger = logging.getLogger("spanreplay")

T = TypeVar("T")
Decoder = Callable[[Any], Any]

__all__ = ["Call", "Mode", "Run", "boundary", "current_run", "record", "replay"]


class Mode(enum.StrEnum):
    """What a run does at its boundaries."""

    RECORD = "record"
    REPLAY = "replay"


_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$")


def new_run_id(now: datetime | None = None) -> str:
    """``run_20261129_021503_a1b2c3d4``: the UTC start time, then 32 random bits."""
    now = now or datetime.now(UTC)
    return f"run_{now:%Y%m%d_%H%M%S}_{secrets.token_hex(4)}"


class _Scope:
    """A call-id namespace: the run itself, or one boundary (for calls nested in it)."""

    __slots__ = ("_counters", "call_id", "context", "run")

    def __init__(self, run: Run, call_id: str, context: otel_context.Context | None) -> None:
        self.run = run
        self.call_id = call_id
        self.context = context
        # Made when a call is first started in this scope: most boundaries nest none.
        self._counters: dict[tuple[str, str], Iterator[int]] | None = None

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

    def branch(self, name: str) -> _Scope:
        """The scope of a task or thread this scope starts: ``branch:{name}#{n}``, n in start order."""
        return _Scope(self.run, self.next_call_id(sc.KIND_BRANCH, name), self.context)


# Results that cannot be awaitable: skips the slower isawaitable() check for most tools.
_PLAIN_RESULTS = frozenset({dict, list, str, int, float, bool, type(None), tuple, bytes})

# Guards only the creation of a scope's counters, so the hot path takes no lock.
_counter_lock = threading.Lock()

_current_run: ContextVar[Run | None] = ContextVar("spanreplay_run", default=None)
_current_scope: ContextVar[_Scope | None] = ContextVar("spanreplay_scope", default=None)
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
    run = _current_run.get()
    if run is not None:
        return run
    with _open_lock:
        only = _process_runs[0] if len(_process_runs) == 1 else None
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
        replays = [r for r in _open_runs if isinstance(r, ReplayingRun)]
        recordings = [r.run_id for r in _open_runs if not isinstance(r, ReplayingRun)]
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
            replaying.engine.refuse(error)
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
    run = _current_run.get()
    if run is None:
        with _open_lock:
            run = _process_runs[0] if len(_process_runs) == 1 else None
        if run is None:
            return None
    if not run.branches:
        return _same_scope
    return functools.partial(_current_scope.set, run._scope().branch(name))


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


def _is_async(fn: Callable[..., Any]) -> bool:
    # An object whose class defines ``async def __call__`` is async too.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


class Run:
    """One execution of an agent, recorded or replayed. Use ``record()`` or ``replay()``.

    A Run is a context manager, sync (``with``) and async (``async with``).
    """

    mode: Mode
    # Tasks and threads started in the run get branch scopes of their own (see _branches);
    # False only when replaying a run recorded before branches existed.
    branches: bool = True

    def __init__(self, run_id: str, agent: str) -> None:
        self.run_id = run_id
        self.agent = agent
        self._seq = itertools.count(1)
        self._root = _Scope(self, "", None)
        self._tokens: list[tuple[Token[Run | None], Token[_Scope | None], Token[str | None], object]] = []
        # Calls started with begin() and not yet finished; the run ends them when it ends.
        self._pending_calls: dict[int, Call] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.run_id} mode={self.mode.value}>"

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
        return cast(T, self._call(kind, key, input, fn, _is_async(fn), decode, attributes))

    def _call(
        self,
        kind: str,
        key: str,
        input: Any,
        fn: Callable[[], Any],
        is_async: bool,
        decode: Decoder | None,
        attributes: dict[str, Any] | None,
    ) -> Any:
        """``boundary()`` once it is known whether ``fn`` is async (``@tool`` knows it up front)."""
        raise NotImplementedError

    def begin(
        self,
        kind: str,
        key: str,
        input: Any,
        *,
        attributes: dict[str, Any] | None = None,
        span_name: str | None = None,
    ) -> Call:
        """Start boundary ``kind``/``key`` whose work ends later than the function that starts it.

        For work that outlives one call, such as a response stream that the agent
        reads after the request returned. The call id and seq are taken now. In
        record mode the span stays open until ``Call.finish()`` or ``Call.fail()``
        (or the run's end); in replay mode ``Call.recorded`` holds the recorded
        event (or the divergence error is raised here) and the real work must not run.
        """
        raise NotImplementedError

    def _end_pending_calls(self) -> None:
        for call in list(self._pending_calls.values()):
            call.abandon()

    def _scope(self) -> _Scope:
        scope = _current_scope.get()
        return scope if scope is not None and scope.run is self else self._root

    # -- context manager ------------------------------------------------------

    def _activate(self, otel_ctx: otel_context.Context | None) -> None:
        otel_token = otel_context.attach(otel_ctx) if otel_ctx is not None else None
        self._tokens.append(
            (
                _current_run.set(self),
                _current_scope.set(self._root),
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
        run_token, scope_token, id_token, otel_token = self._tokens.pop()
        current_run_id.reset(id_token)
        _current_scope.reset(scope_token)
        _current_run.reset(run_token)
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
        run_token, scope_token, id_token, otel_token = self._tokens.pop()
        current_run_id.reset(id_token)
        _current_scope.reset(scope_token)
        _current_run.reset(run_token)
        if otel_token is not None:
            otel_context.detach(cast(Any, otel_token))
        return self

    def exit_process_wide(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        """End a run opened with ``enter_process_wide`` (at interpreter exit, say)."""
        with _open_lock:
            if self in _process_runs:
                _process_runs.remove(self)
            _runs_changed()
        self._activate(self._root.context)
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


class RecordingRun(Run):
    """A run in record mode: real work runs, each boundary becomes a span."""

    mode = Mode.RECORD

    def __init__(self, agent: str, run_id: str | None = None, *, forked_from: str | None = None) -> None:
        if run_id is not None and not _RUN_ID.match(run_id):
            raise ConfigurationError(
                f"Run id {run_id!r} cannot name a trace file; use letters, digits, '_', '.' and '-' "
                "(or leave run_id out to get run_YYYYMMDD_HHMMSS_xxxxxxxx)."
            )
        super().__init__(run_id or new_run_id(), agent)
        self.forked_from = forked_from
        self._span: trace.Span | None = None
        self._strict = False
        self._failed = False  # an internal failure was logged: log later ones quietly
        self._tracer: trace.Tracer = trace.NoOpTracer()
        # Masking runs on every payload before the codec sees it; one session per run
        # remembers what it masked.
        self._masking: MaskingSession | None = None
        # A model call's input repeats the conversation so far: written as a reference to the last one.
        self._inputs = _codec.InputHistory()
        # (kind, key) -> what each of its spans starts with (see _boundary).
        self._boundaries: dict[tuple[str, str], tuple[str, SpanKind, dict[str, Any]]] = {}

    def __enter__(self) -> RecordingRun:
        ctx: otel_context.Context | None = None
        try:
            config = settings()
            self._strict = config.strict
            self._tracer = config.tracer
            if config.masker is not None and config.masker.enabled:
                self._masking = config.masker.session()
            attributes: dict[str, Any] = {
                sc.RUN_ID: self.run_id,
                sc.RUN_STATUS: sc.RUN_STATUS_RUNNING,
                sc.SCHEMA: sc.SCHEMA_VERSION,
                sc.GEN_AI_OPERATION_NAME: sc.OPERATION_INVOKE_AGENT,
                sc.GEN_AI_AGENT_NAME: self.agent,
                sc.RUN_MASKING: config.masker.fingerprint if config.masker is not None else "off",
            }
            if self.forked_from:
                attributes[sc.RUN_FORKED_FROM] = self.forked_from
            self._span = self._tracer.start_span(
                sc.run_span_name(self.agent), kind=SpanKind.INTERNAL, attributes=attributes
            )
            ctx = trace.set_span_in_context(self._span)
        except Exception:
            # Without a tracer the boundaries still run their real work, unrecorded.
            self._tracer = trace.NoOpTracer()
            self._internal_failure("start the run span")
        self._root.context = ctx
        self._activate(ctx)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end_pending_calls()
        span = self._span
        try:
            if span is not None:
                steps = next(self._seq) - 1
                attributes: dict[str, Any] = {sc.RUN_STEPS: steps}
                if exc is None:
                    attributes[sc.RUN_STATUS] = sc.RUN_STATUS_OK
                    span.set_status(Status(StatusCode.OK))
                else:
                    attributes[sc.RUN_STATUS] = sc.RUN_STATUS_ERROR
                    attributes[sc.ERROR_TYPE] = type(exc).__qualname__
                    record, masked = self._mask("run", self.agent, "error", _codec.error_record(exc))
                    _codec.add_payload(attributes, sc.RUN_ERROR, _codec.encode_output(record))
                    if masked:
                        attributes[sc.RUN_ERROR + sc.MASKED_SUFFIX] = masked
                    span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
                span.set_attributes(attributes)
                span.end()
        except Exception:
            self._internal_failure("end the run span")
        finally:
            self._deactivate()
        if span is not None and isinstance(exc, Exception):  # not for Ctrl-C or sys.exit()
            try:
                run_failed(self.run_id, self.agent, exc, tb)
            except Exception:
                self._internal_failure("log the failure alert")

    def _internal_failure(self, what: str) -> None:
        """Report a failure of spanreplay's own: raised when strict, else logged once per run."""
        if self._strict:
            raise
        if self._failed:
            logger.debug("spanreplay could not %s for run %s", what, self.run_id, exc_info=True)
            return
        self._failed = True
        logger.exception(
            "spanreplay could not %s for run %s; the agent continues with less telemetry (further "
            "failures of this run are logged at DEBUG level)",
            what,
            self.run_id,
        )

    def _call(
        self,
        kind: str,
        key: str,
        input: Any,
        fn: Callable[[], Any],
        is_async: bool,
        decode: Decoder | None,
        attributes: dict[str, Any] | None,
    ) -> Any:
        scope = self._scope()
        # Ids are taken now, when the boundary is called, not when its work runs or
        # completes: sibling tasks of one gather() get their ordinals in call order.
        call_id = scope.next_call_id(kind, key)
        seq = next(self._seq)
        if is_async:
            return self._record_async(scope, call_id, seq, kind, key, input, fn, attributes)
        span, child = self._start(scope, call_id, seq, kind, key, input, attributes)
        scope_token = _current_scope.set(child)
        otel_token = otel_context.attach(child.context) if child.context is not None else None
        try:
            result = fn()
        except BaseException as exc:
            self._finish(span, kind, key, None, exc)
            raise
        finally:
            if otel_token is not None:
                otel_context.detach(otel_token)
            _current_scope.reset(scope_token)
        if type(result) not in _PLAIN_RESULTS and inspect.isawaitable(result):
            # fn was a plain callable that returned a coroutine (``lambda: client.get(url)``):
            # the work runs when the caller awaits, so record what the await gives.
            return self._record_awaited(span, kind, key, child, result)
        self._finish(span, kind, key, result, None)
        return result

    async def _record_async(
        self,
        scope: _Scope,
        call_id: str,
        seq: int,
        kind: str,
        key: str,
        input: Any,
        fn: Callable[[], Awaitable[Any]],
        attributes: dict[str, Any] | None,
    ) -> Any:
        span, child = self._start(scope, call_id, seq, kind, key, input, attributes)
        return await self._record_awaited(span, kind, key, child, fn())

    async def _record_awaited(
        self, span: trace.Span | None, kind: str, key: str, child: _Scope, awaitable: Awaitable[Any]
    ) -> Any:
        scope_token = _current_scope.set(child)
        otel_token = otel_context.attach(child.context) if child.context is not None else None
        try:
            result = await awaitable
        except BaseException as exc:
            self._finish(span, kind, key, None, exc, awaited=True)
            raise
        finally:
            if otel_token is not None:
                otel_context.detach(otel_token)
            _current_scope.reset(scope_token)
        self._finish(span, kind, key, result, None, awaited=True)
        return result

    def _start(
        self,
        scope: _Scope,
        call_id: str,
        seq: int,
        kind: str,
        key: str,
        input: Any,
        extra: dict[str, Any] | None,
    ) -> tuple[trace.Span | None, _Scope]:
        try:
            boundary = self._boundaries.get((kind, key))
            if boundary is None:
                boundary = self._boundary(kind, key)
            name, span_kind, constant = boundary
            # Extra attributes go first: past its count limit the SDK evicts the oldest,
            # and losing a GenAI attribute is better than losing the replay payload.
            # Copying the boundary's attributes keeps their order; the seq and call id
            # then fill the slots held for them.
            attributes: dict[str, Any] = {**extra, **constant} if extra else constant.copy()
            attributes[sc.SEQ] = seq
            attributes[sc.CALL_ID] = call_id
            input, data, masked = self._masked_payload(kind, key, "input", input, _codec.encode_input)
            self._inputs.add_input(attributes, kind, key, seq, input, data)
            if masked:
                attributes[sc.INPUT + sc.MASKED_SUFFIX] = masked
            if extra:  # the only way message content gets here
                self._mask_content(kind, key, attributes)
            span = self._tracer.start_span(
                name,
                context=scope.context,
                kind=span_kind,
                attributes=attributes,
            )
            return span, _Scope(self, call_id, trace.set_span_in_context(span))
        except Exception:
            self._internal_failure(f"start the span of {kind} {key!r}")
            return None, _Scope(self, call_id, scope.context)

    def _boundary(self, kind: str, key: str) -> tuple[str, SpanKind, dict[str, Any]]:
        """A boundary's span name, span kind and the attributes every call of it starts with.

        The same for each call of one kind and key in a run: made once, copied per call.
        The seq and call id are held in their place (filled in per call) so the
        attributes keep the order the trace file has always written them in.
        """
        constant: dict[str, Any] = {
            sc.RUN_ID: self.run_id,
            sc.SEQ: 0,
            sc.CALL_ID: "",
            sc.KIND: kind,
            sc.KEY: key,
            sc.SCHEMA: sc.SCHEMA_VERSION,
        }
        if kind == sc.KIND_TOOL:
            constant[sc.GEN_AI_OPERATION_NAME] = sc.OPERATION_EXECUTE_TOOL
            constant[sc.GEN_AI_TOOL_NAME] = key
        boundary = (
            sc.boundary_span_name(kind, key),
            SpanKind.CLIENT if kind == sc.KIND_MODEL else SpanKind.INTERNAL,
            constant,
        )
        if len(self._boundaries) < 1024:  # a run with ever new keys does not grow it without end
            self._boundaries[(kind, key)] = boundary
        return boundary

    def _finish(
        self,
        span: trace.Span | None,
        kind: str,
        key: str,
        result: Any,
        exc: BaseException | None,
        *,
        awaited: bool = False,
    ) -> None:
        if span is None:
            return
        try:
            attributes: dict[str, Any] = {sc.AWAITED: True} if awaited else {}
            types = None
            if exc is None:
                # Values JSON cannot say (a datetime, a dataclass) are written as readable JSON
                # and named by type tags beside it, so replay gives back the same types.
                part, name, (value, types, unencodable) = "output", sc.OUTPUT, _typed.to_json(result)
                if unencodable:
                    _typed.report_unencodable(self, self.run_id, kind, key, unencodable)
            else:
                part, name, value = "error", sc.ERROR, _codec.error_record(exc)
            _, data, masked = self._masked_payload(kind, key, part, value, _codec.encode_output)
            _codec.add_payload(attributes, name, data)
            if masked:
                attributes[name + sc.MASKED_SUFFIX] = masked
                if types is not None:
                    # A masked value is recorded as its masked text: its tag goes (a tag for each
                    # item, so that one masked item does not take its siblings' tags with it).
                    types = _typed.without_masked(_typed.to_json(result, collapse=False)[1] or "{}", masked)
            if types is not None:
                _codec.add_payload(attributes, sc.OUTPUT_TYPES, types.encode())
            if exc is not None:
                attributes[sc.ERROR_TYPE] = type(exc).__qualname__
            span.set_attributes(attributes)
            if exc is not None:
                span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            span.end()
        except Exception:
            self._internal_failure("finish a boundary span")

    def _mask(self, kind: str, key: str, part: str, value: Any) -> tuple[Any, str | None]:
        """``value`` masked, and the JSON list of the paths masked (None when none were)."""
        session = self._masking
        if session is None:
            return value, None
        try:
            result = session.mask(kind, key, value, part=part)
        except Exception:
            self._internal_failure(f"mask the {part} of {kind} {key!r}")
            # What could not be masked is not recorded at all.
            return _WITHHELD, _MASKING_FAILED
        if not result.fired:
            return result.value, None
        return result.value, orjson.dumps(result.fired_records()).decode()

    def _masked_payload(
        self, kind: str, key: str, part: str, value: Any, encode: Callable[[Any], bytes]
    ) -> tuple[Any, bytes, str | None]:
        """``value`` masked, its JSON written by ``encode``, and the JSON list of the paths
        masked (None when none were).

        The payload is encoded first and masking reads those bytes: a payload in which
        nothing can be masked (most) is settled by one scan of them, and its JSON is
        written once.
        """
        try:
            data = encode(value)
        except Exception:
            # Not JSON as it is: masking goes first, as it may replace what could not be
            # encoded (or withhold it); the encoding then raises if it still cannot.
            value, masked = self._mask(kind, key, part, value)
            return value, encode(value), masked
        session = self._masking
        if session is None:
            return value, data, None
        try:
            result = session.mask_encoded(kind, key, value, data, part=part)
        except Exception:
            self._internal_failure(f"mask the {part} of {kind} {key!r}")
            return _WITHHELD, encode(_WITHHELD), _MASKING_FAILED
        if result is None:
            return value, data, None
        return result.value, encode(result.value), orjson.dumps(result.fired_records()).decode()

    def _mask_content(self, kind: str, key: str, attributes: dict[str, Any]) -> None:
        """Mask the opt-in GenAI message-content attributes (JSON text) in place."""
        if self._masking is None:
            return
        for name, part in _CONTENT_ATTRIBUTES:
            text = attributes.get(name)
            if isinstance(text, str):
                try:
                    content = orjson.loads(text)
                except orjson.JSONDecodeError:
                    content = text
                masked, _ = self._mask(kind, key, part, content)
                attributes[name] = masked if isinstance(masked, str) else orjson.dumps(masked).decode()

    def begin(
        self,
        kind: str,
        key: str,
        input: Any,
        *,
        attributes: dict[str, Any] | None = None,
        span_name: str | None = None,
    ) -> Call:
        scope = self._scope()
        call_id = scope.next_call_id(kind, key)
        seq = next(self._seq)
        span, child = self._start(scope, call_id, seq, kind, key, input, attributes)
        if span is not None and span_name is not None:
            span.update_name(span_name)
        call = Call(self, kind, key, call_id, seq, child, span=span)
        self._pending_calls[id(call)] = call
        return call


class ReplayingRun(Run):
    """A run in replay mode: every boundary is served from the recording.

    Attributes:
        events: the EventLog being replayed.
        outcome: after the run ends, one of ``"completed"``, ``"reproduced"``
            (the recorded failure happened again), ``"diverged"`` or ``"failed"``.
    """

    mode = Mode.REPLAY

    def __init__(self, events: EventLog, *, ignore_paths: Sequence[str] = (), strict: bool = True) -> None:
        super().__init__(events.run_id, events.run.agent)
        self.events = events
        self.engine = ReplayEngine(events, ignore_paths=ignore_paths)
        self.strict = strict
        self.outcome: str | None = None
        # Call ids with branch scopes came with schema 3; a run recorded before is replayed
        # as it was recorded: tasks and threads share the scope that started them.
        self.branches = any(e.schema_version >= sc.SCHEMA_VERSION_BRANCHES for e in events)
        # Inputs are compared in their masked form, masked as when recording: a
        # masked value that a served output handed to the next input matches.
        current = masker()
        recorded = events.run.masking
        if recorded is not None and recorded != current.fingerprint:
            raise ConfigurationError(_masking_mismatch(events.run_id, recorded, current.fingerprint))
        self._masking: MaskingSession | None = current.session() if current.enabled else None

    def _context_run_id(self) -> str | None:
        # Replay emits no spans: nothing started under it should be stamped as the run.
        return None

    def __enter__(self) -> ReplayingRun:
        self._activate(None)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._deactivate()
        first = self.engine.first_failure
        if first is not None and exc is not first and not _raised_from(exc, first):
            self._raise_caught(first, exc)
        if first is not None and not isinstance(first, ReplayDivergenceError):
            self.outcome = "diverged"  # a boundary refused for want of a run (NoRunInContextError)
            return
        recorded = self.events.run.error
        if isinstance(exc, ReplayDivergenceError):
            if self.events.run.status == sc.RUN_STATUS_CRASHED and exc.recorded is None:
                self.outcome = "reproduced"  # the code reached the point where the recorded process died
            else:
                self.outcome = "diverged"
            return
        if exc is not None:
            if recorded is not None and _same_error(recorded, exc, self._masked_message):
                self.outcome = "reproduced"
                return
            self.outcome = "failed"
            if isinstance(exc, Exception):
                attempted = f"failed with {type(exc).__qualname__}: {exc}"
                recorded_side = f"failed with {recorded}" if recorded else "did not fail"
                raise OutcomeChangedError(
                    f"Replay of run {self.run_id} {attempted}, but the recorded run {recorded_side}; every "
                    f"step served matched the recording.\nRecorded: the run {recorded_side} (status "
                    f"{self.events.run.status})\nAttempted: the run {attempted}\nThe change is in the code "
                    "between the boundaries; the exception this one came from shows where.",
                    run_id=self.run_id,
                    seq=None,
                    call_id=None,
                    recorded=str(recorded) if recorded else f"run {self.events.run.status}",
                    attempted=f"{type(exc).__qualname__}: {exc}",
                ) from exc
            return
        if self.strict:
            try:
                self.engine.check_finished()
            except ReplayDivergenceError:
                self.outcome = "diverged"
                raise
        if recorded is not None and self.events.run.status == sc.RUN_STATUS_ERROR:
            self.outcome = "diverged"
            raise OutcomeChangedError(
                f"Replay of run {self.run_id} completed, but the recorded run failed with {recorded}; every "
                f"step served matched the recording.\nRecorded: the run failed with {recorded}\nAttempted: the "
                "run completed without error\nThe failure no longer happens: the code between the boundaries "
                "changed (or fixed it).",
                run_id=self.run_id,
                seq=None,
                call_id=None,
                recorded=str(recorded),
                attempted="completed without error",
            )
        self.outcome = "completed"

    def _raise_caught(self, first: SpanReplayError, exc: BaseException | None) -> None:
        """The first divergence decides the outcome, even when the code caught it and went on."""
        self.outcome = "diverged"
        if exc is not None and not isinstance(exc, Exception):
            return  # Ctrl-C or sys.exit() goes on as it is
        where = f" at seq {first.seq}" if isinstance(first, ReplayDivergenceError) and first.seq else ""
        if exc is None:
            then = "and the run then completed"
        elif self.events.run.error is not None and _same_error(self.events.run.error, exc, self._masked_message):
            then = (
                f"and the run then failed with the recorded error ({self.events.run.error}), which does "
                "not count as reproduced: the replay had left the recorded path before it"
            )
        else:
            then = f"and the run then ended with {type(exc).__qualname__}: {exc}"
        first.add_note(
            f"The code caught this error{where} and went on, {then}. From that point the replay ran "
            "on a path the recording does not have, so it ends as diverged, with this first error "
            "raised again."
        )
        raise first

    def _call(
        self,
        kind: str,
        key: str,
        input: Any,
        fn: Callable[[], Any],
        is_async: bool,
        decode: Decoder | None,
        attributes: dict[str, Any] | None,
    ) -> Any:
        scope = self._scope()
        call_id = scope.next_call_id(kind, key)
        seq = next(self._seq)
        event = self.engine.take(scope.call_id, call_id, kind, key, seq, self._encoded_input(kind, key, input, call_id))
        if is_async or event.awaited:
            return _served_async(event, decode)
        return _served(event, decode)

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
        """See ``Run.begin``; ``input_json`` is ``input`` already encoded by ``_codec.encode_input``.

        A caller that had to encode the input anyway (to check it) passes the bytes,
        and a large input is not encoded twice.
        """
        scope = self._scope()
        call_id = scope.next_call_id(kind, key)
        seq = next(self._seq)
        data = self._encoded_input(kind, key, input, call_id, input_json)
        event = self.engine.take(scope.call_id, call_id, kind, key, seq, data)
        return Call(self, kind, key, call_id, seq, _Scope(self, call_id, None), recorded=event)

    def _encoded_input(self, kind: str, key: str, input: Any, call_id: str, encoded: bytes | None = None) -> bytes:
        data = _codec.encode_input(input) if encoded is None else encoded
        if self._masking is None:
            return data
        # Masking is idempotent (transform callbacks must be too): an input whose JSON is
        # already the recorded, masked input of this call masks to itself, so its masking
        # is skipped. The common case on replay, and a scan saved per input.
        recorded = self.events.by_call_id(call_id)
        if recorded is not None and recorded.input_json == data:
            # The recorded bytes themselves: the engine's own comparison is then an identity check.
            return recorded.input_json
        return _codec.encode_input(self._masking.mask(kind, key, input, part="input").value)

    def _masked_message(self, exc: BaseException) -> str:
        """The message of ``exc`` as the recording would hold it: masked like a run error."""
        record = _codec.error_record(exc)
        if self._masking is None:
            return str(record["message"])
        masked = self._masking.mask("run", self.agent, record, part="error").value
        return str(masked.get("message", "")) if isinstance(masked, dict) else str(masked)


def _raised_from(exc: BaseException | None, first: BaseException) -> bool:
    """Whether ``exc`` is a divergence error raised while handling ``first`` (an instrumentor's
    fuller account of the same divergence): it then ends the replay in place of ``first``."""
    if not isinstance(exc, ReplayDivergenceError):
        return False
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if cause is first:
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _masking_mismatch(run_id: str, recorded: str, current: str) -> str:
    def said(fingerprint: str) -> str:
        if fingerprint == "off":
            return "with masking off"
        if fingerprint == "placeholders":
            return "with masking on and no key (plain placeholders)"
        return f"with the mask key whose id is {fingerprint.removeprefix('keyed:')}"

    return (
        f"Run {run_id} was recorded {said(recorded)}, but replay would mask {said(current)}; the "
        "current inputs would not match the recorded ones. Replay with the masking the run was "
        "recorded with: the same SPANREPLAY_MASK_KEY (or MaskingConfig(key=...)), or "
        "configure(masking=False) for a run recorded unmasked."
    )


def _served(event: Event, decode: Decoder | None) -> Any:
    if event.error is not None:
        raise _codec.rebuild_error(event.error)
    output = event.output_json
    value = None if output is None else orjson.loads(output)
    if decode is None:
        # Plain JSON (no type tags) is served as it was loaded: the common case, kept short.
        return value if event.output_types is None else _typed.served(event, value, None)
    if event.output_types is not None or type(decode) is _typed.ReturnDecoder:
        return _typed.served(event, value, decode)
    return decode(value)


async def _served_async(event: Event, decode: Decoder | None) -> Any:
    error = event.error
    if error is not None and error.type_name == "CancelledError" and error.module.startswith("asyncio"):
        # The call was cancelled while it ran (a sibling in asyncio.gather failed, the run
        # ended). Raising at once would fail first and change the order of events; it is
        # cancelled again only when the replayed code cancels it.
        await asyncio.get_running_loop().create_future()
    return _served(event, decode)


class Call:
    """A boundary started with ``Run.begin()``: open until ``finish()`` or ``fail()``.

    Record mode: the span carries the input from the start; ``finish(output)``
    or ``fail(exc)`` writes the outcome and ends it. The first of them wins and
    later ones do nothing, so every exit path of a stream may call them. A call
    still open when its run ends is ended then, through ``on_abandon`` when set.

    Replay mode: ``recorded`` is the recorded Event; ``finish`` and ``fail`` do
    nothing. ``activate()`` makes boundaries started inside the call nest under
    it in both modes.
    """

    __slots__ = ("_lock", "_span", "call_id", "ended", "key", "kind", "on_abandon", "recorded", "run", "scope", "seq")

    def __init__(
        self,
        run: Run,
        kind: str,
        key: str,
        call_id: str,
        seq: int,
        scope: _Scope,
        *,
        span: trace.Span | None = None,
        recorded: Event | None = None,
    ) -> None:
        self.run = run
        self.kind = kind
        self.key = key
        self.call_id = call_id
        self.seq = seq
        self.scope = scope
        self.recorded = recorded
        self.ended = recorded is not None
        self.on_abandon: Callable[[], None] | None = None
        self._span = span
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Call {self.call_id} seq={self.seq} ended={self.ended}>"

    @property
    def replaying(self) -> bool:
        return self.recorded is not None

    @contextmanager
    def activate(self) -> Iterator[None]:
        """Run a block as this call's work: nested boundaries get call ids under it."""
        scope_token = _current_scope.set(self.scope)
        otel_token = otel_context.attach(self.scope.context) if self.scope.context is not None else None
        try:
            yield
        finally:
            if otel_token is not None:
                otel_context.detach(otel_token)
            _current_scope.reset(scope_token)

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        """Add span attributes (token counts, response ids) while the call is open."""
        span = self._span
        if span is None or self.ended or not attributes:
            return
        try:
            span.set_attributes(self._masked_content(attributes))
        except Exception:
            self._failure("set attributes on")

    def finish(self, output: Any, *, attributes: dict[str, Any] | None = None) -> None:
        """Record ``output`` and end the span (record mode; the first end wins)."""
        if not self._claim():
            return
        self.set_attributes_unchecked(attributes)
        assert isinstance(self.run, RecordingRun)
        self.run._finish(self._span, self.kind, self.key, output, None)

    def fail(self, exc: BaseException, *, output: Any = None, attributes: dict[str, Any] | None = None) -> None:
        """Record ``exc`` (and ``output`` too, when the failed work produced some) and end the span."""
        if not self._claim():
            return
        self.set_attributes_unchecked(attributes)
        span = self._span
        if span is not None and output is not None:
            try:
                assert isinstance(self.run, RecordingRun)
                output, masked = self.run._mask(self.kind, self.key, "output", output)
                recorded = _codec.payload_attributes(sc.OUTPUT, _codec.encode_output(output))
                if masked:
                    recorded[sc.OUTPUT + sc.MASKED_SUFFIX] = masked
                span.set_attributes(recorded)
            except Exception:
                self._failure("record the output of")
        assert isinstance(self.run, RecordingRun)
        self.run._finish(span, self.kind, self.key, None, exc)

    def abandon(self) -> None:
        """End a call left open when its run ends (``on_abandon`` decides how)."""
        hook = self.on_abandon
        if hook is not None and not self.ended:
            try:
                hook()
            except Exception:
                self._failure("end the abandoned")
        self.finish(None)

    def set_attributes_unchecked(self, attributes: dict[str, Any] | None) -> None:
        if self._span is None or not attributes:
            return
        try:
            self._span.set_attributes(self._masked_content(attributes))
        except Exception:
            self._failure("set attributes on")

    def _masked_content(self, attributes: dict[str, Any]) -> dict[str, Any]:
        if isinstance(self.run, RecordingRun) and any(name in attributes for name, _ in _CONTENT_ATTRIBUTES):
            attributes = dict(attributes)
            self.run._mask_content(self.kind, self.key, attributes)
        return attributes

    def _claim(self) -> bool:
        with self._lock:
            if self.ended:
                return False
            self.ended = True
        self.run._pending_calls.pop(id(self), None)
        return True

    def _failure(self, what: str) -> None:
        run = self.run
        if isinstance(run, RecordingRun):
            run._internal_failure(f"{what} call {self.call_id}")


# What a payload that could not be masked is recorded as: what could not be masked
# is not recorded at all.
_WITHHELD: Final = "<unmasked value withheld>"
_MASKING_FAILED: Final = '[{"path":"$","rule":"masking_failed"}]'

# The opt-in GenAI message-content attributes (JSON text), masked like the payload
# part they repeat.
_CONTENT_ATTRIBUTES = (
    (sc.GEN_AI_INPUT_MESSAGES, "input"),
    (sc.GEN_AI_SYSTEM_INSTRUCTIONS, "input"),
    (sc.GEN_AI_OUTPUT_MESSAGES, "output"),
)


def _same_error(recorded: ErrorInfo, exc: BaseException, message: Callable[[BaseException], str] = str) -> bool:
    # The module is left out: a script recorded as __main__ replays imported under its own name.
    if isinstance(exc, RecordedError):
        # The recorded failure, served as RecordedError because its type could not be rebuilt.
        return (exc.type_name, exc.message) == (recorded.type_name, recorded.message)
    return (type(exc).__qualname__, message(exc)) == (recorded.type_name, recorded.message)


class _JoinedReplay(Run):
    """``record()`` called while a replay is open: the code's own run joins the replay.

    The same agent code runs in record and replay; code that opens its run itself
    (``with spanreplay.record(...)``) must not run the real work when it is called
    from ``spanreplay replay --entry`` or inside ``spanreplay.replay()``.
    """

    mode = Mode.REPLAY

    def __init__(self, replaying: ReplayingRun) -> None:
        super().__init__(replaying.run_id, replaying.agent)
        self.replaying = replaying
        self._joined: list[tuple[Token[Run | None], Token[_Scope | None]]] = []

    def __enter__(self) -> Run:
        # The recorded run started here, at its top level: whatever task or thread the
        # replay started the code in, the block's calls take their ids from the run's root.
        self._joined.append((_current_run.set(self.replaying), _current_scope.set(self.replaying._root)))
        return self.replaying

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        run_token, scope_token = self._joined.pop()
        _current_scope.reset(scope_token)
        _current_run.reset(run_token)
        return None  # the enclosing replay judges how the run ended


def record(agent: str = "agent", run_id: str | None = None) -> Run:
    """Start recording a run: ``with spanreplay.record(agent="support") as run: ...``.

    Inside an open replay, the run joins that replay instead (the block gets the
    replaying run), so the same code serves both modes.

    Args:
        agent: the agent's name, shown in ``spanreplay runs`` and on the root span
            (``invoke_agent {agent}``).
        run_id: the run id; by default ``run_YYYYMMDD_HHMMSS_xxxxxxxx`` (UTC).
    """
    open_run = _current_run.get()
    if open_run is None:
        with _open_lock:
            candidates = _process_runs or _open_runs
            open_run = candidates[0] if len(candidates) == 1 else None
    if isinstance(open_run, ReplayingRun):
        return _JoinedReplay(open_run)
    return RecordingRun(agent, run_id)


def replay(
    source: str | os.PathLike[str] | EventLog,
    run_id: str | None = None,
    *,
    ignore_paths: Sequence[str] = (),
    strict: bool = True,
) -> ReplayingRun:
    """Replay a recorded run: ``with spanreplay.replay("traces/", run_id) as run: ...``.

    Args:
        source: a trace file, directory, glob, ``-`` for stdin, or an EventLog.
        run_id: the run to replay; may be left out when the source holds one run.
        ignore_paths: JSON paths (``"messages[*].timestamp"``) left out of the
            input comparison.
        strict: raise LeftoverEventsError when the code ends before the recording.
    """
    if isinstance(source, EventLog):
        return ReplayingRun(source, ignore_paths=ignore_paths, strict=strict)
    from ._loader import load

    return ReplayingRun(load(source, run_id), ignore_paths=ignore_paths, strict=strict)


def boundary(
    kind: str,
    key: str,
    input: Any,
    fn: Callable[[], T],
    *,
    decode: Decoder | None = None,
    attributes: dict[str, Any] | None = None,
) -> T:
    """The single choke point for every nondeterministic call of an agent.

    Args:
        kind: what kind of boundary (``"tool"``, ``"model"``, ``"clock"``, ...).
        key: which one of that kind (a tool name, a model name).
        input: the call's input, JSON-serializable (compared on replay).
        fn: the real work, a no-argument callable, sync or async. In record mode
            it runs and its result is recorded; in replay mode it never runs.
        decode: turns the recorded JSON back into the object the caller expects
            (replay only).
        attributes: extra span attributes (token counts, GenAI names).

    Returns:
        ``fn()``'s result (an awaitable when ``fn`` is async). Outside any run,
        ``fn()`` itself.
    """
    run = run_for_boundary(f"{kind} {key!r}")
    if run is None:
        return fn()
    return run.boundary(kind, key, input, fn, decode=decode, attributes=attributes)

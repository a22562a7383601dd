"""The exceptions spanreplay raises.

Every error is a sentence that names the bad value and the way out. The tree::

    SpanReplayError
    ├── ConfigurationError (ValueError)          bad settings or arguments
    ├── TraceFormatError (ValueError)            a source that cannot be read
    │   ├── PayloadIntegrityError                 a payload cut or altered on the way
    │   ├── SchemaVersionError                    a span written by an unknown schema
    │   └── UnsafeTraceValueError                 a value from a trace that would become a path or code
    ├── RunNotFoundError (LookupError)           the run id is not in the source
    ├── PostgresError (ConnectionError)          Postgres unreachable or refusing
    ├── RecordedError                            a recorded failure whose type cannot be rebuilt
    ├── RecordedBaseExceptionError               a recorded failure replay refuses to raise again
    ├── NoRunInContextError                      a boundary outside any run while a replay is open
    ├── TraceFailedError                         how a trace-scoped run failed (recorded, not raised)
    └── ReplayDivergenceError                    the code stopped matching the recording
        ├── UnexpectedCallError                   a call the recording does not have
        ├── DifferentCallError                    a different call at that point
        ├── InputChangedError                     the same call with a changed input
        ├── LeftoverEventsError                   the run ended with recorded events left over
        ├── UnservableOutputError                 a recorded output that cannot come back as its type
        ├── UnfinishedEffectError                 a side effect whose intent was recorded, not its outcome
        │   └── LiveEffectRefusedError            a fork asked to run such a side effect live again
        ├── StateChangedError                     a checkpoint of the agent's state holds another value
        └── OutcomeChangedError                   the run ended differently from the recording
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ConfigurationError",
    "DifferentCallError",
    "InputChangedError",
    "LeftoverEventsError",
    "LiveEffectRefusedError",
    "NoRunInContextError",
    "OutcomeChangedError",
    "PayloadIntegrityError",
    "PostgresError",
    "RecordedBaseExceptionError",
    "RecordedError",
    "ReplayDivergenceError",
    "RunNotFoundError",
    "SchemaVersionError",
    "SpanReplayError",
    "StateChangedError",
    "TraceFailedError",
    "TraceFormatError",
    "UnexpectedCallError",
    "UnfinishedEffectError",
    "UnsafeTraceValueError",
    "UnservableOutputError",
]


class SpanReplayError(Exception):
    """Root of every exception that spanreplay raises itself."""


class ConfigurationError(SpanReplayError, ValueError):
    """An argument or setting that spanreplay cannot work with."""


class TraceFormatError(SpanReplayError, ValueError):
    """A trace source that cannot be read.

    Attributes:
        source: the file (or other source) that was being read, when known.
        line: the 1-based line number in that file, when known.
    """

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.line = line


class PayloadIntegrityError(TraceFormatError):
    """A recorded payload whose byte length or sha256 digest does not match.

    Raised instead of replaying a payload that a backend or exporter cut.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str,
        seq: int,
        attribute: str,
        expected_size: int,
        found_size: int,
        source: str | None = None,
    ) -> None:
        super().__init__(message, source=source)
        self.run_id = run_id
        self.seq = seq
        self.attribute = attribute
        self.expected_size = expected_size
        self.found_size = found_size


class SchemaVersionError(TraceFormatError):
    """A span written with a schema version this release does not know."""


class UnsafeTraceValueError(TraceFormatError):
    """A value read from a trace that cannot safely become part of a path or of generated code.

    A run id that is not a plain name (``../x``, ``/abs/path``) or a path that would
    resolve outside its folder: refused rather than written, read or deleted there.
    """


class RunNotFoundError(SpanReplayError, LookupError):
    """The run id asked for is not in the source."""

    def __init__(self, message: str, *, run_id: str | None, available: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.available = available


class PostgresError(SpanReplayError, ConnectionError):
    """Postgres could not be reached, or refused what spanreplay asked of it.

    Attributes:
        dsn: the DSN, without its password.
    """

    def __init__(self, message: str, *, dsn: str) -> None:
        super().__init__(message)
        self.dsn = dsn


class RecordedError(SpanReplayError):
    """A failure from the recording whose original type cannot be rebuilt on replay.

    Attributes:
        type_name: the qualified name of the original exception type.
        module: the module that defined it.
        message: ``str()`` of the original exception.
        fields: structured fields that were recorded with it (an HTTP status, say).
    """

    def __init__(
        self,
        type_name: str,
        module: str,
        message: str,
        fields: Mapping[str, Any] | None = None,
        *,
        hint: str | None = None,
    ) -> None:
        hint = hint or f"import {module} before replaying to get the original type"
        super().__init__(
            f"{module}.{type_name}: {message} (recorded failure replayed as RecordedError "
            f"because {module}.{type_name} cannot be rebuilt; {hint})"
        )
        self.type_name = type_name
        self.module = module
        self.message = message
        self.fields = dict(fields or {})


class RecordedBaseExceptionError(SpanReplayError):
    """A recorded failure that replay refuses to raise again, raised in its place.

    A trace is untrusted input, and some exceptions do more than fail the code they
    are raised in: a ``BaseException`` that is not an ``Exception``
    (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``, a test framework's
    outcome such as pytest's ``Exit`` or ``Skipped``) stops the interpreter, ends or
    skips a test session, or closes a generator; the exceptions of test runners and
    CLI toolkits (``pytest``, ``unittest``, ``click``, ``typer``) and a project's own
    subclasses of them skip tests or pick exit codes. Replay raises this error
    instead, and the replay ends with it even when the code catches it: a run that
    recorded one of these never replays green.

    Attributes:
        type_name: the qualified name of the recorded exception type.
        module: the module the recording names for it.
        message: ``str()`` of the recorded exception.
        fields: structured fields that were recorded with it.
        where: the run and step it was recorded at, when known.
    """

    def __init__(
        self,
        type_name: str,
        module: str,
        message: str,
        fields: Mapping[str, Any] | None = None,
        *,
        reason: str,
        where: str = "",
    ) -> None:
        at = f" at {where}" if where else ""
        said = f" ({message!r})" if message else ""
        name = type_name if module == "builtins" else f"{module}.{type_name}"
        super().__init__(
            f"The recording holds a {name}{said} raised{at}, and replay refuses to raise it "
            f"again: {reason}. Raised from a trace file it could end, skip or pass a test session instead of "
            "failing it, so this replay fails here; a run that was really stopped this way cannot be replayed "
            "(record it again)."
        )
        self.type_name = type_name
        self.module = module
        self.message = message
        self.fields = dict(fields or {})
        self.where = where


class NoRunInContextError(SpanReplayError):
    """A boundary was reached from a context that holds no run while a replay is open.

    The boundary cannot tell which run it belongs to, and a replay never runs real
    work, so it is refused; every replay open at the time also ends with this error.
    """


class ReplayDivergenceError(SpanReplayError):
    """The agent code stopped matching the recording.

    Attributes:
        run_id: the run being replayed.
        seq: the position in the run where the divergence happened.
        call_id: the call id the code attempted (or the recorded one, for leftovers).
        recorded: a one-line description of what the recording holds at that point.
        attempted: a one-line description of what the code tried to do.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str,
        seq: int | None,
        call_id: str | None,
        recorded: str | None,
        attempted: str | None,
    ) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.seq = seq
        self.call_id = call_id
        self.recorded = recorded
        self.attempted = attempted


class UnexpectedCallError(ReplayDivergenceError):
    """The code made a call that the recording does not have."""


class DifferentCallError(ReplayDivergenceError):
    """At this point the recording holds a different call than the code made."""


class InputChangedError(ReplayDivergenceError):
    """The code made the recorded call, but with a different input.

    Attributes:
        diff: a readable unified diff, recorded input first.
    """

    def __init__(self, message: str, *, diff: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.diff = diff


class LeftoverEventsError(ReplayDivergenceError):
    """The run ended while the recording still held events the code never asked for.

    Attributes:
        leftover: the call ids left over, in recorded order.
    """

    def __init__(self, message: str, *, leftover: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.leftover = leftover


class OutcomeChangedError(ReplayDivergenceError):
    """Every step matched, but the run ended differently (a recorded failure did not recur,
    or a run that succeeded failed on replay with an error of its own)."""


@dataclass(frozen=True, slots=True)
class UnservableValue:
    """The value in a recorded output that replay cannot serve, and why (``UnservableOutputError``).

    Attributes:
        path: where in the output the value sits (``$`` for the output itself).
        type_name: the type the value had when it was recorded.
        reason: ``"unencodable"``, ``"unregistered"``, ``"cannot rebuild"`` or ``"unknown tag"``.
    """

    path: str
    type_name: str
    reason: str


class UnservableOutputError(ReplayDivergenceError):
    """A recorded output that replay cannot hand back with the type it had.

    Raised instead of serving a value of another type: the tool returned something
    spanreplay could not record (a socket, a generator), the recording names a class
    replay was not told it may build, or the recorded value no longer fits its class.
    Replay cannot go on past such a step, so it ends the replay as a divergence does.

    Attributes:
        run_id: the run being replayed.
        seq: the step whose output it is.
        kind: the boundary's kind (``"tool"``).
        key: the boundary's key (the tool's name).
        path: where in the output the value sits (``$`` for the output itself).
        type_name: the type the value had when it was recorded.
        reason: ``"unencodable"``, ``"unregistered"``, ``"cannot rebuild"`` or ``"unknown tag"``.
    """

    def __init__(
        self,
        message: str,
        *,
        run_id: str,
        seq: int,
        call_id: str,
        kind: str,
        key: str,
        value: UnservableValue,
    ) -> None:
        super().__init__(
            message,
            run_id=run_id,
            seq=seq,
            call_id=call_id,
            recorded=f"the output of {kind} {key!r} holds a {value.type_name} at {value.path} ({value.reason})",
            attempted=f"serve it as a {value.type_name}",
        )
        self.kind = kind
        self.key = key
        self.path = value.path
        self.type_name = value.type_name
        self.reason = value.reason


class UnfinishedEffectError(ReplayDivergenceError):
    """The code reached a side effect (``effect=True``) whose intent was recorded but not its outcome.

    The recorded process died while the effect's work ran (or before its outcome
    was written): the payment or email may have happened, and there is nothing to
    serve in its place. A replay that gets here has reached the point where the
    recorded run crashed, so it ends as reproduced; ``recorded`` is None, as at
    any crash point.

    Attributes:
        event: the recorded intent (kind, key, call id, seq, masked input; no output).
    """

    def __init__(self, message: str, *, event: Any, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.event = event


class LiveEffectRefusedError(UnfinishedEffectError):
    """A fork would run live, from a step whose side effect may already have happened.

    Running it again could pay twice or send the email twice; pass
    ``allow_effects=True`` (``--allow-effects``) once it is known to be safe.
    """


class StateChangedError(ReplayDivergenceError):
    """A checkpoint (``spanreplay.checkpoint``) of the agent's state holds another value than recorded.

    Raised at the checkpoint, where the state went wrong, rather than at the next
    boundary whose input it changes. The values are compared masked, as recorded.

    Attributes:
        name: the checkpoint's name (as recorded: masked where a detector fired).
        diff: a readable unified diff, recorded value first.
    """

    def __init__(self, message: str, *, name: str, diff: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.name = name
        self.diff = diff


class TraceFailedError(SpanReplayError):
    """How a run of one trace (``SPANREPLAY_RUN_SCOPE=trace``) failed: its root span ended with status ERROR.

    Not raised to the application: it is the failure recorded for the run. The
    message is ``"ExceptionType: message"`` from the root span's exception event,
    or the span's status description, so a replay whose trace fails the same way
    is seen to reproduce the recorded failure.
    """


# Former names, kept for one release: reading one warns and gives the new class.
_RENAMED = {"TraceFailed": "TraceFailedError"}


def __getattr__(name: str) -> Any:
    new = _RENAMED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import warnings

    warnings.warn(
        f"spanreplay.errors.{name} is now spanreplay.errors.{new}; {name} goes in a later release.",
        DeprecationWarning,
        stacklevel=2,
    )
    return globals()[new]


def former_names(type_name: str) -> tuple[str, ...]:
    """The names an exception type was recorded under before it was renamed (replay matches them too)."""
    return tuple(old for old, new in _RENAMED.items() if new == type_name)

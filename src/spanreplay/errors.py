"""The exceptions spanreplay raises.

Every error is a sentence that names the bad value and the way out. The tree::

    SpanReplayError
    ├── ConfigurationError (ValueError)          bad settings or arguments
    ├── TraceFormatError (ValueError)            a source that cannot be read
    │   ├── PayloadIntegrityError                 a payload cut or altered on the way
    │   └── SchemaVersionError                    a span written by an unknown schema
    ├── RunNotFoundError (LookupError)           the run id is not in the source
    ├── PostgresError (ConnectionError)          Postgres unreachable or refusing
    ├── RecordedError                            a recorded failure whose type cannot be rebuilt
    ├── NoRunInContextError                      a boundary outside any run while a replay is open
    ├── TraceFailedError                         how a trace-scoped run failed (recorded, not raised)
    └── ReplayDivergenceError                    the code stopped matching the recording
        ├── UnexpectedCallError                   a call the recording does not have
        ├── DifferentCallError                    a different call at that point
        ├── InputChangedError                     the same call with a changed input
        ├── LeftoverEventsError                   the run ended with recorded events left over
        ├── UnservableOutputError                 a recorded output that cannot come back as its type
        └── OutcomeChangedError                   the run ended differently from the recording
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ConfigurationError",
    "DifferentCallError",
    "InputChangedError",
    "LeftoverEventsError",
    "NoRunInContextError",
    "OutcomeChangedError",
    "PayloadIntegrityError",
    "PostgresError",
    "RecordedError",
    "ReplayDivergenceError",
    "RunNotFoundError",
    "SchemaVersionError",
    "SpanReplayError",
    "TraceFailedError",
    "TraceFormatError",
    "UnexpectedCallError",
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
        path: str,
        type_name: str,
        reason: str,
    ) -> None:
        super().__init__(
            message,
            run_id=run_id,
            seq=seq,
            call_id=call_id,
            recorded=f"the output of {kind} {key!r} holds a {type_name} at {path} ({reason})",
            attempted=f"serve it as a {type_name}",
        )
        self.kind = kind
        self.key = key
        self.path = path
        self.type_name = type_name
        self.reason = reason


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

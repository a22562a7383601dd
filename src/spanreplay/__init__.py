"""spanreplay: record every nondeterministic boundary of an AI agent as an
OpenTelemetry span, and replay a run offline, step by step, from those spans.

Record::

    import spanreplay

    spanreplay.configure(service_name="support-agent")
    with spanreplay.record(agent="support") as run:
        main()

Replay::

    with spanreplay.replay("traces/", run_id):
        main()
"""

from __future__ import annotations

import importlib.metadata as _metadata
import typing as _typing

try:
    __version__ = _metadata.version("spanreplay")
except _metadata.PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

from . import _accelerators
from ._builtins import now, random, time, uuid4
from ._checkpoints import checkpoint
from ._config import Settings, configure, is_configured, reset, settings
from ._error_records import register_error_rebuilder
from ._events import ErrorInfo, Event, EventLog, RunInfo, RunSummary
from ._guard import DeterminismWarning
from ._loader import load, runs
from ._markers import patched
from ._run import ForkingRun, Mode, RecordingRun, ReplayingRun, Run, boundary, current_run, fork, record, replay
from ._run_diff import RunDiff, StepDiff, diff_runs
from ._typed_registry import register_type
from .errors import (
    ConfigurationError,
    DifferentCallError,
    InputChangedError,
    LeftoverEventsError,
    LiveEffectRefusedError,
    NoRunInContextError,
    OutcomeChangedError,
    PayloadIntegrityError,
    PostgresError,
    RecordedBaseExceptionError,
    RecordedError,
    ReplayDivergenceError,
    RunNotFoundError,
    SchemaVersionError,
    SpanReplayError,
    StateChangedError,
    TraceFormatError,
    UnexpectedCallError,
    UnfinishedEffectError,
    UnsafeTraceValueError,
    UnservableOutputError,
)
from .instrumentation.tools import tool
from .masking import MaskingConfig
from .readers import SpanReplayWarning


def instrument_anthropic(**kwargs: _typing.Any) -> _typing.Any:
    """Record and replay every Anthropic Messages call; see ``AnthropicInstrumentor``.

    Imported lazily so that ``import spanreplay`` does not import the Anthropic SDK.
    """
    from .instrumentation.anthropic import instrument_anthropic as _instrument

    return _instrument(**kwargs)


__all__ = [
    "ConfigurationError",
    "DeterminismWarning",
    "DifferentCallError",
    "ErrorInfo",
    "Event",
    "EventLog",
    "ForkingRun",
    "InputChangedError",
    "LeftoverEventsError",
    "LiveEffectRefusedError",
    "MaskingConfig",
    "Mode",
    "NoRunInContextError",
    "OutcomeChangedError",
    "PayloadIntegrityError",
    "PostgresError",
    "RecordedBaseExceptionError",
    "RecordedError",
    "RecordingRun",
    "ReplayDivergenceError",
    "ReplayingRun",
    "Run",
    "RunDiff",
    "RunInfo",
    "RunNotFoundError",
    "RunSummary",
    "SchemaVersionError",
    "Settings",
    "SpanReplayError",
    "SpanReplayWarning",
    "StateChangedError",
    "StepDiff",
    "TraceFormatError",
    "UnexpectedCallError",
    "UnfinishedEffectError",
    "UnsafeTraceValueError",
    "UnservableOutputError",
    "__version__",
    "boundary",
    "checkpoint",
    "configure",
    "current_run",
    "diff_runs",
    "fork",
    "instrument_anthropic",
    "is_configured",
    "load",
    "now",
    "patched",
    "random",
    "record",
    "register_error_rebuilder",
    "register_type",
    "replay",
    "reset",
    "runs",
    "settings",
    "time",
    "tool",
    "uuid4",
]

# The accelerators registered on import are checked now, so that code which writes
# spans before configure() (an exporter on its own) finds them checked.
_accelerators.preflight()

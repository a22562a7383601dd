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

``__all__`` is the public surface; docs/api.md is generated from its docstrings
(``python docs/gen_api.py``). Names kept only for code that imported them from
here before they left ``__all__`` warn with a DeprecationWarning and name their home.
"""

from __future__ import annotations

import typing as _typing

from spanreplay import _accelerators
from spanreplay._version import __version__
from spanreplay.api.agents import agent
from spanreplay.api.builtins import now, random, time, uuid4
from spanreplay.api.checkpoints import checkpoint
from spanreplay.api.loading import load, runs
from spanreplay.api.markers import patched
from spanreplay.api.runs import boundary, record, replay
from spanreplay.errors import (
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
from spanreplay.instrumentation.tools import tool
from spanreplay.masking import MaskingConfig
from spanreplay.model.error_records import register_error_rebuilder
from spanreplay.model.events import ErrorInfo, Event, EventLog, RunInfo, RunSummary
from spanreplay.model.typed_classes import register_type
from spanreplay.readers import SpanReplayWarning
from spanreplay.recording.config_values import OtlpExport, PostgresStore
from spanreplay.recording.configuration import Settings, configure, is_configured, reset, settings
from spanreplay.recording.keep import KeepPolicy
from spanreplay.replaying.forking_run import ForkingRun, fork
from spanreplay.replaying.guard import DeterminismWarning
from spanreplay.replaying.replaying_run import ReplayingRun
from spanreplay.replaying.run_diff import RunDiff, StepDiff, diff_runs
from spanreplay.run.base import BoundaryCall, Mode, Run, current_run


def instrument_anthropic(**kwargs: _typing.Any) -> _typing.Any:
    """Record and replay every Anthropic Messages call; see ``AnthropicInstrumentor``.

    Imported lazily so that ``import spanreplay`` does not import the Anthropic SDK.
    """
    from spanreplay.instrumentation.anthropic import instrument_anthropic as _instrument

    return _instrument(**kwargs)


def instrument_all() -> dict[str, _typing.Any]:
    """Record and replay every Anthropic call and every framework tool call spanreplay has an adapter for.

    LangChain and LangGraph tools, MCP client tools and PydanticAI function tools,
    each when its library is installed and in its tested range (docs/frameworks.md).
    Imported lazily so that ``import spanreplay`` imports no framework.
    """
    from spanreplay.instrumentation.everything import instrument_all as _instrument_all

    return _instrument_all()


# Names that left ``__all__``: still importable from here, with a warning naming their home.
_MOVED = {
    # record() returns a Run; the recording subclass is no part of the public surface.
    "RecordingRun": "spanreplay.recording.recording_run",
}


def __getattr__(name: str) -> _typing.Any:
    home = _MOVED.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    import warnings

    warnings.warn(
        f"spanreplay.{name} is no longer exported from spanreplay; import it from {home}.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(home), name)


__all__ = [
    "BoundaryCall",
    "ConfigurationError",
    "DeterminismWarning",
    "DifferentCallError",
    "ErrorInfo",
    "Event",
    "EventLog",
    "ForkingRun",
    "InputChangedError",
    "KeepPolicy",
    "LeftoverEventsError",
    "LiveEffectRefusedError",
    "MaskingConfig",
    "Mode",
    "NoRunInContextError",
    "OtlpExport",
    "OutcomeChangedError",
    "PayloadIntegrityError",
    "PostgresError",
    "PostgresStore",
    "RecordedBaseExceptionError",
    "RecordedError",
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
    "agent",
    "boundary",
    "checkpoint",
    "configure",
    "current_run",
    "diff_runs",
    "fork",
    "instrument_all",
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

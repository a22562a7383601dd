"""Zero-code mode: runs opened from environment variables, for ``opentelemetry-instrument``.

``SPANREPLAY_MODE=record`` makes the whole process one recorded run, opened the
first time a boundary finds no run (so a program that opens its own runs with
``spanreplay.record()`` gets no empty extra run) and ended at interpreter exit
with the program's outcome. ``SPANREPLAY_MODE=replay`` replays
``SPANREPLAY_RUN_ID`` from ``SPANREPLAY_SOURCE`` the same way, and prints how the
replay ended. ``SPANREPLAY_MODE=fork`` forks that run (``SPANREPLAY_FORK_AT``)
into a new recorded run, as ``spanreplay fork ... -- COMMAND`` does;
``SPANREPLAY_OVERRIDES`` names a file of what-if edits for a replay or a fork.
``SPANREPLAY_TRACE_DIR`` picks the trace directory, ``SPANREPLAY_AGENT`` the
agent name (default: ``OTEL_SERVICE_NAME``, else the script's name).
``SPANREPLAY_RUN_SCOPE=trace`` makes each trace the application starts a run of
its own instead (``_trace_scope``).

A recorded run that ends says so in one line on stderr, with where its trace
is; a failed one's alert names the command that replays it: this program's
command line with ``SPANREPLAY_MODE=replay`` and the run's id.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from spanreplay._environment import environment
from spanreplay.api.runs import fork, recording, replay
from spanreplay.errors import ConfigurationError, SpanReplayError
from spanreplay.recording.alerts import Launch, launched_run
from spanreplay.recording.configuration import configure
from spanreplay.replaying.overrides import overrides_from_file
from spanreplay.run.base import Run, set_process_run_factory

from ._trace_scope import RootSpanEnd, TraceRuns, end_run

logger = logging.getLogger("spanreplay")

__all__ = ["start_from_environment", "stop"]

_lock = threading.Lock()
_run: Run | None = None
_exit: tuple[type[BaseException] | None, BaseException | None, TracebackType | None] = (None, None, None)
_hooked = False
_trace_runs: TraceRuns | None = None
_root_span_end: RootSpanEnd | None = None


def _agent_name() -> str:
    name = environment().agent or os.environ.get("OTEL_SERVICE_NAME")
    if name:
        return name
    script = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else ""
    return script or "agent"


def start_from_environment() -> None:
    """Install the process run that ``SPANREPLAY_MODE`` asks for (nothing when it is unset)."""
    env = environment()
    mode = env.mode
    if not mode or mode == "off":
        return
    scope = env.run_scope
    error: ConfigurationError | None = None
    if scope not in ("process", "trace"):
        error = ConfigurationError(
            f"SPANREPLAY_RUN_SCOPE={scope!r} is not a run scope; set it to 'process' (the default: the "
            "process is one run) or 'trace' (each trace the application starts is a run)."
        )
    elif mode == "record":
        configure()
        # A run id given for the process names one run; traces are many, so each gets its own.
        run_id = env.run_id if scope == "process" else None
        # Taken now: the program may change directory before a run ends.
        launch = Launch.of_this_process(trace_scope=scope == "trace")

        def recording_run() -> Run:
            run = recording(_agent_name(), run_id)
            launched_run(run.run_id, launch)  # its alert names this program's command line, not --entry
            return run

        _install(recording_run, scope, replaying=False)
    elif mode == "replay":
        _install(_replaying_run, scope, replaying=True)
    elif mode == "fork" and scope != "process":
        error = ConfigurationError(
            "SPANREPLAY_MODE=fork forks one run into one new run: leave SPANREPLAY_RUN_SCOPE unset (or 'process')."
        )
    elif mode == "fork":
        configure()
        _install(_forking_run, scope, replaying=False)
    else:
        error = ConfigurationError(
            f"SPANREPLAY_MODE={mode!r} is not a mode; set it to 'record', 'replay' or 'fork' (or unset it to run live)."
        )
    if error is not None:
        # A replay that silently ran live would reach the network: refuse every call instead.
        set_process_run_factory(_refuse(error))
        logger.error("%s", error)
        return
    _hook_exit()


def _install(make: Any, scope: str, *, replaying: bool) -> None:
    global _trace_runs, _root_span_end
    if scope == "process":
        set_process_run_factory(_factory(make))
        return
    _trace_runs = TraceRuns(make, replaying=replaying)
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        # Replay configures no exporter, and without an SDK provider the application's
        # spans would have no trace ids to tell its runs apart. One with no exporter
        # writes nothing. (Record mode's configure() has set one already.)
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        _root_span_end = RootSpanEnd(_trace_runs)
        provider.add_span_processor(_root_span_end)
    else:  # another provider won the race to be global: no root span reaches a processor of ours
        logger.warning(
            "spanreplay: SPANREPLAY_RUN_SCOPE=trace found a tracer provider that is not the "
            "OpenTelemetry SDK's; each trace's run ends when the process exits"
        )
    set_process_run_factory(_trace_runs.current)


def _replaying_run() -> Run:
    from spanreplay.api.loading import load

    env = environment()
    source = env.source
    if not source:
        raise ConfigurationError(
            "SPANREPLAY_MODE=replay needs SPANREPLAY_SOURCE, the trace file or directory to replay "
            "(and SPANREPLAY_RUN_ID when it holds more than one run)."
        )
    overrides = overrides_from_file(env.overrides) if env.overrides else None
    return replay(load(source, env.run_id), overrides=overrides)


def _forking_run() -> Run:
    """``SPANREPLAY_MODE=fork``: what ``spanreplay fork SOURCE RUN -- COMMAND`` starts the command in."""
    from spanreplay.api.loading import load

    env = environment()
    if not env.source:
        raise ConfigurationError(
            "SPANREPLAY_MODE=fork needs SPANREPLAY_SOURCE, the trace file or directory of the run to fork "
            "(and SPANREPLAY_RUN_ID when it holds more than one run)."
        )
    at = env.fork_at
    if at and (not at.isdecimal() or len(at) > 18):
        raise ConfigurationError(f"SPANREPLAY_FORK_AT is {at!r}, not a seq; give the seq of a step (1, 2, ...).")
    overrides = overrides_from_file(env.overrides) if env.overrides else None
    return fork(
        load(env.source, env.run_id),
        at=int(at) if at else None,
        overrides=overrides,
        agent=env.agent,
        allow_effects=env.allow_effects,
    )


def _factory(make: Any) -> Any:
    def process_run() -> Run | None:
        global _run
        with _lock:
            if _run is None:
                run = make()
                run.enter_process_wide()
                _run = run
            return _run

    return process_run


def _refuse(error: SpanReplayError) -> Any:
    def process_run() -> Run | None:
        raise error

    return process_run


def _hook_exit() -> None:
    global _hooked
    if _hooked:
        return
    _hooked = True
    previous = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        global _exit
        _exit = (exc_type, exc, tb)
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook
    atexit.register(_end)


def _end() -> None:
    global _run, _trace_runs
    with _lock:
        run, _run = _run, None
        runs, _trace_runs = _trace_runs, None
    set_process_run_factory(None)
    if _root_span_end is not None:
        _root_span_end.runs = None  # a provider cannot drop a processor: this one goes quiet
    if runs is not None:
        runs.end_all(_exit)
    if run is not None:
        end_run(run, _exit)


def stop() -> None:
    """Used by uninstrument(): end the process run now rather than at exit."""
    _end()

"""Zero-code mode: runs opened from environment variables, for ``opentelemetry-instrument``.

``SPANREPLAY_MODE=record`` makes the whole process one recorded run, opened the
first time a boundary finds no run (so a program that opens its own runs with
``spanreplay.record()`` gets no empty extra run) and ended at interpreter exit
with the program's outcome. ``SPANREPLAY_MODE=replay`` replays
``SPANREPLAY_RUN_ID`` from ``SPANREPLAY_SOURCE`` the same way, and prints how the
replay ended. ``SPANREPLAY_TRACE_DIR`` picks the trace directory,
``SPANREPLAY_AGENT`` the agent name (default: ``OTEL_SERVICE_NAME``, else the
script's name).
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

from ..._config import configure
from ..._run import RecordingRun, ReplayingRun, Run, set_process_run_factory
from ...errors import ConfigurationError, SpanReplayError

logger = logging.getLogger("spanreplay")

__all__ = ["start_from_environment", "stop"]

_lock = threading.Lock()
_run: Run | None = None
_exit: tuple[type[BaseException] | None, BaseException | None, TracebackType | None] = (None, None, None)
_hooked = False


def _agent_name() -> str:
    name = os.environ.get("SPANREPLAY_AGENT") or os.environ.get("OTEL_SERVICE_NAME")
    if name:
        return name
    script = Path(sys.argv[0]).stem if sys.argv and sys.argv[0] else ""
    return script or "agent"


def start_from_environment() -> None:
    """Install the process run that ``SPANREPLAY_MODE`` asks for (nothing when it is unset)."""
    mode = os.environ.get("SPANREPLAY_MODE", "").strip().lower()
    if not mode or mode == "off":
        return
    if mode == "record":
        configure()
        set_process_run_factory(
            _factory(lambda: RecordingRun(_agent_name(), os.environ.get("SPANREPLAY_RUN_ID") or None))
        )
    elif mode == "replay":
        set_process_run_factory(_factory(_replaying_run))
    else:
        error = ConfigurationError(
            f"SPANREPLAY_MODE={mode!r} is not a mode; set it to 'record' or 'replay' (or unset it to run live)."
        )
        # A replay that silently ran live would reach the network: refuse every call instead.
        set_process_run_factory(_refuse(error))
        logger.error("%s", error)
        return
    _hook_exit()


def _replaying_run() -> ReplayingRun:
    from ..._loader import load

    source = os.environ.get("SPANREPLAY_SOURCE")
    if not source:
        raise ConfigurationError(
            "SPANREPLAY_MODE=replay needs SPANREPLAY_SOURCE, the trace file or directory to replay "
            "(and SPANREPLAY_RUN_ID when it holds more than one run)."
        )
    return ReplayingRun(load(source, os.environ.get("SPANREPLAY_RUN_ID") or None))


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
    global _run
    with _lock:
        run, _run = _run, None
    set_process_run_factory(None)
    if run is None:
        return
    try:
        run.exit_process_wide(*_exit)
    except SpanReplayError as exc:
        sys.stderr.write(f"spanreplay: {exc}\n")
    if isinstance(run, ReplayingRun):
        sys.stderr.write(
            f"spanreplay: replay of run {run.run_id} {run.outcome or 'ended'} "
            f"({run.engine.served} of {len(run.events)} recorded steps served).\n"
        )


def stop() -> None:
    """Used by uninstrument(): end the process run now rather than at exit."""
    _end()

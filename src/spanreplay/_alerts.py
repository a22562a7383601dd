"""Failure alerts: a recorded run that fails names itself and the one command that replays it.

When a run ends with an exception, ``run_failed`` writes one ERROR record to
the ``spanreplay.alerts`` logger (route it to your alerting) and adds a note to
the exception (``add_note``), so the traceback a person reads ends with::

    spanreplay: run run_20261130_021503_a1b2c3d4 failed; replay it offline with:
    spanreplay replay traces run_20261130_021503_a1b2c3d4 --entry agent:main

The record carries ``spanreplay.run.id`` and ``spanreplay.replay.command`` as
attributes (OpenTelemetry's logging handler exports them as log attributes).
It names the exception type only: the message may hold what masking keeps out
of the spans. The entry is the function whose ``with spanreplay.record()``
block the exception left, when replay can call it (a module-level function
that takes no arguments); otherwise the command says ``MODULE:FUNCTION``.
"""

from __future__ import annotations

import inspect
import logging
import os
import shlex
import sys
from pathlib import Path
from types import FrameType, TracebackType
from typing import Final

from . import _semconv as sc
from ._config import settings

__all__ = ["ALERT_LOGGER", "replay_command", "run_failed"]

ALERT_LOGGER: Final = "spanreplay.alerts"
logger = logging.getLogger(ALERT_LOGGER)


def run_failed(run_id: str, agent: str, exc: BaseException, tb: TracebackType | None) -> str:
    """Log the failure alert and note it on ``exc``; returns the replay command."""
    command = replay_command(run_id, _entry(tb.tb_frame) if tb is not None else None)
    note = f"spanreplay: run {run_id} failed; replay it offline with: {command}"
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
    logger.error(
        "Run %s (agent %s) failed with %s; replay it offline with: %s",
        run_id,
        agent,
        type(exc).__qualname__,
        command,
        extra={sc.RUN_ID: run_id, sc.REPLAY_COMMAND: command},
    )
    return command


def replay_command(run_id: str, entry: str | None) -> str:
    """``spanreplay replay SOURCE RUN --entry MODULE:FUNCTION`` for where this process records."""
    return f"spanreplay replay {_source()} {shlex.quote(run_id)} --entry {entry or 'MODULE:FUNCTION'}"


def _source() -> str:
    """Where the run can be read back: the trace directory, else the Postgres database, else SOURCE."""
    try:
        config = settings()
    except Exception:  # no configuration could be made: the command still names the run
        return "SOURCE"
    if config.trace_dir is not None:
        directory = Path(config.trace_dir).absolute()
        try:
            shown = os.path.relpath(directory)
        except ValueError:  # another drive (Windows)
            shown = str(directory)
        return shlex.quote(str(directory) if shown.startswith("..") else shown)
    processor = config.postgres_processor
    if processor is not None:
        from .postgres._connect import describe

        # describe() leaves the password out: libpq finds it in PGPASSWORD or ~/.pgpass.
        return shlex.quote(describe(processor.dsn))
    return "SOURCE"


def _entry(frame: FrameType) -> str | None:
    """``module:function`` for the function running in ``frame``, if replay can call it with no arguments."""
    code = frame.f_code
    name = code.co_qualname
    if "<" in name or "." in name:  # module level, a lambda, a nested function, a method
        return None
    function = frame.f_globals.get(name)
    if function is None or getattr(inspect.unwrap(function), "__code__", None) is not code:
        return None
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    if any(p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return None
    module = frame.f_globals.get("__name__")
    if module == "__main__":
        module = _main_module()
    return f"{module}:{name}" if isinstance(module, str) and module else None


def _main_module() -> str | None:
    """The importable name of the script that runs as ``__main__`` (``python -m pkg.agent`` or ``python agent.py``)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        return str(spec.name)
    path = getattr(main, "__file__", None)
    if not path:
        return None
    try:
        relative = Path(path).resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return None  # not under the directory replay runs from
    parts = relative.with_suffix("").parts
    return ".".join(parts) if all(part.isidentifier() for part in parts) else None

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

A run that zero-code mode opened (``SPANREPLAY_MODE=record``, usually under
``opentelemetry-instrument``) has no function to name: the program is the
entry. Its command starts the program again, with the same arguments, in
replay mode::

    SPANREPLAY_MODE=replay SPANREPLAY_SOURCE=traces SPANREPLAY_RUN_ID=run_... opentelemetry-instrument python agent.py
"""

from __future__ import annotations

import inspect
import logging
import os
import shlex
import shutil
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType
from typing import Final

from spanreplay import semconv as sc

from .configuration import settings

__all__ = ["ALERT_LOGGER", "Launch", "launched_run", "replay_command", "run_failed", "trace_location"]

ALERT_LOGGER: Final = "spanreplay.alerts"
logger = logging.getLogger(ALERT_LOGGER)


def run_failed(
    run_id: str, agent: str, exc: BaseException, tb: TracebackType | None, *, error_type: str | None = None
) -> str:
    """Log the failure alert and note it on ``exc``; returns the replay command.

    ``error_type``: the exception's class name as the run span records it (masked
    where a detector fires); the class's own name when not given.
    """
    command = replay_command(run_id, _entry(tb.tb_frame) if tb is not None else None)
    launch = _launches.get(run_id)
    if launch is not None and launch.trace_scope:
        # The program replays the run when it receives the request again: say so after the command.
        command_text = f"{command} (then send it the request that started the run)"
    else:
        command_text = command
    note = f"spanreplay: run {run_id} failed; replay it offline with: {command_text}"
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)
    logger.error(
        "Run %s (agent %s) failed with %s; replay it offline with: %s",
        run_id,
        agent,
        error_type if error_type is not None else type(exc).__qualname__,
        command_text,
        extra={sc.RUN_ID: run_id, sc.REPLAY_COMMAND: command},
    )
    return command


def replay_command(run_id: str, entry: str | None) -> str:
    """The command that replays ``run_id``, recorded in this process.

    ``spanreplay replay SOURCE RUN --entry MODULE:FUNCTION`` for a run the code
    opened itself; the program's own command line in replay mode for a run that
    zero-code mode opened (see ``Launch``).
    """
    launch = _launches.get(run_id)
    if launch is not None:
        return launch.replay_command(run_id, _source(launch.cwd))
    return f"spanreplay replay {shlex.quote(_source())} {shlex.quote(run_id)} --entry {entry or 'MODULE:FUNCTION'}"


def trace_location(run_id: str) -> str:
    """Where this process writes ``run_id``'s trace, for people: its file, its database, or its exporter."""
    try:
        config = settings()
    except Exception:
        return "no trace was configured"
    places = []
    if config.file_processor is not None:
        places.append(_shown(config.file_processor.path_for(run_id)))
    if config.postgres_processor is not None:
        from spanreplay.sources.postgres.connect import describe

        places.append(describe(config.postgres_processor.dsn))
    if not places:
        return "the trace went to the OTLP exporter only" if config.otlp_processor is not None else "no trace kept"
    return "trace in " + " and ".join(places)


def _source(cwd: str | None = None) -> str:
    """Where the run can be read back: the trace directory, else the Postgres database, else SOURCE."""
    try:
        config = settings()
    except Exception:  # no configuration could be made: the command still names the run
        return "SOURCE"
    if config.trace_dir is not None:
        return _shown(config.trace_dir, cwd)
    processor = config.postgres_processor
    if processor is not None:
        from spanreplay.sources.postgres.connect import describe

        # describe() leaves the password out: libpq finds it in PGPASSWORD or ~/.pgpass.
        return describe(processor.dsn)
    return "SOURCE"


def _shown(path: str | os.PathLike[str], cwd: str | None = None) -> str:
    """``path`` relative to ``cwd`` (default: the current directory) when it lies below it, else absolute."""
    absolute = Path(path).absolute()
    try:
        shown = os.path.relpath(absolute, cwd)
    except ValueError:  # another drive (Windows)
        return str(absolute)
    return str(absolute) if shown.startswith("..") else shown


# --- zero-code runs: the program is the entry -----------------------------------------------------

_AUTO_INSTRUMENTATION = ("opentelemetry", "instrumentation", "auto_instrumentation")
_launches: dict[str, Launch] = {}
_launches_lock = threading.Lock()


@dataclass(frozen=True)
class Launch:
    """How this process was started, so that a command can start it again to replay one of its runs."""

    argv: tuple[str, ...]
    cwd: str
    # Under opentelemetry-instrument, which loads spanreplay's instrumentor (and so zero-code mode) at start.
    instrumented: bool
    trace_scope: bool

    @classmethod
    def of_this_process(cls, *, trace_scope: bool) -> Launch:
        # orig_argv keeps the interpreter's own options (-X, -m) that argv drops.
        argv = tuple(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
        return cls(argv, os.getcwd(), _under_opentelemetry_instrument(), trace_scope)

    def replay_command(self, run_id: str, source: str) -> str:
        """``SPANREPLAY_MODE=replay SPANREPLAY_SOURCE=... SPANREPLAY_RUN_ID=... [opentelemetry-instrument] ARGV``."""
        variables = {"SPANREPLAY_MODE": "replay", "SPANREPLAY_SOURCE": source, "SPANREPLAY_RUN_ID": run_id}
        if self.trace_scope:
            variables["SPANREPLAY_RUN_SCOPE"] = "trace"
        program = [_command_name(self.argv[0]), *self.argv[1:]] if self.argv else []
        if self.instrumented:
            program.insert(0, _command_name(_opentelemetry_instrument()))
        # NAME=value words before the program set its environment; only the value may be quoted.
        words = [f"{name}={shlex.quote(value)}" for name, value in variables.items()]
        command = " ".join([*words, *(shlex.quote(arg) for arg in program)])
        if os.path.abspath(os.getcwd()) != os.path.abspath(self.cwd):
            # The program's relative paths (agent.py, traces/) are from where it started.
            command = f"cd {shlex.quote(self.cwd)} && {command}"
        return command


def launched_run(run_id: str, launch: Launch | None) -> None:
    """Note that zero-code mode opened ``run_id`` (its alert names the program's command line), or forget it."""
    with _launches_lock:
        if launch is None:
            _launches.pop(run_id, None)  # ended: a server's runs must not pile up here
        else:
            _launches[run_id] = launch


def _under_opentelemetry_instrument() -> bool:
    # opentelemetry-instrument puts its sitecustomize.py first on PYTHONPATH and execs the program.
    path = getattr(sys.modules.get("sitecustomize"), "__file__", None)
    return isinstance(path, str) and Path(path).parent.parts[-3:] == _AUTO_INSTRUMENTATION


def _opentelemetry_instrument() -> str:
    """The opentelemetry-instrument beside this Python (the same environment), else the one on PATH."""
    beside = Path(sys.executable).parent / ("opentelemetry-instrument" + (".exe" if os.name == "nt" else ""))
    return str(beside) if beside.exists() else "opentelemetry-instrument"


def _command_name(program: str) -> str:
    """``/venv/bin/python`` as ``python`` when PATH finds that very file by its name; else as given."""
    name = os.path.basename(program)
    if name == program:
        return program
    found = shutil.which(name)
    # Compared without resolving links: a virtual environment's python links to the system's.
    return name if found is not None and os.path.abspath(found) == os.path.abspath(program) else program


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

"""``spanreplay replay SOURCE [RUN] --entry module:function``: run the agent against a recording."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Literal

import click
from rich.text import Text

from spanreplay import semconv as sc
from spanreplay.api.runs import replay
from spanreplay.errors import LeftoverEventsError, RecordedError, ReplayDivergenceError, UnfinishedEffectError
from spanreplay.model.error_records import rebuild_error, register_error_rebuilder
from spanreplay.model.events import ErrorInfo, Event, EventLog
from spanreplay.replaying.breakpoints import DIVERGENCE
from spanreplay.replaying.replaying_run import ReplayingRun

from ._common import (
    EXIT_BAD_INPUT,
    EXIT_DIVERGED,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_REPRODUCED,
    BadInput,
    console,
    error_console,
    preview,
)
from ._overrides import override_options, parse_overrides

_EPILOG = f"""\b
Exit codes:
  {EXIT_OK}  the replay completed and matched a recording that completed
  {EXIT_REPRODUCED}  the recorded failure was reproduced (the same error at the same
     step, or the point where a crashed run's process died)
  {EXIT_BAD_INPUT}  bad input: an unreadable source, an unknown run, an --entry that
     cannot be imported, a bad option
  {EXIT_DIVERGED}  divergence: the code stopped matching the recording (a different
     or extra call, a changed input, steps left over, another outcome)
  {EXIT_INTERNAL}  spanreplay itself failed (a bug: run again with --debug and report it)
"""


@click.command("replay", epilog=_EPILOG)
@click.argument("source")
@click.argument("run_id", metavar="[RUN]", required=False)
@click.option(
    "--entry",
    required=True,
    metavar="MODULE:FUNCTION",
    help="The agent code to run, called with no arguments; the current directory is on sys.path. "
    "Name the function that does the agent's work, not the one that opens spanreplay.record().",
)
@click.option(
    "--ignore",
    "ignore_paths",
    multiple=True,
    metavar="JSONPATH",
    help="Leave this JSON path out of the input comparison (e.g. 'messages[*].timestamp'); repeatable.",
)
@click.option(
    "--break-at",
    "break_at",
    multiple=True,
    callback=lambda ctx, param, value: parse_break_at(value),
    metavar="SEQ|divergence",
    help="Stop in the debugger (pdb, or the PYTHONBREAKPOINT hook) just before step SEQ is served, with "
    "`step` in scope; 'divergence' stops where the code first stops matching. Repeatable.",
)
@override_options
def replay_command(
    source: str,
    run_id: str | None,
    entry: str,
    ignore_paths: Sequence[str],
    break_at: list[int | Literal["divergence"]],
    sets: Sequence[str],
    raises: Sequence[str],
) -> None:
    """Replay run RUN from SOURCE: call the entry function while every boundary is
    served from the recording. No tool, model, clock or random source is really called.

    RUN may be left out when SOURCE holds a single run. --set and --raise edit what
    a step answered (what if the tool had returned this?); the replay then runs on
    to the end or to the first call that no longer matches the recording.
    """
    # The directory stays on sys.path for the whole replay: the agent may import lazily.
    with cwd_on_path():
        function = load_entry(entry)
        overrides = parse_overrides(sets, raises)
        replaying = replay(source, run_id, ignore_paths=ignore_paths, break_at=break_at, overrides=overrides or None)
        script_errors.register()
        script_errors.module = sys.modules.get(entry.partition(":")[0])
        run_info = replaying.events.run
        console().print(
            Text.assemble(
                ("Replaying ", "bold"),
                run_info.run_id,
                f" ({run_info.agent or 'agent'}, recorded ",
                (run_info.status, "bold"),
                f", {len(replaying.events)} steps) with {entry}",
            )
        )
        try:
            code = run_entry(replaying, function)
        finally:
            script_errors.module = None
    raise click.exceptions.Exit(code)


def parse_break_at(values: Sequence[str]) -> list[int | Literal["divergence"]]:
    """The ``--break-at`` values: seqs (ints) and ``divergence``."""
    parsed: list[int | Literal["divergence"]] = []
    for value in values:
        text = value.strip()
        if text.lower() == DIVERGENCE:
            parsed.append(DIVERGENCE)
        elif text.isdigit():
            parsed.append(int(text))
        else:
            raise BadInput(
                f"--break-at {value!r} is neither a step's seq (a number, as spanreplay show lists them) nor "
                f"'{DIVERGENCE}'; write e.g. --break-at 4 or --break-at {DIVERGENCE}."
            )
    return parsed


class _ScriptErrors:
    """Rebuilds exceptions recorded under ``__main__`` from the entry module.

    An agent recorded by running its file as a script (``python agent.py``)
    records its own exception types as ``__main__.X``; replayed through
    ``--entry agent:main`` the same class is ``agent.X``. Without this the
    recorded failure would come back as a RecordedError and not match.
    Registered once per process; it acts only while a replay command runs.
    """

    def __init__(self) -> None:
        self.module: ModuleType | None = None
        self.registered = False

    def register(self) -> None:
        if not self.registered:
            register_error_rebuilder(self)
            self.registered = True

    def __call__(self, info: ErrorInfo) -> BaseException | None:
        module = self.module
        if module is None or info.module != "__main__" or module.__name__ == "__main__":
            return None
        rebuilt = rebuild_error(dataclasses.replace(info, module=module.__name__))
        return None if isinstance(rebuilt, RecordedError) else rebuilt


script_errors = _ScriptErrors()


def run_entry(replaying: ReplayingRun, function: Callable[[], Any]) -> int:
    """Run the entry under the replay and print the verdict; returns the exit code."""
    out = console()
    log = replaying.events
    try:
        with replaying:
            result = call_entry(function)
    except ReplayDivergenceError as exc:
        if replaying.outcome == "reproduced":
            # The recording ends where the crashed process died, and the code got there.
            if isinstance(exc, UnfinishedEffectError):
                # It died inside a side effect: say what may have happened.
                out.print(Text.assemble(("reproduced: ", "bold green"), str(exc)))
                return EXIT_REPRODUCED
            out.print(
                Text.assemble(
                    ("reproduced: ", "bold green"),
                    f"the code reached seq {_last_seq(log)}, where the recorded process died "
                    f"(run {log.run.status}); {replaying.engine.served} of {len(log)} recorded steps served, "
                    "no real call made.",
                )
            )
            return EXIT_REPRODUCED
        # The notes say when the code caught the divergence and went on.
        told = "\n".join([str(exc), *getattr(exc, "__notes__", ())])
        error_console().print(Text.assemble(("diverged: ", "bold red"), told), soft_wrap=True)
        return EXIT_DIVERGED
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the agent's own failure: is it the recorded one?
        if replaying.outcome != "reproduced":
            # "failed": an edited step made the run fail its own way, every step served matched.
            label = "failed: " if replaying.outcome == "failed" else "diverged: "
            error_console().print(
                Text.assemble((label, "bold red"), f"the replay ended with {type(exc).__qualname__}: {exc}"),
                soft_wrap=True,
            )
            return EXIT_DIVERGED
        out.print(Text.assemble(("reproduced: ", "bold green"), reproduced_sentence(replaying, exc)))
        return EXIT_REPRODUCED
    if log.run.status == sc.RUN_STATUS_CRASHED:
        error_console().print(
            Text.assemble(
                ("diverged: ", "bold red"),
                f"the recorded process died after seq {_last_seq(log)}, but the replay completed: the crash came "
                "from outside the boundaries (a kill, running out of memory) or the code changed since.",
            ),
            soft_wrap=True,
        )
        return EXIT_DIVERGED
    edits = replaying.overrides
    matched = (
        f"the edited replay ran to the end ({len(edits.served)} step(s) edited)"
        if edits is not None and edits.used
        else "the replay matched the recording"
    )
    out.print(
        Text.assemble(
            ("completed: ", "bold green"),
            f"{matched}; {replaying.engine.served} of {len(log)} recorded steps served, no real call made.",
        )
    )
    if result is not None:
        out.print(Text.assemble(("returned: ", "bold"), preview(repr(result), 200)))
    return EXIT_OK


def failing_step(log: EventLog) -> Event | None:
    """The step the recorded run failed at: the last one that raised the run's error."""
    if log.run.error is None:
        return None
    wanted = str(log.run.error)
    failed = [e for e in log if e.error is not None and str(e.error) == wanted]
    return failed[-1] if failed else None


def reproduced_sentence(replaying: ReplayingRun, exc: BaseException) -> str:
    """Where the recorded failure happened and whether the replay got there the same way.

    The replay got there the same way when it asked for every recorded step: the
    steps the failing one was nested in, the ones nested in it, and any recorded
    after it while the error was handled (an ``except`` or ``finally`` that
    logged, then re-raised) all count. Serving a call serves what it nested, so
    the steps served are compared with the whole recording, not with a seq.
    """
    log = replaying.events
    total = len(log)
    step = failing_step(log)
    what = f"{type(exc).__qualname__}: {exc}"
    never = never_asked(replaying)
    if never:
        first = never[0]
        return (
            f"{what} was raised again, as recorded"
            + (f" at seq {step.seq} ({step.kind} {step.key!r})" if step is not None else "")
            + f", but the replay never asked for {len(never)} of the {total} recorded steps, the first at "
            f"seq {first.seq} ({first.kind} {first.key!r}): it reached the error another way; no real call made."
        )
    if step is None:
        # Raised by the code between boundaries, not by a recorded step.
        return f"{what} was raised again, as recorded; all {total} recorded steps served, no real call made."
    after = sum(1 for e in log if e.seq > step.seq and not e.call_id.startswith(step.call_id + "/"))
    handled = f" ({after} of them recorded after it, as the error was handled)" if after else ""
    return (
        f"{what} was raised again at seq {step.seq} ({step.kind} {step.key!r}), the step where the recorded run "
        f"failed; all {total} recorded steps served{handled}, no real call made."
    )


def never_asked(replaying: ReplayingRun) -> list[Event]:
    """The recorded steps the replay never asked for, in recorded order (a served call's nested ones were served)."""
    try:
        replaying.engine.check_finished()
    except LeftoverEventsError as exc:
        log = replaying.events
        return [event for call_id in exc.leftover if (event := log.by_call_id(call_id)) is not None]
    return []


def _last_seq(log: EventLog) -> int:
    return log.events[-1].seq if len(log) else 0


def call_entry(function: Callable[[], Any]) -> Any:
    """Call the agent's entry function; an async one runs to its end in a new event loop."""
    result = function()
    return asyncio.run(result) if inspect.iscoroutine(result) else result


def load_entry(entry: str) -> Callable[[], Any]:
    """The function ``module:function`` names, imported with the current directory on sys.path."""
    module_name, sep, attr = entry.partition(":")
    if not sep or not module_name or not attr:
        raise BadInput(
            f"--entry {entry!r} is not module:function; write it as e.g. --entry mypkg.agent:main "
            "(a module importable from the current directory, and a function in it)."
        )
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name + ".").startswith(exc.name + "."):
            raise BadInput(
                f"--entry {entry}: module {module_name} was not found in {os.getcwd()} or on sys.path; "
                "run spanreplay from the directory that holds it, or install its package."
            ) from exc
        raise BadInput(f"--entry {entry}: importing {module_name} failed: {exc}; install what it imports.") from exc
    except Exception as exc:
        raise BadInput(
            f"--entry {entry}: importing {module_name} raised {type(exc).__qualname__}: {exc}; fix the "
            "module so that importing it works (--debug shows the traceback)."
        ) from exc
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise BadInput(
                f"--entry {entry}: module {module_name} ({getattr(module, '__file__', '?')}) has no "
                f"attribute {attr}; name a function defined in it."
            )
    if not callable(target):
        raise BadInput(f"--entry {entry}: {attr} is a {type(target).__name__}, not a function; name a function.")
    _check_no_required_arguments(entry, target)
    function: Callable[[], Any] = target
    return function


def _check_no_required_arguments(entry: str, target: Callable[..., Any]) -> None:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # builtins without a signature: let the call decide
        return
    required = [
        p.name
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if required:
        raise BadInput(
            f"--entry {entry} takes required arguments ({', '.join(required)}), but replay calls it with none; "
            "point --entry at a function that runs the agent without arguments."
        )


@contextmanager
def cwd_on_path() -> Iterator[None]:
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)

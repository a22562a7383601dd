"""``spanreplay fork SOURCE RUN [--at N] --entry M:F`` (or ``-- python agent.py``): replay, then go live."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import click
import orjson
from rich.text import Text

from spanreplay.errors import ReplayDivergenceError
from spanreplay.recording.configuration import configure, settings
from spanreplay.replaying.forking_run import ForkingRun, fork

from ._common import EXIT_BAD_INPUT, EXIT_DIVERGED, EXIT_INTERNAL, EXIT_OK, BadInput, CliState, console, error_console
from ._overrides import override_options, parse_overrides
from ._replay import call_entry, cwd_on_path, load_entry

EXIT_FAILED = 1

_EPILOG = f"""\b
Exit codes:
  {EXIT_OK}  the new run completed (recorded)
  {EXIT_FAILED}  the new run failed (recorded, with its error)
  {EXIT_BAD_INPUT}  bad input: an unreadable source, an unknown run, a bad --at, --set or --entry
  {EXIT_DIVERGED}  before the fork point the code stopped matching the recording
  {EXIT_INTERNAL}  spanreplay itself failed (a bug: run again with --debug and report it)
With -- COMMAND, the exit code is the command's own.
"""


@click.command("fork", epilog=_EPILOG)
@click.argument("source")
@click.argument("run_id", metavar="RUN")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND...]")
@click.option(
    "--at",
    type=click.IntRange(min=1),
    help="The seq of the first step to run live (default: go live where the code stops matching the recording).",
)
@click.option(
    "--entry",
    metavar="MODULE:FUNCTION",
    help="The agent code to run, called with no arguments; the current directory is on sys.path.",
)
@override_options
@click.option("--agent", help="The new run's agent name (default: the forked run's).")
@click.option(
    "--trace-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the new run's trace goes (default: SOURCE when it is a directory, else SPANREPLAY_TRACE_DIR "
    "or traces).",
)
@click.option(
    "--allow-effects", is_flag=True, help="Go live even at a step that changes the world and may have happened."
)
@click.option("--ignore", "ignore_paths", multiple=True, metavar="JSONPATH", help="As for replay; repeatable.")
@click.pass_obj
def fork_command(  # noqa: PLR0913 -- click passes one keyword argument per option
    state: CliState,
    *,
    source: str,
    run_id: str,
    command: Sequence[str],
    at: int | None,
    entry: str | None,
    sets: Sequence[str],
    raises: Sequence[str],
    agent: str | None,
    trace_dir: Path | None,
    allow_effects: bool,
    ignore_paths: Sequence[str],
) -> None:
    """Fork run RUN of SOURCE: serve its recorded steps before --at (with any --set and
    --raise edits), then run the real work from there on, recorded as a new run that
    names RUN as its parent. The new run holds the served steps too, so it replays
    on its own.

    \b
    spanreplay fork traces/ RUN --at 6 --entry agent:main
    spanreplay fork traces/ RUN --set 6=@result.json --entry agent:main
    spanreplay fork traces/ RUN --at 6 -- python agent.py --question "..."
    """
    if (entry is None) == (not command):
        raise BadInput(
            "spanreplay fork needs the code to run: --entry MODULE:FUNCTION, or the program after '--' "
            "(spanreplay fork SOURCE RUN --at N -- python agent.py), one of the two."
        )
    overrides = parse_overrides(sets, raises)
    target = trace_dir if trace_dir is not None else (Path(source) if Path(source).is_dir() else None)
    if command:
        env = _fork_env(source, run_id, at, agent, target, allow_effects=allow_effects)
        code = _fork_program(list(command), env, sets, raises)
        raise click.exceptions.Exit(code)
    assert entry is not None
    if target is not None:
        configure(trace_dir=target, tracer_provider=state.tracer_provider)
    else:
        configure(tracer_provider=state.tracer_provider)
    with cwd_on_path():
        function = load_entry(entry)
        forking = fork(
            source,
            run_id,
            at=at,
            overrides=overrides or None,
            agent=agent,
            allow_effects=allow_effects,
            ignore_paths=ignore_paths,
        )
        code = _run(forking, function, entry, target)
    raise click.exceptions.Exit(code)


def _run(forking: ForkingRun, function: object, entry: str, target: Path | None) -> int:
    parent = forking.parent.events
    console().print(
        Text.assemble(
            ("Forking ", "bold"),
            f"{parent.run_id} ({parent.run.agent or 'agent'}, recorded {parent.run.status}, {len(parent)} steps) "
            f"with {entry}, "
            + (f"live from seq {forking.at}" if forking.at is not None else "live where the code stops matching"),
        )
    )
    try:
        with forking:
            assert callable(function)
            call_entry(function)
    except ReplayDivergenceError as exc:
        told = "\n".join([str(exc), *getattr(exc, "__notes__", ())])
        error_console().print(Text.assemble(("diverged: ", "bold red"), told), soft_wrap=True)
        return EXIT_DIVERGED
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        error_console().print(
            Text.assemble(
                ("failed: ", "bold red"),
                f"the new run {forking.run_id} {_where(forking)} failed with {type(exc).__qualname__}: {exc} "
                "(recorded with its error).",
            ),
            soft_wrap=True,
        )
        return EXIT_FAILED
    where = settings().trace_dir or target or "the configured exporters"
    console().print(
        Text.assemble(
            ("forked: ", "bold green"),
            f"run {forking.run_id} {_where(forking)} completed, recorded into {where}/ with forked_from "
            f"{parent.run_id}.\n  Replay it: spanreplay replay {where} {forking.run_id} --entry {entry}",
        )
    )
    return EXIT_OK


def _where(forking: ForkingRun) -> str:
    if forking.forked_at is None:
        return "(every step served from the recording)"
    return f"(served up to seq {forking.forked_at - 1}, live from seq {forking.forked_at})"


def _fork_env(
    source: str, run_id: str, at: int | None, agent: str | None, target: Path | None, *, allow_effects: bool
) -> dict[str, str]:
    """This process's environment with the settings of zero-code fork mode."""
    env = dict(os.environ)
    env.update(
        {
            "SPANREPLAY_MODE": "fork",
            "SPANREPLAY_SOURCE": os.path.abspath(source) if "://" not in source else source,
            "SPANREPLAY_RUN_ID": run_id,
            "SPANREPLAY_RUN_SCOPE": "process",
        }
    )
    for name, value in (
        ("SPANREPLAY_FORK_AT", str(at) if at is not None else None),
        ("SPANREPLAY_AGENT", agent),
        ("SPANREPLAY_TRACE_DIR", os.path.abspath(target) if target is not None else None),
        ("SPANREPLAY_ALLOW_EFFECTS", "1" if allow_effects else None),
    ):
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def _fork_program(command: list[str], env: dict[str, str], sets: Sequence[str], raises: Sequence[str]) -> int:
    """Run a program under ``opentelemetry-instrument`` in zero-code fork mode, with the
    environment ``env`` and the step edits ``sets`` and ``raises``; its exit code."""
    if Path(command[0]).name != "opentelemetry-instrument":
        found = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent)) or shutil.which(
            "opentelemetry-instrument"
        )
        if found is None:
            raise BadInput(
                "spanreplay fork -- COMMAND runs the command under opentelemetry-instrument, which is not "
                "installed; pip install opentelemetry-distro, or fork with --entry MODULE:FUNCTION."
            )
        command = [found, *command]
    with tempfile.TemporaryDirectory(prefix="spanreplay-fork-") as scratch:
        env.pop("SPANREPLAY_OVERRIDES", None)
        if sets or raises:
            edits = parse_overrides(sets, ())
            file = Path(scratch) / "overrides.json"
            file.write_bytes(
                orjson.dumps(
                    {
                        "set": {str(step): value for step, value in edits.items()},
                        "raise": {step.partition("=")[0].strip(): step.partition("=")[2] for step in raises},
                    }
                )
            )
            env["SPANREPLAY_OVERRIDES"] = str(file)
        try:
            return subprocess.run(command, env=env, check=False).returncode
        except OSError as exc:
            raise BadInput(
                f"spanreplay fork cannot start {command[1] if len(command) > 1 else command[0]}: {exc}."
            ) from None

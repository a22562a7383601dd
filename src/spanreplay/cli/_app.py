"""The ``spanreplay`` command group: global options, and errors turned into sentences and exit codes."""

from __future__ import annotations

import traceback
import warnings
from typing import Any

import click
from rich.text import Text

from spanreplay import __version__
from spanreplay.errors import SpanReplayError
from spanreplay.readers import SpanReplayWarning

from ._check import check_command
from ._common import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    BadInput,
    CliState,
    error_console,
    warn,
)
from ._convert import convert_command
from ._cost import cost_command
from ._db import db_command
from ._demo import demo_command
from ._diff import diff_command
from ._export import export_command
from ._export_test import export_test_command
from ._fork import fork_command
from ._lint import lint_command
from ._prune import prune_command
from ._push import push_command
from ._replay import replay_command
from ._report import report_command
from ._runs import runs_command
from ._show import show_command


class _Group(click.Group):
    """Runs a command and turns what it raises into one readable sentence and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        state = ctx.ensure_object(CliState)
        with warnings.catch_warnings(record=True) as caught:
            # A torn last line or a skipped file is worth a line on stderr, every time.
            warnings.simplefilter("always", SpanReplayWarning)
            try:
                return super().invoke(ctx)
            except (click.exceptions.Exit, click.exceptions.Abort):
                raise
            except click.ClickException as exc:
                _traceback(state, exc.__cause__)
                raise
            except SpanReplayError as exc:
                _traceback(state, exc)
                raise BadInput(str(exc)) from exc
            except KeyboardInterrupt:
                error_console().print("interrupted", style="bold red")
                raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
            except Exception as exc:
                _traceback(state, exc)
                error_console().print(
                    Text.assemble(
                        ("internal error: ", "bold red"),
                        f"spanreplay failed unexpectedly with {type(exc).__qualname__}: {exc}. This is a bug in "
                        "spanreplay; "
                        + (
                            "please report it with the traceback above."
                            if state.debug
                            else "run the command again with --debug and report the traceback."
                        ),
                    ),
                    soft_wrap=True,
                )
                raise click.exceptions.Exit(EXIT_INTERNAL) from None
            finally:
                for warning in caught:
                    if issubclass(warning.category, SpanReplayWarning):
                        warn(str(warning.message))
                    else:
                        warnings.showwarning(
                            warning.message, warning.category, warning.filename, warning.lineno, warning.file
                        )


def _traceback(state: CliState, exc: BaseException | None) -> None:
    if state.debug and exc is not None:
        error_console().print(Text("".join(traceback.format_exception(exc)).rstrip()), soft_wrap=True)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the traceback of an error, not just its sentence.")
@click.version_option(__version__, "--version", prog_name="spanreplay")
@click.pass_context
def cli(ctx: click.Context, *, debug: bool) -> None:
    """Record AI-agent runs as OpenTelemetry spans and replay them offline, step by step.

    \b
    spanreplay demo                               record and replay a bundled example
    spanreplay runs traces/                       the recorded runs, with status and error
    spanreplay show traces/ RUN                   one run, step by step
    spanreplay replay traces/ RUN --entry m:main  run the agent code against the recording
    spanreplay export-test traces/ RUN --entry m:main   the run as a pytest regression test
    spanreplay fork traces/ RUN --at 6 --entry m:main  serve steps 1-5, run the rest live as a new run
    spanreplay check traces/ --entry m:main       replay every run against the current code (a CI gate)
    spanreplay cost traces/ --by month            tokens and USD per agent, the runs that burned too much
    spanreplay push traces/ --endpoint URL        send the runs to a Collector, Jaeger, Tempo (OTLP)
    spanreplay report traces/ RUN -o run.html     one run as a page: timeline, cost per step, payloads
    spanreplay diff traces/ RUN_A RUN_B           two runs step by step: the first that differs, the deltas
    spanreplay lint src/                          direct clock, random and network calls replay cannot serve

    Exit codes: 0 ok, 2 bad input (an unreadable source, an unknown run, a bad
    option), 4 a bug in spanreplay itself; replay adds 1 (failure reproduced)
    and 3 (divergence), see spanreplay replay --help; diff adds 1 (the runs differ).
    and 3 (divergence), see spanreplay replay --help and spanreplay fork --help.
    and 3 (divergence), see spanreplay replay --help; check adds 1 (a run
    diverged), see spanreplay check --help.
    """
    ctx.ensure_object(CliState).debug = debug


cli.add_command(runs_command)
cli.add_command(show_command)
cli.add_command(replay_command)
cli.add_command(fork_command)
cli.add_command(demo_command)
cli.add_command(export_command)
cli.add_command(prune_command)
cli.add_command(db_command)
cli.add_command(cost_command)
cli.add_command(report_command)
cli.add_command(convert_command)
cli.add_command(push_command)
cli.add_command(diff_command)
cli.add_command(lint_command)
cli.add_command(export_test_command)
cli.add_command(check_command)


def main() -> None:
    """The ``spanreplay`` console script."""
    cli(prog_name="spanreplay")


__all__ = ["cli", "main"]

"""What every command shares: exit codes, consoles, and the formatting of runs and steps."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click
import orjson
from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from spanreplay.model.events import RunSummary
from spanreplay.sources.kinds import is_postgres_dsn

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

# Exit codes. replay uses all of them; the other commands use OK and BAD_INPUT.
EXIT_OK = 0
EXIT_REPRODUCED = 1
EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3
# spanreplay itself failed: a bug, never a verdict on the run.
EXIT_INTERNAL = 4
EXIT_INTERRUPTED = 130

# Narrower previews than this are not worth a table column.
MIN_PREVIEW = 16

# ``--prices FILE`` of the commands that price model calls (cost, report): the value is
# handed to ``spanreplay.cost.price_table`` as ``prices_file``.
prices_option = click.option(
    "--prices",
    "prices_file",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="A TOML or JSON file of model prices over spanreplay's table (also: SPANREPLAY_PRICES).",
)

STATUS_STYLES = {
    "ok": "green",
    "error": "red",
    "crashed": "magenta",
    "running": "yellow",
    "started, never finished": "magenta",
    "damaged": "bold red",
}
# The status shown for a run that load() refuses (RunSummary.damaged), whatever it recorded.
DAMAGED = "damaged"

# Width used when the output is not a terminal (a pipe, a file, a test): wide
# enough that run ids and call ids are never folded across lines.
_PIPE_WIDTH = 200


@dataclass
class CliState:
    """Settings shared by the commands of one invocation (``click.Context.obj``).

    Attributes:
        debug: show tracebacks instead of one-sentence errors.
        tracer_provider: the SDK provider ``spanreplay demo`` records through;
            None uses the global one (created on first use). Code that embeds
            the CLI in a process that already has its own provider passes it here.
        clock: the current time, for options that count back from now
            (``check --since 7d``); tests pass a fixed one.
    """

    debug: bool = False
    tracer_provider: TracerProvider | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))


class BadInput(click.ClickException):
    """A command-line value that cannot be used: exits 2, like a click usage error."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file: Any = None) -> None:
        error_console().print(Text.assemble(("error: ", "bold red"), self.format_message()), soft_wrap=True)


def require_postgres_dsn(dsn: str) -> None:
    """Refuse, as bad input, a DSN argument that names no Postgres database."""
    if not is_postgres_dsn(dsn):
        raise BadInput(f"{dsn!r} is not a Postgres DSN; write postgresql://USER@HOST:PORT/DATABASE.")


# Characters that drive a terminal rather than show: C0 (ESC among them), DEL, C1, and the
# Unicode ones that reorder or break lines. Text read from traces (agent names, run ids,
# payloads) could otherwise move the cursor, recolour, retitle or hide what is printed.
# A lone surrogate too (an agent name from os.listdir()): the stream cannot encode it.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(text: str, *, newlines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``), for people to read.

    Args:
        newlines: keep line breaks (a message of several lines); otherwise they are escaped too.
    """
    if newlines:
        return "\n".join(_CONTROL.sub(_escape, line) for line in text.split("\n"))
    return _CONTROL.sub(_escape, text)


class _Console(Console):
    """A console that escapes control characters in everything it prints, but its own styles.

    Escaping the rendered segments, rather than each value before it is printed, covers
    every table, message and traceback at once: what rich adds itself (colours, cursor
    moves) is in the styles and control segments, not in the text.
    """

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and _CONTROL.search(segment.text.replace("\n", "")):
                yield Segment(printable(segment.text, newlines=True), segment.style)
            else:
                yield segment


def _width(stream: Any) -> int | None:
    isatty = getattr(stream, "isatty", None)
    if (isatty is not None and isatty()) or "COLUMNS" in os.environ:
        return None
    return _PIPE_WIDTH


def console() -> Console:
    """A console on the current stdout (click's test runner swaps it, so look it up each time)."""
    return _Console(file=sys.stdout, highlight=False, soft_wrap=True, width=_width(sys.stdout))


def error_console() -> Console:
    return _Console(file=sys.stderr, highlight=False, soft_wrap=True, width=_width(sys.stderr))


def warn(message: str) -> None:
    error_console().print(Text.assemble(("warning: ", "bold yellow"), message), soft_wrap=True)


def print_json(value: Any) -> None:
    """JSON for scripts: plain text on stdout, never wrapped or coloured."""
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode())


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, ""))


def format_time(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC") if moment else "-"


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    return f"{seconds:.2f} s"


def format_usd(usd: float, *, incomplete: bool = False) -> str:
    """``$0.1234`` (``$0.000297`` below a cent); ``*`` marks a sum that leaves some calls out."""
    text = f"${usd:,.4f}" if usd >= 0.01 or usd == 0 else f"${usd:.6f}"
    return text + ("*" if incomplete else "")


def _run_usd(run: RunSummary) -> str:
    unknown = run.unpriced_calls + run.calls_without_usage
    if not run.model_calls:
        return "-"
    if unknown == run.model_calls:
        return "?"  # no call of the run could be priced: not the same as free
    return format_usd(run.usd, incomplete=bool(unknown))


def preview(text: str, limit: int = 48) -> str:
    """One line of at most ``limit`` characters, control characters escaped."""
    flat = flat_text(text)
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def flat_text(text: str) -> str:
    """``text`` on one line, runs of white space made one space, control characters escaped."""
    return printable(" ".join(text.split()))


def flexible_width(total: int, rows: Sequence[Sequence[str]], flexible: int, *, cap: int = 60) -> int:
    """How wide each of ``flexible`` preview columns may be, after the columns in ``rows``.

    rich shrinks every column of a table too wide for the terminal, ids included;
    sizing the previews to what is left keeps ids whole (people copy them). When
    the result is too small to be useful, the caller prints lines, not a table.
    """
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)] if rows else []
    return room_for(total, widths, flexible, cap=cap)


def room_for(total: int, widths: Sequence[int], flexible: int, *, cap: int = 60) -> int:
    """``flexible_width`` for columns whose widths are known."""
    columns = len(widths) + flexible
    # show_edge=False: one space of padding each side of a cell, one rule between columns.
    used = sum(w + 2 for w in widths) + 2 * flexible + columns - 1
    return min(cap, (total - used) // flexible)


def print_runs(out: Console, found: list[RunSummary], depths: list[int] | None = None) -> None:
    """The runs as a table, or as blocks of lines where the terminal is too narrow for one.

    ``depths`` (one per run) indents a sub-agent's run under the run that opened it.
    """
    indents = ["  " * (depth - 1) + "└ " if depth else "" for depth in depths or [0] * len(found)]
    rows = [
        [
            indent + printable(run.run_id),
            printable(run.agent or "-"),
            printable(DAMAGED if run.damaged else run.status),
            str(run.steps),
            format_time(run.started),
            format_duration(run.duration_s),
            f"{run.model_calls:,}",
            f"{run.tokens:,}",
            _run_usd(run),
        ]
        for run, indent in zip(found, indents, strict=True)
    ]
    headers = ["run id", "agent", "status", "steps", "started", "duration", "model calls", "tokens", "USD"]
    room = flexible_width(out.width, [headers, *rows], 1, cap=120)
    if room < MIN_PREVIEW:
        for run, row in zip(found, rows, strict=True):
            out.print(Text.assemble((row[0], "bold"), "  ", status_text(row[2]), f"  {run.steps} steps"))
            out.print(f"  {row[1]}, started {row[4]}, took {row[5]}", markup=False)
            if run.model_calls:
                out.print(f"  {row[6]} model calls, {row[7]} tokens, {row[8]}", markup=False)
            if run.damaged or run.error:
                out.print(Text.assemble("  ", (printable(run.damaged or run.error or "", newlines=True), "red")))
        return
    table = Table(show_edge=False, header_style="bold")
    for header in headers:
        right = header in ("steps", "duration", "model calls", "tokens", "USD")
        table.add_column(header, no_wrap=True, justify="right" if right else "left")
    table.add_column("error", no_wrap=True)
    for run, row in zip(found, rows, strict=True):
        table.add_row(
            *row[:2], status_text(row[2]), *row[3:], Text(preview(run.damaged or run.error or "", room), style="red")
        )
    out.print(table)
    # A refusal is a sentence with the fix: cut to a preview in the table, it is printed whole below.
    for run in found:
        if run.damaged:
            out.print(Text.assemble((f"{printable(run.run_id)}: ", "bold"), (printable(run.damaged), "red")))

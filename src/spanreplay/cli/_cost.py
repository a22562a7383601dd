"""``spanreplay cost SOURCE``: model calls, tokens and US dollars, grouped, with the outlier runs."""

from __future__ import annotations

import csv
import io
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from spanreplay.cost import (
    DEFAULT_FACTOR,
    GROUPINGS,
    CostReport,
    Grouping,
    Totals,
    plot_days,
    price_table,
    replay_command,
    show_command,
    summarize,
)

from ._common import console, format_time, format_usd, prices_option, print_json, printable

if TYPE_CHECKING:
    _ParamType = click.ParamType[datetime]
else:  # click before 8.2 has no generic ParamType
    _ParamType = click.ParamType

_HEADERS = {"run": "run id", "agent": "agent", "model": "model", "day": "day (UTC)", "month": "month (UTC)"}


class _Moment(_ParamType):
    """A date (2026-11-01) or a date and time (2026-11-01T12:00, UTC unless it says otherwise)."""

    name = "DATE"

    def __init__(self, *, end: bool) -> None:
        # --until DATE means to the end of that day.
        self.end = end

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> datetime:
        if isinstance(value, datetime):
            return value
        text = str(value).strip()
        try:
            day = date.fromisoformat(text)
        except ValueError:
            pass
        else:
            start = datetime(day.year, day.month, day.day, tzinfo=UTC)
            return start + timedelta(days=1) if self.end else start
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            self.fail(
                f"{text!r} is not a date; write it as 2026-11-01 or 2026-11-01T12:00 (UTC unless it has an offset).",
                param,
                ctx,
            )
        return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@click.command("cost")
@click.argument("source")
@click.option(
    "--by",
    type=click.Choice(GROUPINGS),
    default="agent",
    show_default=True,
    help="One line per run, agent, model, day or month (days and months in UTC).",
)
@click.option("--since", type=_Moment(end=False), help="Only calls made from this date (or time) on.")
@click.option("--until", type=_Moment(end=True), help="Only calls made before the end of this date (or this time).")
@prices_option
@click.option(
    "--outlier-factor",
    type=click.FloatRange(min=1.0, min_open=True),
    default=DEFAULT_FACTOR,
    show_default=True,
    help="Flag runs whose tokens exceed this multiple of their agent's median run.",
)
@click.option(
    "--plot", "plot_file", type=click.Path(dir_okay=False), metavar="FILE.png", help="Also draw tokens and USD per day."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV, for spreadsheets.")
def cost_command(  # noqa: PLR0913 -- click passes one keyword argument per option
    *,
    source: str,
    by: Grouping,
    since: datetime | None,
    until: datetime | None,
    prices_file: str | None,
    outlier_factor: float,
    plot_file: str | None,
    as_json: bool,
    as_csv: bool,
) -> None:
    """Model calls, input, output and cache tokens, and US dollars in SOURCE, from the spans'
    own usage attributes, with the runs that burned far more tokens than usual.

    SOURCE is a trace file, a directory, a quoted glob, - for stdin, a Jaeger or
    Tempo URL, or a Postgres DSN. Prices come from spanreplay's dated table
    (see docs/cost.md); a model it does not know is reported, never counted as free.

    \b
    spanreplay cost traces/ --by month
    spanreplay cost traces/ --by run --since 2026-11-01 --json
    spanreplay cost traces/ --by day --plot spend.png
    """
    if as_json and as_csv:
        raise click.UsageError("--json and --csv each print the whole report; pick one.")
    if since is not None and until is not None and until <= since:
        raise click.UsageError(f"--until ({until.isoformat()}) is not after --since ({since.isoformat()}).")
    table = price_table(prices_file)
    report = summarize(source, by=by, since=since, until=until, prices=table, factor=outlier_factor)
    if plot_file is not None:
        plot_days(report, plot_file)
    if as_json:
        print_json(report.to_dict())
    elif as_csv:
        click.echo(_csv(report), nl=False)
    else:
        _print(console(), report, plot_file)


def usd_text(totals: Totals) -> str:
    """The USD of a group; ``*`` when some calls could not be priced, ``-`` when none could."""
    if totals.calls == totals.calls_without_usage + totals.unpriced_calls:
        return "-"
    return format_usd(totals.usd, incomplete=bool(totals.unpriced_calls))


def _print(out: Console, report: CostReport, plot_file: str | None) -> None:
    window = ""
    if report.since or report.until:
        window = f", {format_time(report.since) if report.since else 'the start'} to " + (
            format_time(report.until) if report.until else "now"
        )
    out.print(
        Text.assemble(("Model calls in ", "bold"), (report.source, "bold"), (f" by {report.by}{window}", "bold")),
        soft_wrap=True,
    )
    if not report.total.calls:
        out.print("no model calls" + (" in that window" if window else ""), markup=False)
        _notes(out, report, plot_file)
        return
    unknown = any(g.totals.calls_without_usage for g in report.groups)
    table = Table(show_edge=False, header_style="bold")
    table.add_column(_HEADERS[report.by], no_wrap=True)
    if report.by == "run":
        table.add_column("agent", no_wrap=True)
        table.add_column("started", no_wrap=True)
    numbers = ["calls", *(["no usage"] if unknown else []), "input", "output", "cache read", "cache write", "USD"]
    for header in numbers:
        table.add_column(header, justify="right", no_wrap=True)
    for group in report.groups:
        # Text, not str: a key or agent name read from a trace is neither markup nor control codes.
        row: list[str | Text] = [Text(printable(group.key))]
        if report.by == "run":
            agent = group.run.agent or "-" if group.run else "-"
            row += [Text(printable(agent)), format_time(group.run.started if group.run else None)]
        table.add_row(*row, *_numbers(group.totals, unknown=unknown))
    if len(report.groups) > 1:
        table.add_section()
        filler = ["", ""] if report.by == "run" else []
        table.add_row(Text("total", style="bold"), *filler, *_numbers(report.total, unknown=unknown), style="bold")
    out.print(table)
    _notes(out, report, plot_file)
    _outliers(out, report)


def _numbers(totals: Totals, *, unknown: bool) -> list[str]:
    return [
        f"{totals.calls:,}",
        *([f"{totals.calls_without_usage:,}"] if unknown else []),
        f"{totals.input_tokens:,}",
        f"{totals.output_tokens:,}",
        f"{totals.cache_read_tokens:,}",
        f"{totals.cache_write_tokens:,}",
        usd_text(totals),
    ]


def _notes(out: Console, report: CostReport, plot_file: str | None) -> None:
    total = report.total
    if total.calls_without_usage:
        out.print(
            f"{total.calls_without_usage:,} of {total.calls:,} calls carry no token usage (spans of an older or "
            "another instrumentation, or calls that failed before an answer): they are counted as calls, with "
            "unknown tokens, and no USD.",
            markup=False,
        )
    if total.unpriced_models:
        listed = ", ".join(f"{model} ({_calls(n)})" for model, n in sorted(total.unpriced_models.items()))
        out.print(
            Text.assemble(
                ("* ", "bold yellow"),
                f"no price for {listed}: their tokens are counted, their USD is left out of the totals. Add them "
                "to a price file and pass it with --prices FILE (or SPANREPLAY_PRICES); see docs/cost.md.",
            ),
            soft_wrap=True,
        )
    if total.recorded_cost_calls:
        out.print(
            f"{_calls(total.recorded_cost_calls)} to models the table does not know "
            f"{'is' if total.recorded_cost_calls == 1 else 'are'} priced from the cost their spans recorded.",
            markup=False,
        )
    out.print(
        f"input is uncached input; prompt = input + cache read + cache write. Prices: {report.prices.describe()}.",
        markup=False,
        style="dim",
    )
    if plot_file is not None:
        out.print(f"plot written to {plot_file}", markup=False)


def _calls(n: int) -> str:
    return f"{n:,} call" + ("" if n == 1 else "s")


def _outliers(out: Console, report: CostReport) -> None:
    if not report.outliers:
        out.print(f"no run over {report.factor:g}x its agent's median tokens", markup=False)
        return
    out.print(Text(f"{len(report.outliers)} run(s) over {report.factor:g}x their agent's median tokens:", style="bold"))
    for outlier in report.outliers:
        out.print(
            Text.assemble(
                (printable(outlier.run.run_id), "bold"),
                f" ({printable(outlier.run.agent or 'no agent')}, started {format_time(outlier.run.started)}): "
                f"{outlier.totals.total_tokens:,} tokens, {outlier.ratio:.1f}x the median "
                f"{outlier.median_tokens:,.0f}, {usd_text(outlier.totals)}",
            ),
            soft_wrap=True,
        )
        for cause in outlier.causes:
            out.print(Text.assemble("  likely cause: ", (printable(cause.summary), "yellow")), soft_wrap=True)
        out.print(f"  look:   {printable(show_command(report.source, outlier.run.run_id, outlier.seq))}", markup=False)
        out.print(f"  replay: {printable(replay_command(report.source, outlier.run.run_id))}", markup=False)


def _csv(report: CostReport) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    extra = ["agent", "status", "started"] if report.by == "run" else []
    fields = [
        "calls",
        "input_tokens",
        "output_tokens",
        "cache_read_tokens",
        "cache_write_tokens",
        "total_tokens",
        "usd",
        "complete",
        "calls_without_usage",
        "unpriced_calls",
    ]
    writer.writerow([report.by, *extra, *fields])
    for group in report.groups:
        row = group.to_dict(report.by)
        writer.writerow([group.key, *(row.get(k) or "" for k in extra), *(row[f] for f in fields)])
    total = report.total.to_dict()
    writer.writerow(["total", *([""] * len(extra)), *(total[f] for f in fields)])
    return buffer.getvalue()

"""``spanreplay diff SOURCE RUN_A RUN_B``: two runs compared step by step."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from spanreplay.api.loading import load
from spanreplay.cost import price_table
from spanreplay.replaying.run_diff import MAX_DIFF_LINES, Part, RunCost, RunDiff, StepDiff, diff_runs, json_lines

from ._common import EXIT_BAD_INPUT, EXIT_OK, console, format_usd, prices_option, print_json

# The runs differ: not an error, a verdict (like diff(1)).
EXIT_DIFFERENT = 1
_COUNT_NAMES = {
    "call": "call",
    "input": "input",
    "output": "output",
    "error": "error",
    "missing_in_a": "missing in A",
    "missing_in_b": "missing in B",
}
# Differing steps listed one a line after the first one's diff; --json lists them all.
_LISTED = 20

_EPILOG = f"""\b
Exit codes:
  {EXIT_OK}  the runs match step for step and end the same way
  {EXIT_DIFFERENT}  the runs differ (a step's call, input, output or error; a step
     missing on one side; or how the run ended)
  {EXIT_BAD_INPUT}  bad input: an unreadable source, an unknown run, a bad option
"""


@click.command("diff", epilog=_EPILOG)
@click.argument("source")
@click.argument("run_a", metavar="RUN_A")
@click.argument("run_b", metavar="RUN_B")
@click.option(
    "--source-b",
    metavar="SOURCE",
    help="Where RUN_B lives when not in SOURCE: a trace file or directory, a Postgres DSN, a Jaeger or Tempo URL.",
)
@click.option(
    "--ignore",
    "ignore_paths",
    multiple=True,
    metavar="JSONPATH",
    help="Leave this JSON path out of every input and output compared (e.g. 'messages[*].timestamp'); repeatable.",
)
@click.option(
    "--compare-volatile",
    is_flag=True,
    help="Compare what differs on every run too: clock, random and uuid outputs, model responses' HTTP headers "
    "and message ids.",
)
@click.option("--side-by-side", is_flag=True, help="Show the first differing step's payloads in two columns.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
@prices_option
def diff_command(  # noqa: PLR0913 -- click passes one keyword argument per option
    *,
    source: str,
    run_a: str,
    run_b: str,
    source_b: str | None,
    ignore_paths: tuple[str, ...],
    compare_volatile: bool,
    side_by_side: bool,
    as_json: bool,
    prices_file: str | None,
) -> None:
    """Compare run RUN_A with run RUN_B: steps are paired by call id, the first that
    differs is shown as a JSON diff, then how many differ, the token and cost deltas
    and how each run ended.

    Payloads are compared as recorded (masked); timing and token counts are not
    compared.
    """
    log_a = load(source, run_a)
    log_b = load(source_b if source_b is not None else source, run_b)
    result = diff_runs(
        log_a, log_b, ignore_paths=ignore_paths, compare_volatile=compare_volatile, prices=price_table(prices_file)
    )
    if as_json:
        print_json(result.to_dict())
    else:
        _print(console(), result, side_by_side=side_by_side)
    raise click.exceptions.Exit(EXIT_OK if result.same else EXIT_DIFFERENT)


def _print_steps(out: Console, result: RunDiff) -> None:
    """How many steps differ, and the first few of them."""
    if not result.steps:
        out.print(Text.assemble(("steps: ", "bold"), f"all {result.matched} match"))
        return
    counts = result.counts()
    listed = ", ".join(f"{_COUNT_NAMES[name]} {n}" for name, n in counts.items() if n)
    total = result.matched + len(result.steps)
    out.print(Text.assemble(("differing steps: ", "bold"), f"{len(result.steps)} of {total} ({listed})"))
    for step in result.steps[:_LISTED]:
        out.print(f"  {step.describe()}", markup=False)
    if len(result.steps) > _LISTED:
        out.print(f"  ... and {len(result.steps) - _LISTED} more (--json lists them all)", markup=False)


def _print(out: Console, result: RunDiff, *, side_by_side: bool) -> None:
    for name, log in (("A", result.a), ("B", result.b)):
        run = log.run
        out.print(Text.assemble((f"run {name}  ", "bold"), run.run_id, f"  ({run.agent or 'agent'}, {len(log)} steps)"))
    first = result.first
    if first is not None:
        out.print(Text.assemble(("first difference: ", "bold red"), first.describe()))
        for part in _shown_parts(first):
            if side_by_side:
                out.print(_side_by_side(first, part))
            else:
                _print_unified(out, first, part)
    _print_steps(out, result)
    if result.cost_a.model_calls or result.cost_b.model_calls:
        out.print(Text.assemble(("tokens: ", "bold"), _tokens(result.cost_a, result.cost_b)))
        out.print(Text.assemble(("USD: ", "bold"), _usd(result.cost_a, result.cost_b)))
    else:
        out.print(Text.assemble(("tokens: ", "bold"), "no model calls in either run"))
    style = "" if result.same_outcome else "red"
    out.print(Text.assemble(("outcome: ", "bold"), (f"A {result.outcome_a}; B {result.outcome_b}", style)))
    left_out = _left_out(result)
    if left_out:
        out.print(
            Text.assemble(
                ("note: ", "bold"),
                f"not compared: {left_out}, which differ on every run (--compare-volatile compares them).",
            )
        )
    if result.masking_differs:
        out.print(
            Text.assemble(
                ("note: ", "bold yellow"),
                "the runs were masked differently (another mask key, or masking off in one), so masked values "
                "differ even where the originals were the same.",
            )
        )
    if result.same:
        out.print(Text.assemble(("same: ", "bold green"), "the runs match step for step and end the same way."))
    elif not result.steps:
        out.print(Text.assemble(("different: ", "bold red"), "every step matches, but the runs end differently."))
    else:
        out.print(Text.assemble(("different: ", "bold red"), f"{len(result.steps)} step(s) differ."))


def _left_out(result: RunDiff) -> str:
    """What the comparison left out that the runs hold, in words; empty when nothing."""
    kinds = {event.kind for event in (*result.a, *result.b)}
    said = [f"{kind} outputs" for kind in result.uncompared_kinds if kind in kinds]
    if result.left_out and "model" in kinds:
        said.append("model responses' HTTP headers and message ids")
    return ", ".join(said)


def _shown_parts(step: StepDiff) -> tuple[Part, ...]:
    # A missing step is shown whole; a call that changed kind or key shows its input too.
    if step.parts == ("call",):
        return ("call", "input")
    return step.parts


def _print_unified(out: Console, step: StepDiff, part: Part) -> None:
    out.print(Text(f"  {_title(step, part)} (- run A, + run B):", style="bold"))
    for line in step.unified(part).splitlines():
        style = "red" if line.startswith("-") else "green" if line.startswith("+") else ""
        out.print(Text("  " + line, style=style))


def _title(step: StepDiff, part: Part) -> str:
    return "the step" if part == "missing" else part


def _side_by_side(step: StepDiff, part: Part) -> Table:
    table = Table(title=f"{_title(step, part)}", title_justify="left", show_edge=False, header_style="bold")
    table.add_column("run A", overflow="fold", ratio=1)
    table.add_column("run B", overflow="fold", ratio=1)
    a_lines = json_lines(step.payload(part, "a")) if step.a is not None else ["(missing)"]
    b_lines = json_lines(step.payload(part, "b")) if step.b is not None else ["(missing)"]
    for shown, (left, right, changed) in enumerate(_aligned(a_lines, b_lines)):
        if shown == MAX_DIFF_LINES:
            table.add_row("...", "...")
            break
        table.add_row(Text(left, style="red" if changed else ""), Text(right, style="green" if changed else ""))
    return table


def _aligned(a: list[str], b: list[str]) -> Iterator[tuple[str, str, bool]]:
    """Rows of two columns: equal lines side by side, changed runs of lines paired up and padded."""
    for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            yield from ((a[i], b[j], False) for i, j in zip(range(a1, a2), range(b1, b2), strict=True))
            continue
        left, right = a[a1:a2], b[b1:b2]
        for i in range(max(len(left), len(right))):
            yield (left[i] if i < len(left) else "", right[i] if i < len(right) else "", True)


def _delta(number: float, text: str) -> str:
    return "no change" if number == 0 else ("+" if number > 0 else "-") + text


def _tokens(a: RunCost, b: RunCost) -> str:
    change = b.tokens - a.tokens
    return f"A {a.tokens:,}  B {b.tokens:,}  ({_delta(change, f'{abs(change):,}')})"


def _usd(a: RunCost, b: RunCost) -> str:
    change = b.usd - a.usd
    unknown = "; * some calls have no price or usage" if not (a.complete and b.complete) else ""
    return (
        f"A {format_usd(a.usd, incomplete=not a.complete)}  B {format_usd(b.usd, incomplete=not b.complete)}  "
        f"({_delta(change, format_usd(abs(change)))}){unknown}"
    )

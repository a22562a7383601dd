"""``spanreplay lint PATH...``: the direct clock, random and network calls that make a replay diverge."""

from __future__ import annotations

import click

from spanreplay.lint import RULES, lint_paths

from ._common import print_json

_EXIT_FOUND = 1


def _rule_table() -> str:
    return "\n".join(f"  {rule.code}  {rule.summary}" for rule in RULES.values())


def _split(values: tuple[str, ...]) -> list[str]:
    return [code.strip().upper() for value in values for code in value.split(",") if code.strip()]


@click.command(
    "lint",
    epilog="\b\nRules:\n" + _rule_table() + "\n\nSilence one line with # noqa: SR101; configure under "
    "[tool.spanreplay.lint] in pyproject.toml (select, ignore, exclude, per-file-ignores).",
)
@click.argument("paths", nargs=-1, required=True, type=click.Path(), metavar="PATH...")
@click.option("--fix", is_flag=True, help="Rewrite the calls that have a one-to-one spanreplay replacement.")
@click.option("--select", "select", multiple=True, metavar="RULES", help="Report only these rule ids or prefixes.")
@click.option("--ignore", "ignore", multiple=True, metavar="RULES", help="Never report these rule ids or prefixes.")
@click.option("--json", "as_json", is_flag=True, help="Print the findings as JSON.")
def lint_command(
    *, paths: tuple[str, ...], fix: bool, select: tuple[str, ...], ignore: tuple[str, ...], as_json: bool
) -> None:
    """Find direct calls that make a replay diverge: clock, random, uuid, network.

    Reads the code without importing it and prints one line per call that
    spanreplay does not record (path:line:col: SR101 message). Calls inside a
    @spanreplay.tool function or a spanreplay.boundary() are recorded, so they
    are fine. Exit 0 when nothing is found, 1 when something is, 2 on bad input.

    \b
    spanreplay lint src/                 report
    spanreplay lint src/ --fix           rewrite time.time() -> spanreplay.time() and the like
    spanreplay lint src/ --select SR1    clock rules only
    """
    result = lint_paths(paths, select=_split(select) or None, ignore=_split(ignore), fix=fix)
    if as_json:
        print_json(
            [
                {
                    "path": f.path,
                    "line": f.line,
                    "col": f.col,
                    "code": f.code,
                    "message": f.message,
                    "fixable": f.edit is not None,
                }
                for f in result.findings
            ]
        )
    else:
        for finding in result.findings:
            click.echo(str(finding))
        click.echo(_summary(result.files, len(result.findings), result.fixable, result.fixed), err=True)
    if result.findings:
        raise click.exceptions.Exit(_EXIT_FOUND)


def _summary(files: int, found: int, fixable: int, fixed: int) -> str:
    parts = [f"{files} file{'s' if files != 1 else ''} checked"]
    if fixed:
        parts.append(f"{fixed} call{'s' if fixed != 1 else ''} rewritten")
    parts.append(f"{found} finding{'s' if found != 1 else ''}" if found else "no findings")
    if fixable and not fixed:
        parts.append(f"{fixable} fixable with --fix")
    return ", ".join(parts) + "."

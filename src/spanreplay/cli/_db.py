"""``spanreplay db upgrade|status|partitions DSN``: the Postgres schema and its day partitions."""

from __future__ import annotations

import click

from ._common import CliState, console, require_postgres_dsn

_AHEAD_HELP = "Make the partitions of yesterday to this many days ahead (UTC days)."


@click.group("db")
def db_command() -> None:
    """Create and migrate the Postgres tables that runs are kept in (agent_runs, agent_steps)."""


@db_command.command("upgrade")
@click.argument("dsn")
@click.option("--sql", "show_sql", is_flag=True, help="Print the SQL of every migration instead of applying any.")
@click.option(
    "--dry-run", is_flag=True, help="Print what the upgrade would do to DSN (rows moved, partitions); change nothing."
)
@click.option("--ahead", type=click.IntRange(0, 366), default=None, metavar="DAYS", help=_AHEAD_HELP + "  [default: 7]")
@click.pass_obj
def upgrade_command(state: CliState, dsn: str, *, show_sql: bool, dry_run: bool, ahead: int | None) -> None:
    """Apply the migrations DSN lacks (safe to run again, and from several hosts at once),
    then make the day partitions of yesterday to --ahead days ahead.

    The tables go in the first schema of the connection's search_path; pick
    another with postgresql://.../db?options=-csearch_path%3Dagents.
    """
    from spanreplay.sources.postgres.connect import describe
    from spanreplay.sources.postgres.schema import AHEAD_DAYS, MIGRATIONS, plan, upgrade

    out = console()
    if show_sql:
        for migration in MIGRATIONS:
            out.print(f"-- migration {migration.version}: {migration.name}", markup=False)
            out.print(migration.sql.strip(), markup=False, highlight=False)
        return
    require_postgres_dsn(dsn)
    where = describe(dsn)
    today = state.clock().date()
    days = AHEAD_DAYS if ahead is None else ahead
    if dry_run:
        for line in plan(dsn):
            out.print(line, markup=False)
        out.print(f"would make the missing partitions of {today:%Y-%m-%d} - 1 day to + {days} days", markup=False)
        out.print(f"Dry run: {where} was not changed.", markup=False)
        return
    applied = upgrade(dsn, today=today, ahead=days)
    for migration in applied:
        out.print(f"applied migration {migration.version}: {migration.name}", markup=False)
    latest = MIGRATIONS[-1].version
    if applied:
        out.print(f"{where} is at schema version {latest}.", markup=False)
    else:
        out.print(f"{where} is already at schema version {latest}; nothing to do.", markup=False)


@db_command.command("status")
@click.argument("dsn")
def status_command(dsn: str) -> None:
    """Print the schema version of DSN and whether it needs `spanreplay db upgrade`."""
    from spanreplay.sources.postgres.connect import describe
    from spanreplay.sources.postgres.schema import LATEST, missing_schema_message, version

    require_postgres_dsn(dsn)
    found = version(dsn)
    out = console()
    if found >= LATEST:
        out.print(f"{describe(dsn)} is at schema version {found}; up to date.", markup=False)
        return
    out.print(missing_schema_message(dsn, found), markup=False)
    raise click.exceptions.Exit(1)


@db_command.command("partitions")
@click.argument("dsn")
@click.option("--ahead", type=click.IntRange(0, 366), default=7, show_default=True, metavar="DAYS", help=_AHEAD_HELP)
@click.pass_obj
def partitions_command(state: CliState, dsn: str, *, ahead: int) -> None:
    """Make the day partitions of the coming days in DSN, and list the days it has.

    Rows of a day without a partition wait in the default partition and move
    into the day's partition when it is made. Run it daily (the Postgres writer
    also makes them when it starts and twice a day).
    """
    from spanreplay.sources.postgres.connect import describe
    from spanreplay.sources.postgres.partitions import ahead_range, listing, make

    require_postgres_dsn(dsn)
    first, last = ahead_range(state.clock().date(), ahead)
    made = make(dsn, first, last)
    days, waiting = listing(dsn)
    out = console()
    out.print(f"made {made // 2} day partition(s) from {first:%Y-%m-%d} to {last:%Y-%m-%d}", markup=False)
    shown = f"{days[0]:%Y-%m-%d} to {days[-1]:%Y-%m-%d}" if days else "none"
    out.print(f"{describe(dsn)} has the partitions of {len(days)} day(s): {shown}", markup=False)
    if waiting[0] or waiting[1]:
        out.print(
            f"{waiting[0]} run(s) and {waiting[1]} step(s) wait in the default partitions (a day with no partition); "
            "they move when their day's partition is made, and prune deletes them when they expire",
            markup=False,
        )

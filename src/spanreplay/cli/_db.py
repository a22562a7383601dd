"""``spanreplay db upgrade DSN`` and ``spanreplay db status DSN``: the Postgres schema."""

from __future__ import annotations

import click

from ._common import console, require_postgres_dsn


@click.group("db")
def db_command() -> None:
    """Create and migrate the Postgres tables that runs are kept in (agent_runs, agent_steps)."""


@db_command.command("upgrade")
@click.argument("dsn")
@click.option("--sql", "show_sql", is_flag=True, help="Print the SQL of every migration instead of applying any.")
def upgrade_command(dsn: str, *, show_sql: bool) -> None:
    """Apply the migrations DSN lacks (safe to run again, and from several hosts at once).

    The tables go in the first schema of the connection's search_path; pick
    another with postgresql://.../db?options=-csearch_path%3Dagents.
    """
    from spanreplay.sources.postgres.connect import describe
    from spanreplay.sources.postgres.schema import MIGRATIONS, upgrade

    out = console()
    if show_sql:
        for migration in MIGRATIONS:
            out.print(f"-- migration {migration.version}: {migration.name}", markup=False)
            out.print(migration.sql.strip(), markup=False, highlight=False)
        return
    require_postgres_dsn(dsn)
    applied = upgrade(dsn)
    where = describe(dsn)
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

"""``spanreplay export SOURCE DSN``: import trace files into Postgres, idempotently."""

from __future__ import annotations

import click

from ._common import console, require_postgres_dsn


@click.command("export")
@click.argument("source")
@click.argument("dsn")
@click.option("--batch-size", default=500, show_default=True, type=click.IntRange(1, 100_000),
              help="Rows committed together.")  # fmt: skip
def export_command(source: str, dsn: str, batch_size: int) -> None:
    """Import the runs of SOURCE into the Postgres database at DSN.

    SOURCE is anything `spanreplay runs` reads: the durable files under
    ./traces, the Collector's file exporter output, Jaeger or Tempo JSON.
    Running it again adds nothing twice: steps already in agent_steps are left
    as they are, so it also fills in the steps a live exporter could not write
    while the database was down.
    """
    require_postgres_dsn(dsn)
    from spanreplay.recording.postgres.backfill import export
    from spanreplay.sources.postgres.connect import describe

    result = export(source, dsn, batch_size=batch_size)
    console().print(
        f"exported {len(result.runs)} run(s) from {source} to {describe(dsn)}: {result.steps_added} step(s) "
        f"added, {result.steps_present} already there.",
        markup=False,
    )

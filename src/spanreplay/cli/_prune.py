"""``spanreplay prune SOURCE``: delete runs past their retention, in Postgres or a trace directory.

A run's age comes from its id (``run_YYYYMMDD_HHMMSS_xxxxxxxx``, UTC), or from
its start time when the id carries no date. Successful runs are kept
``--success`` long, failed ones (error or crashed) ``--failure`` long: a failure
is what someone comes back to replay.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

import click

from .. import _semconv as sc
from .._loader import runs as read_runs
from ..errors import TraceFormatError
from ..readers import expand
from ._common import BadInput, console, warn

_DURATION: Final = re.compile(r"^\s*(\d{1,6})\s*([smhdw])\s*$")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_RUN_DATE: Final = re.compile(r"^run_(\d{8}_\d{6})_")
_LONGEST: Final = timedelta(days=365_250)


def parse_duration(text: str, option: str) -> timedelta:
    """``7d`` -> 7 days. Units: s, m, h, d, w."""
    match = _DURATION.match(text)
    if not match:
        raise BadInput(f"{option} {text!r} is not a duration; write a whole number and a unit: 30m, 12h, 7d or 2w.")
    delta = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    if delta > _LONGEST:
        raise BadInput(f"{option} {text!r} reaches back before any date a run can have; keep runs at most 1000 years.")
    return delta


def run_date(run_id: str) -> datetime | None:
    """The UTC start a default run id carries (``run_20261129_021503_a1b2c3d4``), or None."""
    match = _RUN_DATE.match(run_id)
    if not match:
        return None
    try:
        return datetime.strptime(match.group(1), "%Y%m%d_%H%M%S").replace(tzinfo=UTC)
    except ValueError:  # run_99999999_...: shaped like a date, but not one
        return None


@dataclass(frozen=True)
class Policy:
    success: timedelta
    failure: timedelta
    now: datetime

    def window(self, status: str) -> timedelta:
        # Crashed and still-running-forever runs count as failed: they are what gets replayed.
        return self.success if status == sc.RUN_STATUS_OK else self.failure

    def expired(self, status: str, when: datetime | None) -> bool:
        return when is not None and when < self.now - self.window(status)

    @property
    def oldest_kept(self) -> datetime:
        """Anything newer than this is kept whatever its status."""
        return self.now - min(self.success, self.failure)


@dataclass(frozen=True)
class _Removal:
    run_id: str
    status: str
    when: datetime
    where: str


@click.command("prune")
@click.argument("source")
@click.option("--success", "success", default="7d", show_default=True, metavar="AGE",
              help="Keep successful runs this long (30m, 12h, 7d, 2w).")  # fmt: skip
@click.option("--failure", "failure", default="90d", show_default=True, metavar="AGE",
              help="Keep failed and crashed runs this long.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Print what would be removed; remove nothing.")
def prune_command(source: str, success: str, failure: str, dry_run: bool) -> None:
    """Remove runs older than their retention from SOURCE, printing each one.

    SOURCE is a Postgres DSN (postgresql://...: the run and its steps are
    deleted) or a trace directory (a run's file is deleted; a file holding
    several runs goes only when all of them are past retention). A run's age
    comes from its id, run_YYYYMMDD_HHMMSS_xxxxxxxx (UTC), or its start time.
    """
    policy = Policy(parse_duration(success, "--success"), parse_duration(failure, "--failure"), datetime.now(UTC))
    if source.startswith(("postgresql://", "postgres://")):
        removals, kept = _prune_postgres(source, policy, dry_run)
    else:
        removals, kept = _prune_files(source, policy, dry_run)
    out = console()
    verb = "would remove" if dry_run else "removed"
    for r in removals:
        out.print(f"{verb} {r.run_id}  {r.status:<7}  {r.when:%Y-%m-%d %H:%M}  {r.where}", markup=False)
    failed = sum(1 for r in removals if r.status != sc.RUN_STATUS_OK)
    out.print(
        f"{verb.capitalize()} {len(removals)} run(s) ({len(removals) - failed} ok older than {success}, "
        f"{failed} failed or crashed older than {failure}); kept {kept}.",
        markup=False,
    )


def _prune_postgres(dsn: str, policy: Policy, dry_run: bool) -> tuple[list[_Removal], int]:
    from ..postgres import retention

    oldest = policy.oldest_kept
    found = retention.candidates(dsn, older_id=f"run_{oldest:%Y%m%d_%H%M%S}", older_than=oldest)
    removals = []
    for run in found:
        when = run_date(run.run_id) or run.started
        if policy.expired(run.status, when):
            assert when is not None
            removals.append(_Removal(run.run_id, run.status, when, f"{run.steps} steps"))
    total = retention.count(dsn)
    if not dry_run:
        retention.delete(dsn, [r.run_id for r in removals])
    return removals, total - len(removals)


def _prune_files(source: str, policy: Policy, dry_run: bool) -> tuple[list[_Removal], int]:
    if not Path(source).is_dir():
        raise BadInput(
            f"{source} is not a directory or a Postgres DSN; prune removes whole run files from a trace "
            "directory (./traces) or runs from postgresql://..."
        )
    removals: list[_Removal] = []
    kept = 0
    if not any(p.is_file() for p in Path(source).rglob("*")):
        return removals, kept
    for name in expand(source):
        stem = Path(name).name.split(".", 1)[0]
        named_date = run_date(stem)
        if named_date is not None and named_date >= policy.oldest_kept:
            kept += 1  # a run file too young for any window: not even opened
            continue
        try:
            found = read_runs(name)
        except TraceFormatError as exc:
            warn(f"kept {name}: {exc}")
            continue
        if not found:
            continue  # not a spanreplay trace file: never ours to delete
        file_removals = []
        for run in found:
            when = run_date(run.run_id) or run.started
            if policy.expired(run.status, when):
                assert when is not None
                file_removals.append(_Removal(run.run_id, run.status, when, name))
        if len(file_removals) < len(found):
            kept += len(found)
            continue
        removals.extend(file_removals)
        if not dry_run:
            os.remove(name)
    return removals, kept

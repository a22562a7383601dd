"""``spanreplay prune SOURCE``: delete runs past their retention, in Postgres or a trace directory.

A run's age comes from its id (``run_YYYYMMDD_HHMMSS_xxxxxxxx``, UTC), or from
its start time when the id carries no date. Successful runs are kept
``--success`` long, failed ones (error or crashed) ``--failure`` long: a failure
is what someone comes back to replay.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Final

import click

from spanreplay import semconv as sc
from spanreplay.api.loading import runs as read_runs
from spanreplay.errors import TraceFormatError, UnsafeTraceValueError
from spanreplay.model.run_ids import checked_run_id, path_inside
from spanreplay.readers import Damage, SpanReplayWarning, expand, listed_damage, read_file
from spanreplay.readers._sources import GZIP_MAGIC
from spanreplay.readers._zstd import MAGIC as ZSTD_MAGIC
from spanreplay.run.salts import SALT_DIR, salt_path
from spanreplay.sources import RUN_MARKER, is_postgres_dsn

from ._common import BadInput, CliState, console, printable, warn
from ._prune_rewrite import CannotRewrite, SpanFilter, replace_file, unchanged_since

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
@click.option("--older-than", "older_than", default=None, metavar="AGE",
              help="Keep every run this long, whatever its status (sets --success and --failure).")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Print what would be deleted or rewritten; change nothing.")
@click.pass_obj
def prune_command(
    state: CliState, *, source: str, success: str, failure: str, older_than: str | None, dry_run: bool
) -> None:
    """Remove runs older than their retention from SOURCE, printing each one.

    SOURCE is a Postgres DSN (postgresql://...: the run and its steps are
    deleted) or a trace directory. There a run's own file is deleted; a file
    that also holds other runs or other services' spans (a Collector export)
    is rewritten without the expired runs' spans, whole or not at all, or,
    when it cannot be (compressed, not OTLP/JSON lines), left with a warning
    saying why. Files without spanreplay runs are never touched. A run's age
    comes from its id, run_YYYYMMDD_HHMMSS_xxxxxxxx (UTC), or its start time.
    In Postgres, the days older than both windows go whole: their partitions
    are dropped (one line per day); the runs of younger days row by row.
    """
    if older_than is not None:
        success = failure = older_than
    policy = Policy(parse_duration(success, "--success"), parse_duration(failure, "--failure"), state.clock())
    files: _FilesPruned | None = None
    days = _DaysPruned()
    if is_postgres_dsn(source):
        removals, kept, days = _prune_postgres(source, policy, dry_run=dry_run)
    else:
        files = _prune_files(source, policy, dry_run=dry_run)
        removals, kept = files.removals, files.kept
    out = console()
    verb = "would remove" if dry_run else "removed"
    for r in removals:
        out.print(f"{verb} {r.run_id}  {r.status:<7}  {r.when:%Y-%m-%d %H:%M}  {printable(r.where)}", markup=False)
    for note in (*days.notes, *(files.notes if files is not None else ())):
        out.print(note, markup=False)
    # A run spread over several files (a Collector's rotated backups) is counted once, and
    # only once it is gone: a file that was kept still holding it keeps it (and its salt).
    gone = files.gone if files is not None else {r.run_id for r in removals}
    statuses = {r.run_id: r.status for r in removals if r.run_id in gone}
    failed = sum(1 for status in statuses.values() if status != sc.RUN_STATUS_OK) + days.failed
    total = len(statuses) + days.runs
    if older_than is not None:
        windows = f"{total - failed} ok, {failed} failed or crashed, older than {older_than}"
    else:
        windows = f"{total - failed} ok older than {success}, {failed} failed or crashed older than {failure}"
    out.print(f"{verb.capitalize()} {total} run(s) ({windows}); kept {kept}.", markup=False)
    if files is not None and files.left:
        out.print(f"Left {files.left} file(s) holding expired runs as they were; the warnings say why.", markup=False)


@dataclass
class _DaysPruned:
    """The days whose partitions prune dropped whole: one line each, and their runs counted."""

    notes: list[str] = field(default_factory=list)
    runs: int = 0
    failed: int = 0


def _prune_postgres(dsn: str, policy: Policy, *, dry_run: bool) -> tuple[list[_Removal], int, _DaysPruned]:
    from spanreplay.recording.postgres import retention

    # A day whose every run is past both windows, whatever its status, goes whole: its
    # partitions are dropped. A run sits in its start day's partition with all its steps.
    whole_before = (policy.now - max(policy.success, policy.failure)).date()
    whole = retention.whole_days(dsn, whole_before)
    days = _DaysPruned()
    verb = "would drop" if dry_run else "dropped"
    for day in whole:
        days.notes.append(
            f"{verb} the partitions of {day.day:%Y-%m-%d}: {day.runs} run(s) "
            f"({day.ok_runs} ok, {day.runs - day.ok_runs} failed or crashed), {day.steps} step(s)"
        )
        days.runs += day.runs
        days.failed += day.runs - day.ok_runs
    dropped = {day.day for day in whole}
    oldest = policy.oldest_kept
    found = retention.candidates(dsn, older_id=f"run_{oldest:%Y%m%d_%H%M%S}", older_than=oldest)
    removals = []
    for run in found:
        if run.day in dropped:
            continue  # goes with its day's partition
        when = run_date(run.run_id) or run.started
        if policy.expired(run.status, when):
            assert when is not None
            removals.append(_Removal(run.run_id, run.status, when, f"{run.steps} steps"))
    total = retention.count(dsn)
    if not dry_run:
        retention.drop_days(dsn, sorted(dropped))
        day_of = {run.run_id: run.day for run in found}
        retention.delete(dsn, [(r.run_id, day_of.get(r.run_id)) for r in removals])
    return removals, total - len(removals) - days.runs, days


@dataclass
class _FilesPruned:
    removals: list[_Removal] = field(default_factory=list)
    # What happened to each file that held an expired run: deleted, rewritten or left.
    notes: list[str] = field(default_factory=list)
    left: int = 0
    seen: set[str] = field(default_factory=set)
    # The runs whose spans were cut from some file, and those some file that stays still
    # holds (not expired there, or left as it was): expiry is per file, a run's salt per run.
    removed: set[str] = field(default_factory=set)
    kept_runs: set[str] = field(default_factory=set)
    # The directories each expired run's spans were found in (its salt file is kept there).
    places: dict[str, set[Path]] = field(default_factory=dict)

    @property
    def gone(self) -> set[str]:
        """The runs no file holds any more: only these are counted removed and lose their salt."""
        return self.removed - self.kept_runs

    @property
    def kept(self) -> int:
        return len(self.seen - self.gone)


def _prune_files(source: str, policy: Policy, *, dry_run: bool) -> _FilesPruned:
    if not Path(source).is_dir():
        raise BadInput(
            f"{source} is not a directory or a Postgres DSN; prune removes whole run files from a trace "
            "directory (./traces) or runs from postgresql://..."
        )
    pruned = _FilesPruned()
    # Hidden files (the runs' salts) are no trace files: a directory of nothing else is empty.
    if not any(p.is_file() and not _hidden(p, source) for p in Path(source).rglob("*")):
        _prune_orphan_salts(source, policy, pruned, dry_run=dry_run)
        return pruned
    for name in expand(source):
        _prune_one_file(name, policy, pruned, dry_run=dry_run)
    _prune_salts(pruned, dry_run=dry_run)
    _prune_orphan_salts(source, policy, pruned, dry_run=dry_run)
    return pruned


def _prune_one_file(name: str, policy: Policy, pruned: _FilesPruned, *, dry_run: bool) -> None:
    """Prune the expired runs of one trace file, noting in ``pruned`` what it held and what became of it."""
    stem = Path(name).name.split(".", 1)[0]
    named_date = run_date(stem)
    if named_date is not None and named_date >= policy.oldest_kept:
        pruned.seen.add(stem)  # a run file too young for any window: not even opened
        pruned.kept_runs.add(stem)
        return
    try:
        # A trace another instrumentation wrote reads as a run named by its trace id: it is
        # not spanreplay's, so prune never counts it, rewrites it or deletes it.
        found = [run for run in read_runs(name) if run.run_id != run.trace_id]
    except TraceFormatError as exc:
        warn(f"kept {name}: {exc}")
        return
    if not found:
        return  # no spanreplay run in it: never ours to touch
    pruned.seen.update(run.run_id for run in found)
    try:
        # A run id read from the file names its salt: one that could lead out of the
        # trace dir (/abs/path, ../../x) leaves the whole file as it is.
        for run in found:
            checked_run_id(run.run_id, where=f"the trace file {name}")
    except UnsafeTraceValueError as exc:
        warn(f"kept {name}: {exc}")
        pruned.kept_runs.update(run.run_id for run in found)
        return
    expired: dict[str, _Removal] = {}
    for run in found:
        when = run_date(run.run_id) or run.started
        if policy.expired(run.status, when):
            assert when is not None
            expired[run.run_id] = _Removal(run.run_id, run.status, when, name)
        else:
            # Kept in this file whatever happens to it (rewritten without the others, or
            # left), even when another file holds an expired-looking copy of the same run.
            pruned.kept_runs.add(run.run_id)
    if expired and _damaged(name, expired, pruned):
        return
    if expired:
        for run_id in expired:
            pruned.places.setdefault(run_id, set()).add(Path(name).parent)
        _prune_file(name, stem, expired, pruned, dry_run=dry_run)


def _damaged(name: str, expired: dict[str, _Removal], pruned: _FilesPruned) -> bool:
    """Keep a file with damaged lines: what they held cannot be told, so it is never deleted or rewritten."""
    damage: list[Damage] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpanReplayWarning)  # the listing showed them
        try:
            for _ in read_file(name, explicit=False, damaged=damage.append):
                pass
        except TraceFormatError as exc:
            _leave(name, expired, str(exc).rstrip("."), pruned)
            return True
    if damage:
        _leave(name, expired, f"it has damaged lines ({listed_damage(damage)}), which prune never deletes", pruned)
    return bool(damage)


def _hidden(path: Path, source: str) -> bool:
    return any(part.startswith(".") for part in path.relative_to(source).parts)


def _prune_orphan_salts(source: str, policy: Policy, pruned: _FilesPruned, *, dry_run: bool) -> None:
    """Remove the salts of runs no file here holds any more (their trace file was deleted by
    hand), once the run is past both windows: the salt checks nothing without the run."""
    oldest = policy.now - max(policy.success, policy.failure)
    for path in sorted(Path(source).rglob(f"{SALT_DIR}/*.salt")):
        run_id = path.name.removesuffix(".salt")
        when = run_date(run_id)
        if run_id in pruned.seen or when is None or when >= oldest:
            continue
        try:
            path = path_inside(source, str(path.relative_to(source)))  # not through a link out of it
        except UnsafeTraceValueError as exc:
            warn(f"kept {path}, the salt of run {run_id} whose trace is gone: {exc}")
            continue
        if not dry_run:
            try:
                path.unlink()
            except OSError as exc:
                warn(f"kept {path}, the salt of run {run_id} whose trace is gone: {exc.strerror}.")
                continue
        verb = "would delete" if dry_run else "deleted"
        pruned.notes.append(f"{verb} the salt of run {run_id} ({path}), whose trace is gone")


def _prune_salts(pruned: _FilesPruned, *, dry_run: bool) -> None:
    """Remove the salt file of each run removed whole: it checks nothing once the run is gone.

    A run cut from one file but still held by a file that stays keeps its salt, whatever
    times the removed copy held (a stale Collector copy, or one planted with old times).
    """
    for run_id in sorted(pruned.removed & pruned.kept_runs):
        pruned.notes.append(f"kept run {run_id} and its salt: a file that stays still holds the run")
    for run_id in sorted(pruned.gone):
        for directory in sorted(pruned.places.get(run_id, ())):
            try:
                path = salt_path(directory, run_id, where=f"a trace file in {directory}")
            except UnsafeTraceValueError as exc:  # already refused when its file was read; kept safe here too
                warn(f"kept the salt of removed run {run_id!r} in {directory}: {exc}")
                continue
            if not path.is_file():
                continue
            if not dry_run:
                try:
                    path.unlink()
                except OSError as exc:
                    warn(f"kept {path}, the salt of removed run {run_id}: {exc.strerror}.")
                    continue
            pruned.notes.append(f"{'would delete' if dry_run else 'deleted'} the salt of run {run_id} ({path})")


def _prune_file(name: str, stem: str, expired: dict[str, _Removal], pruned: _FilesPruned, *, dry_run: bool) -> None:
    """Delete the file when it holds nothing but expired runs' spans, else rewrite it without them.

    The file is only ever replaced whole (a temporary file beside it, then a rename), so a
    reader sees it as it was or as it is after, and other services' spans in a shared
    export stay byte for byte. A file that cannot be rewritten is left as it is.
    """
    own = stem if stem in expired else None  # a per-run file, as the durable exporter names it
    temp: IO[bytes] | None = None
    try:
        before = os.stat(name)
        with open(name, "rb") as stream:
            if stream.read(4).startswith((GZIP_MAGIC, ZSTD_MAGIC)):
                raise CannotRewrite("it is compressed, and prune rewrites only uncompressed OTLP/JSON lines")
            stream.seek(0)
            if not dry_run:
                temp = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed or removed below
                    "wb", dir=os.path.dirname(name) or ".", prefix=f".{os.path.basename(name)}.", suffix=".prune",
                    delete=False,
                )  # fmt: skip
            rewrite = SpanFilter(set(expired), own)
            rewrite.filter(stream, temp.write if temp is not None else lambda _: 0)
        expected = _expired_spans(name, set(expired))
        if rewrite.dropped != expected:
            raise CannotRewrite(
                f"{expected} span(s) of the expired runs are in it, but {rewrite.dropped} were found in "
                "OTLP/JSON lines (is it one JSON document, or in Jaeger's format?)"
            )
        gone = [expired[run_id] for run_id in sorted(rewrite.found)]
        if not dry_run:
            try:
                if rewrite.kept:
                    assert temp is not None
                    replace_file(name, temp, before)
                else:
                    unchanged_since(name, before)
                    os.remove(name)
            except CannotRewrite as why:
                _leave(name, expired, str(why), pruned)
                return
        if not rewrite.kept:
            pruned.removals.extend(gone)
        else:
            pruned.removals.extend(replace(r, where=f"{r.where} (its spans cut out)") for r in gone)
            verb = "would rewrite" if dry_run else "rewrote"
            pruned.notes.append(
                f"{verb} {name} without {len(gone)} expired run(s); the other spans in it are kept as they were"
            )
        pruned.removed.update(rewrite.found)
    except CannotRewrite as why:
        _delete_or_leave(name, own, expired, str(why), pruned, dry_run=dry_run)
    except OSError as exc:
        _leave(name, expired, f"it cannot be rewritten ({exc.strerror})", pruned)
    finally:
        if temp is not None:
            temp.close()
            with contextlib.suppress(FileNotFoundError):
                os.remove(temp.name)


def _delete_or_leave(
    name: str, own: str | None, expired: dict[str, _Removal], why: str, pruned: _FilesPruned, *, dry_run: bool
) -> None:
    """A file prune cannot rewrite: deleted only when it is an expired run's own file holding nothing else."""
    try:
        others = _other_spans(name, {own}) if own is not None else None
    except TraceFormatError as exc:
        _leave(name, expired, str(exc), pruned)
        return
    if own is None or others:
        _leave(name, expired, why, pruned)
        return
    if not dry_run:
        os.remove(name)
    pruned.removals.append(expired[own])
    pruned.removed.add(own)


def _leave(name: str, expired: dict[str, _Removal], why: str, pruned: _FilesPruned) -> None:
    pruned.left += 1
    pruned.kept_runs.update(expired)
    runs = ", ".join(sorted(expired))
    warn(f"kept {name}, which holds expired run(s) {runs}: {why}.")


def _expired_spans(name: str, expired: set[str]) -> int:
    spans = read_file(name, contains=RUN_MARKER, explicit=False)
    return sum(1 for span in spans if span.attributes.get(sc.RUN_ID) in expired)


def _other_spans(name: str, runs: set[str | None]) -> int:
    return sum(1 for span in read_file(name, explicit=False) if span.attributes.get(sc.RUN_ID) not in runs)

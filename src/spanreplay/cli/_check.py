"""``spanreplay check SOURCE --entry M:F``: replay many recorded runs against the current code.

A deploy gate: every selected run is replayed in a process of its own (see
``_check_processes``), ``-j N`` at a time, and the command exits 1 when one diverged.
``--shard I/N`` keeps the runs of one of N CI runners (see ``_check_shards``).
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import click
from rich.text import Text

from spanreplay.model.events import RunSummary
from spanreplay.sources import open_source
from spanreplay.sources.kinds import SourceKind, source_kind

from ._check_processes import fresh_processes, replay_in_fresh_process
from ._check_run import COMPLETED, DIVERGED, ERROR, REPRODUCED, Verdict
from ._check_select import STATUSES, parse_since, select_runs
from ._check_shards import Shard, parse_shard, split_runs
from ._common import EXIT_BAD_INPUT, EXIT_OK, BadInput, CliState, console, print_json, printable
from ._junit import Case, write_junit_xml

__all__ = ["check_command"]

EXIT_DIVERGED_RUNS = 1

_EPILOG = f"""\b
Each run ends as one of:
  completed   a run recorded ok completed again, every step matched
  reproduced  a run recorded failed failed again with the recorded error at
              the recorded step (or reached the point where its process died)
  diverged    anything else, at the seq where the code stopped matching
  error       the run could not be replayed (unreadable, or --entry unusable)

\b
Exit codes:
  {EXIT_OK}  no run diverged (also when no run was selected)
  {EXIT_DIVERGED_RUNS}  at least one run diverged
  {EXIT_BAD_INPUT}  bad input: an unreadable source, a bad option, a run that could not
     be replayed (an --entry that cannot be imported, an unreadable run)
"""


@dataclass(frozen=True)
class Checked:
    """A run and its verdict, with what its replay printed."""

    run: RunSummary
    verdict: Verdict
    stdout: str = ""
    stderr: str = ""
    # Wall time, the replay's process started and ended included.
    seconds: float = 0.0


@click.command("check", epilog=_EPILOG)
@click.argument("source")
@click.option(
    "--entry",
    required=True,
    metavar="MODULE:FUNCTION",
    help="The agent code to replay every run against, called with no arguments (as in spanreplay replay).",
)
@click.option("--agent", "agents", multiple=True, metavar="NAME", help="Only the runs of this agent; repeatable.")
@click.option(
    "--since", metavar="AGE|DATE", help="Only the runs started since: an age (7d, 12h, 30m, 2w) or a date (UTC)."
)
@click.option(
    "--status",
    type=click.Choice(sorted(STATUSES)),
    default="all",
    show_default=True,
    help="Only the runs recorded ok, or failed (an error or a crash).",
)
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=1, show_default=True, help="Replay N runs at a time.")
@click.option(
    "--shard",
    "shard_text",
    metavar="I/N",
    help="Replay only shard I of N (1-based), split by a hash of the run id: each of N CI runners "
    "passes its own I, and every run is replayed by exactly one of them.",
)
@click.option(
    "--ignore",
    "ignore_paths",
    multiple=True,
    metavar="JSONPATH",
    help="Leave this JSON path out of the input comparison of every run; repeatable.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Count a replay that takes longer as diverged (its process is killed).",
)
@click.option(
    "--junit-xml",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Write one JUnit testcase per run; {shard} in FILE is replaced by the shard's I.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON, for scripts.")
@click.pass_obj
def check_command(  # noqa: PLR0913 -- click passes one keyword argument per option
    state: CliState,
    *,
    source: str,
    entry: str,
    agents: Sequence[str],
    since: str | None,
    status: str,
    jobs: int,
    shard_text: str | None,
    ignore_paths: Sequence[str],
    timeout: float | None,
    junit_xml: str | None,
    as_json: bool,
) -> None:
    """Replay the runs in SOURCE against the current code and say, per run, whether it
    still does what was recorded: the gate to run before a deploy.

    Each run is replayed in a fresh Python process, so no module state of the
    entry point carries over from one run to the next.
    """
    if source_kind(source) is SourceKind.STDIN:
        raise BadInput(
            "spanreplay check reads its source once per run, so it cannot read stdin; save the spans to a "
            "file (or a directory of files) and pass that."
        )
    module, sep, function = entry.partition(":")
    if not sep or not module or not function:
        raise BadInput(f"--entry {entry!r} is not module:function; write it as e.g. --entry mypkg.agent:main.")
    shard = parse_shard(shard_text) if shard_text is not None else None
    started_at = state.clock()
    cutoff = parse_since(since, started_at) if since is not None else None
    selection = select_runs(open_source(source).runs(), agents=agents, since=cutoff, status=status)
    runs, elsewhere = split_runs(selection.runs, shard) if shard is not None else (selection.runs, 0)
    started = time.perf_counter()
    checked: list[Checked] = []
    for done in _replay_all(source, runs, entry, ignore_paths, jobs, timeout):
        checked.append(done)
        if not as_json:
            _print_verdict(done)
    seconds = time.perf_counter() - started
    totals = dict.fromkeys((COMPLETED, REPRODUCED, DIVERGED, ERROR), 0)
    for done in checked:
        totals[done.verdict.outcome] += 1
    if junit_xml is not None:
        suite = f"spanreplay check {source}" + (f" (shard {shard})" if shard is not None else "")
        cases = [_case(done) for done in checked]
        write_junit_xml(_junit_path(junit_xml, shard), suite, cases, timestamp=started_at, seconds=seconds)
    if as_json:
        print_json(
            {
                "source": source,
                "entry": entry,
                "shard": None
                if shard is None
                else {"index": shard.index, "count": shard.count, "runs": len(runs), "other_shards": elsewhere},
                "runs": [
                    {**done.verdict.to_dict(), "agent": done.run.agent, "recorded_status": done.run.status}
                    for done in checked
                ],
                "totals": totals,
                "seconds": round(seconds, 3),
            }
        )
    else:
        _print_totals(checked, totals, seconds, _shard_note(shard, len(runs), elsewhere), selection.left_out())
    if totals[ERROR]:
        raise click.exceptions.Exit(EXIT_BAD_INPUT)
    raise click.exceptions.Exit(EXIT_DIVERGED_RUNS if totals[DIVERGED] else EXIT_OK)


def _replay_all(
    source: str,
    runs: Sequence[RunSummary],
    entry: str,
    ignore_paths: Sequence[str],
    jobs: int,
    timeout: float | None,
) -> Iterator[Checked]:
    """Each run's verdict, in the order of ``runs``, replayed ``jobs`` at a time."""
    if not runs:
        return
    with tempfile.TemporaryDirectory(prefix="spanreplay-check-") as scratch, fresh_processes():

        def one(item: tuple[int, RunSummary]) -> Checked:
            number, run = item
            directory = Path(scratch, str(number))
            directory.mkdir()
            done = replay_in_fresh_process(source, run.run_id, entry, ignore_paths, timeout, directory)
            return Checked(run, done.verdict, done.stdout, done.stderr, done.seconds)

        if jobs == 1:
            yield from map(one, enumerate(runs))
            return
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="spanreplay-check") as pool:
            yield from pool.map(one, enumerate(runs))


_STYLES = {COMPLETED: "bold green", REPRODUCED: "bold green", DIVERGED: "bold red", ERROR: "bold red"}


def _print_verdict(done: Checked) -> None:
    verdict = done.verdict
    line = Text.assemble(
        (printable(verdict.run_id), "bold"),
        "  ",
        (verdict.outcome, _STYLES[verdict.outcome]),
        printable(verdict.headline()[len(verdict.outcome) :]),
        f"  ({printable(done.run.agent or 'agent')}, recorded {done.run.status}, {done.seconds:.2f} s)",
    )
    console().print(line, soft_wrap=True)


def _junit_path(path: str, shard: Shard | None) -> str:
    """``--junit-xml`` with ``{shard}`` replaced by the shard's I (1 without --shard)."""
    return path.replace("{shard}", str(shard.index if shard is not None else 1))


def _shard_note(shard: Shard | None, mine: int, elsewhere: int) -> str:
    """``shard 2/4: 5 run(s) here, 14 on the other shards``, or ``""`` without --shard."""
    if shard is None:
        return ""
    return f"shard {shard}: {mine} run(s) here, {elsewhere} on the other shards"


def _print_totals(
    checked: Sequence[Checked], totals: dict[str, int], seconds: float, shard_note: str, left_out: str
) -> None:
    out = console()
    notes = "; ".join(note for note in (shard_note, left_out) if note)
    if not checked:
        out.print("no runs to check" + (f" ({notes})" if notes else ""), markup=False)
        return
    counts = ", ".join(f"{count} {outcome}" for outcome, count in totals.items() if count or outcome == DIVERGED)
    out.print(
        f"{len(checked)} run(s) checked in {seconds:.2f} s: {counts}" + (f"; {notes}" if notes else ""), markup=False
    )


def _case(done: Checked) -> Case:
    verdict = done.verdict
    failure: tuple[str, str, str, str] | None = None
    if verdict.outcome in (DIVERGED, ERROR):
        kind = "failure" if verdict.outcome == DIVERGED else "error"
        failure = (kind, verdict.headline(), verdict.error_type or verdict.outcome, verdict.reason)
    return Case(
        name=done.run.run_id,
        classname=f"spanreplay.{done.run.agent or 'agent'}",
        seconds=done.seconds,
        failure=failure,
        stdout=done.stdout,
        stderr=done.stderr,
    )

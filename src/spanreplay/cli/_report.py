"""``spanreplay report SOURCE RUN -o run.html``: one run as a self-contained HTML page."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from spanreplay.api.loading import load
from spanreplay.cost import Replayed, price_table, render_run, step_costs
from spanreplay.errors import ReplayDivergenceError
from spanreplay.model.events import EventLog
from spanreplay.recording.settings import masker
from spanreplay.replaying.replaying_run import ReplayingRun

from ._common import BadInput, console, format_usd, prices_option
from ._replay import call_entry, cwd_on_path, failing_step, load_entry


@click.command("report")
@click.argument("source")
@click.argument("run_id", metavar="[RUN]", required=False)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False),
    metavar="FILE.html",
    help="Where to write the page.",
)
@click.option(
    "--entry",
    metavar="MODULE:FUNCTION",
    help="Also replay the run against this code (as spanreplay replay does) and mark where it diverges.",
)
@prices_option
def report_command(source: str, run_id: str | None, output: str, entry: str | None, prices_file: str | None) -> None:
    """Write run RUN from SOURCE as one self-contained HTML page: its timeline (a bar per
    boundary, failed steps and the point where a replay diverged marked), tokens and cost
    per step, and each step's masked input and output.

    RUN may be left out when SOURCE holds a single run. The page needs nothing but a
    browser: no script, and nothing loaded from anywhere.
    """
    log = load(source, run_id)
    table = price_table(prices_file)
    replayed = _replay(log, entry) if entry else None
    page = render_run(log, source=source, prices=table, replayed=replayed, masker=masker())
    _write(Path(output), page)
    costs = step_costs(log, table)
    usd = sum(c.usd for c in costs.values() if c.usd is not None)
    verdict = ""
    if replayed is not None:
        verdict = f", replay {replayed.outcome}" + (f" at seq {replayed.seq}" if replayed.seq is not None else "")
    console().print(
        f"report of run {log.run_id} written to {output} ({len(log)} steps, {len(costs)} model calls, "
        f"{format_usd(usd)}{verdict})",
        markup=False,
        soft_wrap=True,
    )


def _replay(log: EventLog, entry: str) -> Replayed:
    """Run ``entry`` against the recording, as ``spanreplay replay`` does, and say where it parted."""
    with cwd_on_path():
        function = load_entry(entry)
        replaying = ReplayingRun(log)
        try:
            with replaying:
                call_entry(function)
        except ReplayDivergenceError as exc:
            if replaying.outcome == "reproduced":
                return Replayed(
                    "reproduced", "The code reached the point where the recorded process died.", None, entry
                )
            return Replayed("diverged", str(exc).split("\n", 1)[0], exc.seq, entry)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            if replaying.outcome == "reproduced":
                step = failing_step(log)
                return Replayed(
                    "reproduced",
                    f"{type(exc).__qualname__}: {exc} was raised again, as recorded; no real call made.",
                    step.seq if step is not None else None,
                    entry,
                )
            return Replayed("failed", f"The replay ended with {type(exc).__qualname__}: {exc}.", None, entry)
    return Replayed("completed", "The replay matched the recording; no real call made.", None, entry)


def _write(path: Path, page: str) -> None:
    """Write the page whole or not at all: a browser never opens half a report."""
    directory = path.parent if str(path.parent) else Path()
    try:
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=directory, prefix=f".{path.name}.", suffix=".tmp", delete=False
        ) as handle:
            handle.write(page)
        # The page holds the run's inputs and outputs, as the trace file does: owner-only
        # (0600), like the trace files. The temporary file is created 0600 already; the
        # chmod says so rather than rely on it.
        os.chmod(handle.name, 0o600)
        os.replace(handle.name, path)
    except OSError as exc:
        raise BadInput(
            f"The report cannot be written to {path} ({exc.strerror}); pick a file in a directory you can write to."
        ) from None

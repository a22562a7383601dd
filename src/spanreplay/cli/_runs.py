"""``spanreplay runs SOURCE``: the runs a trace source holds."""

from __future__ import annotations

import click

from spanreplay.api.loading import runs
from spanreplay.model.events import RunSummary
from spanreplay.recording.keep import policy_in_force

from ._common import console, print_json, print_runs


@click.command("runs")
@click.argument("source")
@click.option("--json", "as_json", is_flag=True, help="Print the runs as a JSON array, for scripts.")
def runs_command(*, source: str, as_json: bool) -> None:
    """List the spanreplay runs in SOURCE, oldest first, with their model calls, tokens and USD.

    SOURCE is a trace file, a directory (searched recursively), a quoted glob,
    or - for stdin: the durable files under ./traces, the OpenTelemetry
    Collector's file exporter output, or a trace downloaded from Jaeger.

    The last line names the keep policy in force where the command runs: the one
    SPANREPLAY_KEEP_OK sets (a keep= callable lives in the agent's own code and
    is not seen here). Give the command the agents' environment to see theirs.

    A sub-agent's run is listed under the run that opened it, indented; --json
    gives each run's "parent" (null for a top-level run).
    """
    policy = policy_in_force().describe()
    found = runs(source)
    if as_json:
        print_json([run.to_dict() for run in found])
        return
    out = console()
    if not found:
        out.print(f"no spanreplay runs in {source}", markup=False)
        return
    tree = run_tree(found)
    print_runs(out, [run for run, _ in tree], [depth for _, depth in tree])
    failed = sum(1 for run in found if run.status != "ok" or run.damaged)
    damaged = sum(1 for run in found if run.damaged)
    refused = f" ({damaged} damaged: spanreplay load refuses them)" if damaged else ""
    out.print(f"{len(found)} run(s), {failed} not ok{refused}", markup=False)
    if any(run.unpriced_calls or run.calls_without_usage for run in found):
        out.print(
            "USD: * leaves out, ? is all of, the calls to models without a price or without usage on their spans; "
            f"spanreplay cost {source} --by run says which.",
            markup=False,
        )
    out.print(policy, markup=False)


def run_tree(found: list[RunSummary]) -> list[tuple[RunSummary, int]]:
    """The runs with their depth, each sub-agent's run after the run that opened it.

    Oldest first among siblings; a run whose parent the source does not hold is listed at the top level.
    """
    ids = {run.run_id for run in found}
    children: dict[str | None, list[RunSummary]] = {}
    for run in found:
        parent = run.parent if run.parent in ids and run.parent != run.run_id else None
        children.setdefault(parent, []).append(run)
    out: list[tuple[RunSummary, int]] = []
    seen: set[str] = set()
    stack = [(run, 0) for run in reversed(children.get(None, []))]
    while stack:
        run, depth = stack.pop()
        if run.run_id in seen:
            continue
        seen.add(run.run_id)
        out.append((run, depth))
        stack.extend((child, depth + 1) for child in reversed(children.get(run.run_id, [])))
    # Runs only a cycle of parents reaches (an edited file) are listed at the top level.
    out.extend((run, 0) for run in found if run.run_id not in seen)
    return out

"""``spanreplay demo``: record the bundled Claude support agent until a run fails, then replay that failure."""

from __future__ import annotations

import asyncio
import logging
import shlex
from pathlib import Path
from types import ModuleType

import click
from rich.text import Text

from spanreplay.api.loading import runs
from spanreplay.api.runs import record, replay
from spanreplay.recording.alerts import ALERT_LOGGER
from spanreplay.recording.configuration import configure

from ._common import EXIT_REPRODUCED, CliState, console, preview, print_runs
from ._replay import failing_step, run_entry

ENTRY = "spanreplay._demo:main"
# Each run fails with probability _demo.FAILURE_RATE, so the chance that none of
# these fails is (1 - 0.4) ** 25, about three in a million.
MAX_ATTEMPTS = 25


@click.command("demo")
@click.option(
    "--trace-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("traces"),
    show_default=True,
    help="Where the demo's trace files go.",
)
@click.pass_obj
def demo_command(state: CliState, trace_dir: Path) -> None:
    """Record a bundled Claude support agent until a run fails, then replay the failed run.

    The agent is a real ``anthropic`` SDK client with streaming replies and
    parallel tool calls. It needs no API key and no network: it talks to a
    local Messages API server on 127.0.0.1, and its carrier-tracking tool times
    out now and then. The replay, with the server stopped, raises the same
    timeout at the same step without a model call or a real tool call.
    """
    # Imported here: the agent imports the Anthropic SDK, which the other commands do not need.
    from spanreplay import _demo

    out = console()
    configure(service_name="spanreplay-demo", trace_dir=trace_dir, tracer_provider=state.tracer_provider)
    out.print(
        Text.assemble(
            ("Recording", "bold"),
            f" the demo agent ({ENTRY}: a Claude support agent with streaming replies, parallel tools "
            f"and a flaky carrier API) into {trace_dir}, until a run fails.",
        )
    )
    recorded: list[str] = []
    failed: str | None = None
    with _demo.local_api() as server:
        out.print(f"  Claude is played by a local Messages API server at {server.url} (no key, no network).")
        for attempt in range(1, MAX_ATTEMPTS + 1):
            run_id, answer, error = _record_once(_demo)
            recorded.append(run_id)
            head = f"  run {attempt}  {run_id}  "
            if error is None:
                out.print(Text.assemble(head, ("ok", "green"), f"     {preview(answer or '', 64)}"))
                continue
            out.print(Text.assemble(head, ("error", "red"), f"  {type(error).__name__}: {error}"))
            failed = run_id
            break
        served = len(server.message_requests)
    out.print(f"  Stopped the local server after {served} model calls: nothing listens for the replay.")
    if failed is None:
        out.print(
            f"No run failed in {MAX_ATTEMPTS} attempts, which happens about three times in a million; "
            "run spanreplay demo again.",
            markup=False,
        )
        raise click.exceptions.Exit(1)

    out.print()
    out.print(Text(f"spanreplay runs {trace_dir}", style="bold"))
    print_runs(out, [r for r in runs(trace_dir) if r.run_id in recorded])
    out.print()

    _demo.real_calls.clear()
    replaying = replay(trace_dir, failed)
    out.print(
        Text.assemble(
            ("Replaying", "bold"),
            f" {failed} with {ENTRY}: every model, tool, clock and random call is served from the trace file.",
        )
    )
    code = run_entry(replaying, _demo.main)
    real = sum(_demo.real_calls.values())
    out.print(f"Real tool calls during the replay: {real}.", markup=False)
    step = failing_step(replaying.events)

    d, r = shlex.quote(str(trace_dir)), shlex.quote(failed)
    out.print()
    out.print(Text("Next, try:", style="bold"))
    out.print(f"  spanreplay runs {d}", markup=False)
    out.print(f"  spanreplay show {d} {r}", markup=False)
    if step is not None:
        out.print(f"  spanreplay show {d} {r} --seq {step.seq}", markup=False)
    out.print(f"  spanreplay replay {d} {r} --entry {ENTRY}", markup=False)
    if code != EXIT_REPRODUCED or real:
        raise click.exceptions.Exit(1)


def _record_once(agent: ModuleType) -> tuple[str, str | None, TimeoutError | None]:
    """One recorded run of the demo agent: its id, and its answer or its failure."""
    run_id = ""
    # The demo prints the replay command itself; the failure alert would repeat it on
    # stderr with a placeholder entry, since the run is opened here and not by the agent.
    alerts = logging.getLogger(ALERT_LOGGER)
    alerts.disabled = True
    try:
        with record(agent=agent.AGENT) as run:
            run_id = run.run_id
            return run_id, asyncio.run(agent.main()), None
    except agent.CarrierTimeout as exc:  # already recorded as the run's error when it got here
        return run_id, None, exc
    finally:
        alerts.disabled = False

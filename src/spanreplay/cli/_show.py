"""``spanreplay show SOURCE [RUN]``: one run, step by step."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import click
import orjson
from rich.console import Console
from rich.json import JSON
from rich.table import Table
from rich.text import Text

from spanreplay import semconv as sc
from spanreplay.model.events import ErrorInfo, Event, RunInfo
from spanreplay.sources.foreign import INSTRUMENTATION, step_note
from spanreplay.sources.run_stream import RunStream, stream_run

from ._common import (
    MIN_PREVIEW,
    BadInput,
    console,
    format_duration,
    format_time,
    print_json,
    printable,
    status_text,
)
from ._show_steps import UNFINISHED, Columns, duration_s, print_step_lines, print_step_table, step_status


@click.command("show")
@click.argument("source")
@click.argument("run_id", metavar="[RUN]", required=False)
@click.option("--seq", type=click.IntRange(min=1), metavar="N", help="Print step N's full input and output (or error).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON, for scripts.")
def show_command(*, source: str, run_id: str | None, seq: int | None, as_json: bool) -> None:
    """Show run RUN from SOURCE: its header and one line per step.

    RUN may be left out when SOURCE holds a single run; spanreplay runs SOURCE
    lists them. Inputs and outputs are shown as recorded, that is masked.
    """
    columns = Columns()
    stream = stream_run(source, run_id, visit=None if seq is not None or as_json else columns.visit)
    if seq is not None:
        event = stream.by_seq(seq)
        if event is None:
            raise BadInput(_no_such_step(stream, seq))
        if as_json:
            print_json(step_dict(event))
        else:
            _print_step(event)
        return
    if as_json:
        _print_run_json(stream)
        return
    _print_run(stream, columns)


_UNFINISHED_NOTE = (
    "none: started, never finished. The process died while this side effect ran, so it may have "
    "happened; replay stops here."
)


def _no_such_step(stream: RunStream, seq: int) -> str:
    run_id = stream.run.run_id
    if not len(stream):
        return f"Run {run_id} has no steps, so there is no seq {seq}; leave --seq out to see the run."
    first, last = stream.seq_range()
    return f"Run {run_id} has no step at seq {seq}; its steps run from seq {first} to {last}."


def _iso(ns: int) -> str | None:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat() if ns else None


def error_dict(error: ErrorInfo | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {"type": error.type_name, "module": error.module, "message": error.message, "fields": dict(error.fields)}


def run_dict(run: RunInfo) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "agent": run.agent,
        "status": run.status,
        "error": error_dict(run.error),
        "service_name": run.service_name,
        "trace_id": run.trace_id,
        "started": _iso(run.start_ns),
        "duration_s": duration_s(run.start_ns, run.end_ns),
        "steps": run.steps,
        "forked_from": run.forked_from,
        "forked_at": run.forked_at,
        **(
            {"recorded_by": run.instrumentation, "compared": list(run.compared), "cannot_reproduce": list(run.gaps)}
            if run.instrumentation
            else {}
        ),
    }


def step_dict(event: Event) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "call_id": event.call_id,
        "kind": event.kind,
        "key": event.key,
        "status": step_status(event, "unfinished"),
        "effect": event.effect,
        "started": _iso(event.start_ns),
        "duration_s": duration_s(event.start_ns, event.end_ns),
        "input": event.input,
        "output": event.output,
        "error": error_dict(event.error),
        "masked": masked_dict(event),
        **(
            {"recorded_by": event.attributes[INSTRUMENTATION], "replay": step_note(event)}
            if INSTRUMENTATION in event.attributes
            else {}
        ),
    }


def masked_dict(event: Event) -> dict[str, list[dict[str, str]]]:
    """Where masking changed each payload, and by which rule: ``{"input": [{"path", "rule"}], ...}``."""
    out: dict[str, list[dict[str, str]]] = {}
    for part, name in (("input", sc.INPUT), ("output", sc.OUTPUT), ("error", sc.ERROR)):
        raw = event.attributes.get(name + sc.MASKED_SUFFIX)
        if isinstance(raw, str):
            try:
                out[part] = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
    return out


def _print_run_json(stream: RunStream) -> None:
    """``{"run": ..., "steps": [...]}`` as print_json writes it, one step at a time."""
    head = orjson.dumps({"run": run_dict(stream.run)}, option=orjson.OPT_INDENT_2, default=str).decode()
    click.echo(head[: -len("\n}")] + ',\n  "steps": [', nl=False)
    for number, event in enumerate(stream.events()):
        step = orjson.dumps(step_dict(event), option=orjson.OPT_INDENT_2, default=str).decode()
        click.echo(("," if number else "") + "\n    " + step.replace("\n", "\n    "), nl=False)
    click.echo("\n  ]\n}" if len(stream) else "]\n}")


def _print_run(stream: RunStream, columns: Columns) -> None:
    run = stream.run
    out = console()
    header = Table.grid(padding=(0, 2))
    header.add_column(style="bold")
    header.add_column()
    header.add_row("run", Text(printable(run.run_id)))
    header.add_row("agent", Text(printable(run.agent or "-")))
    header.add_row("status", status_text(printable(run.status)))
    if run.error is not None:
        header.add_row("error", Text(printable(str(run.error), newlines=True), style="red"))
    header.add_row("service", Text(printable(run.service_name or "-")))
    header.add_row("started", format_time(run.started))
    header.add_row("duration", format_duration(duration_s(run.start_ns, run.end_ns)))
    if run.forked_from:
        at = f", live from seq {run.forked_at}" if run.forked_at is not None else ", every step served"
        header.add_row("forked from", Text(printable(run.forked_from) + at))
    if run.instrumentation:
        _foreign_rows(header, run)
    else:
        for gap in run.gaps:  # a recording that made concurrent siblings with no branch between them
            header.add_row("may diverge", Text(printable(gap), style="yellow"))
    out.print(header)
    out.print()
    if not len(stream):
        out.print("The run made no boundary calls.")
        return
    if run.instrumentation:
        _print_step_notes(out, stream.events())
    room = columns.room(out.width)
    if room < MIN_PREVIEW:
        print_step_lines(out, stream.events())
    else:
        print_step_table(out, stream.events(), columns, room)
    out.print()
    out.print(f"{len(stream)} step(s). Full payloads of one step: --seq N", markup=False)


def _foreign_rows(header: Table, run: RunInfo) -> None:
    """What a trace another instrumentation recorded lets replay do, said before its steps."""
    header.add_row("recorded by", Text(printable(run.instrumentation)))
    compared = ", ".join(run.compared) if run.compared else "nothing (the spans hold no request)"
    header.add_row("compared", Text(f"request {compared}; other request fields are not compared"))
    header.add_row("tools", Text("tools the trace holds no result of run for real on replay (live=False refuses)"))
    for gap in run.gaps:
        header.add_row("cannot replay", Text(printable(gap), style="yellow"))


def _print_step_notes(out: Console, events: Iterable[Event]) -> None:
    for event in events:
        note = printable(step_note(event))
        out.print(f"{event.seq:>4}  {printable(str(event.attributes.get(INSTRUMENTATION, '')))}  {note}", markup=False)
    out.print()


def _print_step(event: Event) -> None:
    out = console()
    out.print(
        Text.assemble(
            ("seq ", "bold"),
            str(event.seq),
            "  ",
            ("call id ", "bold"),
            printable(event.call_id),
            "  ",
            ("kind ", "bold"),
            printable(event.kind),
            "  ",
            ("key ", "bold"),
            printable(event.key),
            "  ",
            status_text(step_status(event, UNFINISHED)),
        )
    )
    out.print(Text("input:", style="bold"))
    out.print(JSON.from_data(event.input))
    if event.unfinished:
        out.print(Text.assemble(("output: ", "bold"), _UNFINISHED_NOTE))
    elif event.error is not None:
        out.print(Text("error:", style="bold red"))
        out.print(JSON.from_data(error_dict(event.error)))
    else:
        out.print(Text("output:", style="bold"))
        out.print(JSON.from_data(event.output))
    for part, places in masked_dict(event).items():
        listed = ", ".join(f"{p.get('path')} ({p.get('rule')})" for p in places if isinstance(p, dict))
        out.print(Text.assemble((f"masked in the {part}: ", "bold"), printable(listed)))

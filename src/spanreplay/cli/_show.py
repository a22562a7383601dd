"""``spanreplay show SOURCE [RUN]``: one run, step by step."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click
import orjson
from rich.cells import cell_len
from rich.console import Console
from rich.json import JSON
from rich.table import Table
from rich.text import Span, Text

from spanreplay import semconv as sc
from spanreplay.api.loading import load
from spanreplay.model.events import ErrorInfo, Event, EventLog, RunInfo
from spanreplay.sources.foreign import INSTRUMENTATION, step_note

from ._common import (
    MIN_PREVIEW,
    BadInput,
    console,
    flexible_width,
    format_duration,
    format_time,
    preview,
    print_json,
    printable,
    status_text,
)


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
    log = load(source, run_id)
    if seq is not None:
        event = log.by_seq(seq)
        if event is None:
            raise BadInput(_no_such_step(log, seq))
        if as_json:
            print_json(step_dict(event))
        else:
            _print_step(event)
        return
    if as_json:
        print_json({"run": run_dict(log.run), "steps": [step_dict(e) for e in log]})
        return
    _print_run(log)


# How a side effect whose intent was recorded, and its outcome never was, is listed.
UNFINISHED = "started, never finished"
_UNFINISHED_NOTE = (
    "none: started, never finished. The process died while this side effect ran, so it may have "
    "happened; replay stops here."
)


def _status(event: Event, unfinished: str) -> str:
    if event.unfinished:
        return unfinished
    return "error" if event.failed else "ok"


def _no_such_step(log: EventLog, seq: int) -> str:
    if not len(log):
        return f"Run {log.run_id} has no steps, so there is no seq {seq}; leave --seq out to see the run."
    first, last = log.events[0].seq, log.events[-1].seq
    return f"Run {log.run_id} has no step at seq {seq}; its steps run from seq {first} to {last}."


def _duration(start_ns: int, end_ns: int) -> float | None:
    return (end_ns - start_ns) / 1e9 if start_ns and end_ns else None


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
        "duration_s": _duration(run.start_ns, run.end_ns),
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
        "status": _status(event, "unfinished"),
        "effect": event.effect,
        "started": _iso(event.start_ns),
        "duration_s": _duration(event.start_ns, event.end_ns),
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


def _print_run(log: EventLog) -> None:
    run = log.run
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
    header.add_row("duration", format_duration(_duration(run.start_ns, run.end_ns)))
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
    if not len(log):
        out.print("The run made no boundary calls.")
        return
    if run.instrumentation:
        _print_step_notes(out, log)
    headers = ["seq", "call id", "kind", "key", "result", "duration"]
    rows = [
        [
            str(e.seq),
            printable(e.call_id),
            printable(e.kind),
            printable(e.key),
            _status(e, UNFINISHED),
            format_duration(_duration(e.start_ns, e.end_ns)),
        ]
        for e in log
    ]
    room = flexible_width(out.width, [headers, *rows], 2)
    if room < MIN_PREVIEW:
        _print_step_lines(out, log, rows)
        return
    _print_step_table(out, log, headers, rows, room)
    out.print()
    out.print(f"{len(log)} step(s). Full payloads of one step: --seq N", markup=False)


# Rows printed at a time: each block is one Text, so rich's cost per print is shared by many rows.
_BLOCK = 1000
_RIGHT = frozenset(("seq", "duration"))


def _print_step_table(out: Console, log: EventLog, headers: list[str], rows: list[list[str]], room: int) -> None:
    """The steps as rich's Table(show_edge=False) draws them, written a block of rows at a time.

    rich's Table lays out every cell through its measuring and wrapping machinery
    and holds the whole rendering until the last row, which makes a run of many
    steps take minutes; these columns never wrap and their widths are known from
    the rows, so each cell is padded here and each block is printed as it is built.
    """
    previews = [
        (
            preview(_text(e.input_json), room),
            preview(str(e.error), room) if e.error is not None else preview(_text(e.output_json), room),
        )
        for e in log
    ]
    names = [*headers, "input", "output / error"]
    widths = [cell_len(name) for name in names]
    for row, shown in zip(rows, previews, strict=True):
        for i, cell in enumerate((*row, *shown)):
            widths[i] = max(widths[i], cell_len(cell))
    right = [name in _RIGHT for name in names]

    def pad(cell: str, i: int) -> str:
        room_left = " " * (widths[i] - cell_len(cell))
        return room_left + cell if right[i] else cell + room_left

    header = Text(no_wrap=True)
    for i, name in enumerate(names):
        if i:
            header.append("\u2503")
        header.append(f" {pad(name, i)} ", style="bold")
    out.print(header)
    out.print("\u2547".join("\u2501" * (w + 2) for w in widths), markup=False, no_wrap=True)
    parts: list[str] = []
    spans: list[Span] = []
    at = 0
    for number, (event, row, shown) in enumerate(zip(log, rows, previews, strict=True), 1):
        cells = [*row, *shown]
        for i, cell in enumerate(cells):
            text = pad(cell, i)
            piece = (" " if i == 0 else "\u2502 ") + text + " "
            styled = status_text(row[4]).style if i == 4 else ("red" if i == 7 and event.error is not None else "")
            if styled:
                start = at + len(piece) - 1 - len(text)
                spans.append(Span(start, start + len(text), styled))
            parts.append(piece)
            at += len(piece)
        if number % _BLOCK and number != len(rows):
            parts.append("\n")
            at += 1
            continue
        out.print(Text("".join(parts), spans=spans, no_wrap=True))
        parts, spans, at = [], [], 0


def _print_step_lines(out: Console, log: EventLog, rows: list[list[str]]) -> None:
    """The steps for a terminal too narrow for the table: a block of lines each."""
    room = max(MIN_PREVIEW, out.width - 12)
    for event, row in zip(log, rows, strict=True):
        out.print(Text.assemble((f"{row[0]:>4}", "bold"), f"  {row[1]}  ", status_text(row[4]), f"  {row[5]}"))
        out.print(f"      in:  {preview(_text(event.input_json), room)}", markup=False)
        if event.error is not None:
            out.print(Text.assemble("      err: ", (preview(str(event.error), room), "red")))
        elif event.unfinished:
            out.print(f"      out: none ({UNFINISHED})", markup=False)
        else:
            out.print(f"      out: {preview(_text(event.output_json), room)}", markup=False)
    out.print()
    out.print(f"{len(log)} step(s). Full payloads of one step: --seq N", markup=False)


def _foreign_rows(header: Table, run: RunInfo) -> None:
    """What a trace another instrumentation recorded lets replay do, said before its steps."""
    header.add_row("recorded by", Text(printable(run.instrumentation)))
    compared = ", ".join(run.compared) if run.compared else "nothing (the spans hold no request)"
    header.add_row("compared", Text(f"request {compared}; other request fields are not compared"))
    header.add_row("tools", Text("tools the trace holds no result of run for real on replay (live=False refuses)"))
    for gap in run.gaps:
        header.add_row("cannot replay", Text(printable(gap), style="yellow"))


def _print_step_notes(out: Console, log: EventLog) -> None:
    for event in log:
        note = printable(step_note(event))
        out.print(f"{event.seq:>4}  {printable(str(event.attributes.get(INSTRUMENTATION, '')))}  {note}", markup=False)
    out.print()


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "replace")


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
            status_text(_status(event, UNFINISHED)),
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

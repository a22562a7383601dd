"""The step table of ``spanreplay show``, printed as the run's events stream by.

A run may hold a million steps, so no row is kept: the widths of the columns are
learnt while the run is first read (``Columns.visit``), and each block of rows is
printed as it is built from the next events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from rich.cells import cell_len
from rich.console import Console
from rich.text import Span, Text

from spanreplay import semconv as sc
from spanreplay.model.events import Event

from ._common import MIN_PREVIEW, flat_text, format_duration, preview, printable, room_for, status_text

__all__ = ["UNFINISHED", "Columns", "duration_s", "print_step_lines", "print_step_table", "step_status"]

# How a side effect whose intent was recorded, and its outcome never was, is listed.
UNFINISHED = "started, never finished"
HEADERS: Final = ("seq", "call id", "kind", "key", "result", "duration")
# The widest a preview column gets (flexible_width's cap).
_CAP: Final = 60
# Rows printed at a time: each block is one Text, so rich's cost per print is shared by many rows.
_BLOCK: Final = 1000
_RIGHT: Final = frozenset((0, 5))  # seq and duration


def _cells_wide(text: str) -> int:
    """The cells ``text`` takes on a terminal (``str.isascii`` is a flag lookup: most text is ASCII)."""
    return len(text) if text.isascii() else cell_len(text)


def step_status(event: Event, unfinished: str) -> str:
    if event.unfinished:
        return unfinished
    return "error" if event.failed else "ok"


def duration_s(start_ns: int, end_ns: int) -> float | None:
    """Seconds between two times of a span, None when either is unknown."""
    return (end_ns - start_ns) / 1e9 if start_ns and end_ns else None


def _cells(event: Event) -> tuple[str, ...]:
    return (
        str(event.seq),
        printable(event.call_id),
        printable(event.kind),
        printable(event.key),
        step_status(event, UNFINISHED),
        format_duration(duration_s(event.start_ns, event.end_ns)),
    )


def _text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "replace")


def _output_text(event: Event) -> str:
    return str(event.error) if event.error is not None else _text(event.output_json)


class Columns:
    """The widths of the step table, learnt from every event of the run."""

    def __init__(self) -> None:
        self.widths = [cell_len(name) for name in HEADERS]
        # Per preview column: the widest text no longer than the cap, and the length of the longest.
        self._whole = [cell_len("input"), cell_len("output / error")]
        self._longest = [0, 0]

    def visit(self, event: Event) -> None:
        for i, cell in enumerate(_cells(event)):
            self.widths[i] = max(self.widths[i], _cells_wide(cell))
        # An input that continues an earlier one is longer than what the span holds: as wide as allowed.
        referenced = sc.INPUT_BASE_SEQ in event.attributes
        for i, text in enumerate((_text(event.input_json), _output_text(event))):
            flat = flat_text(text)
            self._longest[i] = max(self._longest[i], len(flat), _CAP + 1 if referenced and i == 0 else 0)
            if len(flat) <= _CAP:
                self._whole[i] = max(self._whole[i], _cells_wide(flat))

    def room(self, total: int) -> int:
        """How wide each preview may be on a console ``total`` cells wide."""
        return room_for(total, self.widths, 2, cap=_CAP)

    def preview_widths(self, room: int) -> list[int]:
        # Every text fits whole: the widest of them; else some preview is cut to ``room``.
        return [whole if longest <= room else room for whole, longest in zip(self._whole, self._longest, strict=True)]


def print_step_table(out: Console, events: Iterable[Event], columns: Columns, room: int) -> None:
    """The steps as rich's Table(show_edge=False) draws them, written a block of rows at a time.

    rich's Table lays out every cell through its measuring and wrapping machinery
    and holds the whole rendering until the last row, which makes a run of many
    steps take minutes; these columns never wrap and their widths are known before
    the first row, so each cell is padded here and each block is printed as it is built.
    """
    names = [*HEADERS, "input", "output / error"]
    widths = [*columns.widths, *columns.preview_widths(room)]

    def pad(cell: str, i: int) -> str:
        room_left = " " * (widths[i] - _cells_wide(cell))
        return room_left + cell if i in _RIGHT else cell + room_left

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
    for number, event in enumerate(events, 1):
        row = _cells(event)
        cells = (*row, preview(_text(event.input_json), room), preview(_output_text(event), room))
        for i, cell in enumerate(cells):
            text = pad(cell, i)
            piece = (" " if i == 0 else "\u2502 ") + text + " "
            styled = status_text(row[4]).style if i == 4 else ("red" if i == 7 and event.error is not None else "")
            if styled:
                start = at + len(piece) - 1 - len(text)
                spans.append(Span(start, start + len(text), styled))
            parts.append(piece)
            at += len(piece)
        if number % _BLOCK:
            parts.append("\n")
            at += 1
            continue
        _print_block(out, "".join(parts), spans)
        parts, spans, at = [], [], 0
    if parts:  # the last block, less the line break after its last row
        _print_block(out, "".join(parts)[:-1], spans)


def _print_block(out: Console, text: str, spans: list[Span]) -> None:
    """Rows of the table: styled on a terminal, else written as they are (rich would only take
    the styles off again, and its line splitting costs as much as the rest of show)."""
    if out.is_terminal:
        out.print(Text(text, spans=spans, no_wrap=True))
    else:
        # Every cell was made printable already: no control character reaches the file.
        out.file.write(text + "\n")


def print_step_lines(out: Console, events: Iterable[Event]) -> None:
    """The steps for a terminal too narrow for the table: a block of lines each."""
    room = max(MIN_PREVIEW, out.width - 12)
    for event in events:
        row = _cells(event)
        out.print(Text.assemble((f"{row[0]:>4}", "bold"), f"  {row[1]}  ", status_text(row[4]), f"  {row[5]}"))
        out.print(f"      in:  {preview(_text(event.input_json), room)}", markup=False)
        if event.error is not None:
            out.print(Text.assemble("      err: ", (preview(str(event.error), room), "red")))
        elif event.unfinished:
            out.print(f"      out: none ({UNFINISHED})", markup=False)
        else:
            out.print(f"      out: {preview(_text(event.output_json), room)}", markup=False)

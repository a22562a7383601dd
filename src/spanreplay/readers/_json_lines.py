"""Reading a JSON-lines file line by line, and what a damaged line costs.

Each line of an OTLP/JSON-lines file is one complete JSON document, parsed
whole; plain OTLP/JSON lines are decoded by ``_otlp_json_typed``, any other by
``documents``. The last line may be cut short (the writer was stopped while
writing it): it is left out with a warning and everything before it is read.

A caller that passes a ``damaged`` hook (``spanreplay.sources`` does) can deal
with damage: a damaged line (half a line with the next one appended after it,
garbage bytes) is skipped with one warning that names file:line and the runs it
held, and handed to the hook (``_damage``), so that one bad line costs its own
run, never the file or the directory. When a whole line follows the torn part on
the same line, that line is read. Without a hook (a conversion, a push) a
damaged line stops the read with its error.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Iterator
from typing import IO, Any

import orjson

from spanreplay.errors import TraceFormatError
from spanreplay.model.spans import SpanRecord

from . import _otlp_json_typed
from ._base import Incomplete, MalformedTrace, NotATrace, warn
from ._damage import Damage, DamageHook, runs_named
from ._limits import Inflation
from ._lines import LineTooLong, matching_lines, numbered_lines, peek
from .documents import document_spans, format_error

BOM = b"\xef\xbb\xbf"
# How an OTLP/JSON line starts, whoever wrote it (spanreplay, the Collector): found
# inside a damaged line, it is where a whole line written after a torn one begins.
# Inside a JSON string its quotes would be escaped, so it is never payload text.
_LINE_START = b'{"resourceSpans"'
# Tries at reading a whole line out of one damaged line: each parses the rest of it.
_RECOVERY_TRIES = 4
# How far ahead a file whose first line is not a trace is looked at for trace lines.
_LOOKAHEAD = 1 << 16


@dataclasses.dataclass(frozen=True, slots=True)
class Reading:
    """What one read of one file goes by: its name as shown, the filter, the line limit, the hook."""

    name: str
    contains: bytes | None
    locate: Callable[[int], int | None]
    limit: int | None
    damaged: DamageHook | None
    inflation: Inflation | None


def trace_lines_ahead(stream: IO[bytes], *, at_line_start: bool = False) -> bool:
    """Whether OTLP/JSON lines follow within the next bytes: what is before them is a damaged line."""
    ahead = peek(stream, _LOOKAHEAD)
    return (at_line_start and ahead.startswith(_LINE_START)) or b"\n" + _LINE_START in ahead


def first_line(stream: IO[bytes], limit: int | None) -> tuple[bytes | None, int, int]:
    """The first line that is not blank (a leading byte order mark removed), its number and offset."""
    lineno = offset = 0
    read = stream.readline if limit is None else functools.partial(stream.readline, limit + 1)
    for line in iter(read, b""):
        lineno += 1
        if limit is not None and len(line) > limit:
            raise LineTooLong(limit, lineno=lineno)
        stripped = line.removeprefix(BOM) if lineno == 1 else line
        stripped = stripped.lstrip()
        if stripped:
            return stripped, lineno, offset + len(line) - len(stripped)
        offset += len(line)
    return None, lineno, offset


def _column(exc: orjson.JSONDecodeError) -> int:
    """The 1-based column of a JSON error in one line (the parser counts the final newline as a line)."""
    doc = exc.doc if isinstance(exc.doc, str) else ""
    return min(exc.pos, len(doc.rstrip("\r\n"))) + 1


def cut_short(exc: orjson.JSONDecodeError, line: bytes) -> bool:
    """The parser ran out of input: the text is a prefix of valid JSON, not a syntax error."""
    doc = exc.doc if isinstance(exc.doc, str) else ""
    if doc:
        return exc.pos >= len(doc.rstrip())  # pos counts characters, not bytes
    # orjson keeps no text when the bytes are not UTF-8: a cut can split a character.
    try:
        line.decode()
    except UnicodeDecodeError as bad:
        if bad.reason != "unexpected end of data":
            return False
        try:
            orjson.loads(line[: bad.start])
        except orjson.JSONDecodeError as inner:
            return bool(inner.doc) and cut_short(inner, line[: bad.start])
    return False


def read_lines(
    reading: Reading, stream: IO[bytes], *, start: int, offset: int, head: bytes = b""
) -> Iterator[SpanRecord]:
    """The spans of each line from here on; ``head`` (line ``start``, at ``offset``) is already read."""
    contains, limit = reading.contains, reading.limit
    located: Iterator[tuple[int | None, int, bytes]]
    if not contains:  # every line holds b"": nothing to filter
        located = _offsets(numbered_lines(stream, start=start, head=head, limit=limit), offset)
    elif head and contains in head:
        located = itertools.chain(
            [(start, offset, head)],
            ((None, at, line) for at, line in matching_lines(stream, contains, offset=offset + len(head), limit=limit)),
        )
    else:
        located = (
            (None, at, line) for at, line in matching_lines(stream, contains, offset=offset + len(head), limit=limit)
        )
    for lineno, at, line in located:
        if line.isspace():
            continue
        typed = _otlp_json_typed.line_spans(line, _origin(reading.name, lineno, at))
        if typed is not None:  # None: anything but plain OTLP/JSON, read (and worded) below
            yield from typed
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if not line.endswith(b"\n") and cut_short(exc, line):
                where = _origin(reading.name, lineno or reading.locate(at), at)
                warn(
                    f"{where}: the last line is cut short (the writer was stopped while writing it); "
                    "read everything before it."
                )
                return
            reason = f"not valid JSON ({exc.msg} at column {_column(exc)})"
            yield from _damaged(reading, line, lineno, at, reason, _invalid_json(reason))
            continue
        yield from line_spans(reading, line, lineno, at, doc)


def _offsets(numbered: Iterator[tuple[int, bytes]], offset: int) -> Iterator[tuple[int | None, int, bytes]]:
    """Numbered lines with their byte offsets, for a damaged line's ``Damage``."""
    for lineno, line in numbered:
        yield lineno, offset, line
        offset += len(line)


def _origin(name: str, lineno: int | None, at: int) -> str:
    return f"{name}:{lineno}" if lineno is not None else f"{name} at byte {at}"


def line_spans(reading: Reading, line: bytes, lineno: int | None, at: int, doc: Any) -> Iterator[SpanRecord]:
    """The spans of one parsed line; none, and a damaged line, when it is not a trace spanreplay reads."""
    try:
        # Decoded whole before any is handed on: a line is read entirely or skipped entirely.
        spans = list(document_spans(doc, _origin(reading.name, lineno, at)))
    except Incomplete as exc:
        raise format_error(exc, reading.name, lineno or reading.locate(at)) from None
    except MalformedTrace as exc:
        what = "not a trace" if isinstance(exc, NotATrace) else "not a trace spanreplay can read"
        yield from _damaged(reading, line, lineno, at, f"{what} ({exc})", functools.partial(format_error, exc))
        return
    yield from spans


# What a read without a ``damaged`` hook raises for a damaged line: (file, line) -> the error.
_LineError = Callable[[str, "int | None"], TraceFormatError]


def _invalid_json(reason: str) -> _LineError:
    def error(name: str, lineno: int | None) -> TraceFormatError:
        where = f"{name}:{lineno}" if lineno is not None else name
        return TraceFormatError(
            f"{where}: {reason}; each line of an OTLP/JSON-lines file must be one complete JSON object, so "
            "remove or repair that line.",
            source=name,
            line=lineno,
        )

    return error


def _damaged(
    reading: Reading, line: bytes, lineno: int | None, at: int, reason: str, line_error: _LineError
) -> Iterator[SpanRecord]:
    """Skip a damaged line with one warning, hand it to the hook, and read a whole line written after it;
    without a hook, raise the error ``line_error`` makes."""
    lineno = lineno or reading.locate(at)
    if reading.damaged is None:
        raise line_error(reading.name, lineno) from None
    origin = _origin(reading.name, lineno, at)
    recovered = _recover(line, origin)
    torn = line if recovered is None else line[: recovered[0]]
    damage = Damage(reading.name, lineno, reason, runs_named(torn), offset=None if lineno is not None else at)
    after = "" if recovered is None else " (the whole line written right after it on the same line was read)"
    if damage.runs:
        held = ", ".join(damage.runs)
        consequence = (
            f"it held spans of run {held}, which is refused when loaded (a replay would lack a step); "
            "the other runs are read; load that run from another copy of its trace, or repair or remove the line"
        )
    else:
        consequence = (
            "it names no run whole, so a run it held is refused when loaded, by the step it lacks; the other runs "
            "are read; repair or remove the line"
        )
    warn(f"{damage.where}: skipped a damaged line{after}, {reason}; {consequence}.")
    if reading.damaged is not None:
        reading.damaged(damage)
    if recovered is not None:
        yield from recovered[1]


def _recover(line: bytes, origin: str) -> tuple[int, list[SpanRecord]] | None:
    """Where a whole OTLP/JSON line starts inside a damaged one, and its spans; None when none does.

    A write cut short (a full disk) leaves half a line, and the next write goes on
    right after it: the torn half is lost, the line after it need not be.
    """
    start = line.find(_LINE_START, 1)
    for _ in range(_RECOVERY_TRIES):
        if start == -1:
            return None
        tail = line[start:]
        spans = _otlp_json_typed.line_spans(tail, origin)
        if spans is None:
            try:
                spans = list(document_spans(orjson.loads(tail), origin))
            except (orjson.JSONDecodeError, MalformedTrace):
                spans = None
        if spans is not None:
            return start, spans
        start = line.find(_LINE_START, start + 1)
    return None

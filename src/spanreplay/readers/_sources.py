"""Sources (files, directories, globs, stdin), format sniffing and error wording.

The format is chosen from the content, never the file name: gzip and zstd by
their magic bytes (and read as streams); the Collector's length-prefixed
records (protobuf, or JSON in per-record zstd) by a plausible length followed
by the start of a record; JSON lines when the first line is a complete JSON
value; otherwise one JSON document; inside a document its keys tell OTLP from
Jaeger, Jaeger's api/v3 and Tempo's two trace APIs. A file named on its own
brings its rotated backups (the Collector's rotation names) along. Every failure
leaves here as a ``TraceFormatError`` that names the file (and line) and the fix.

A line is parsed whole, so it is held whole: one longer than a limit
(``SPANREPLAY_MAX_LINE_BYTES``, once decompressed) is refused as soon as that
much of it is read, and a file can be held to a limit too
(``SPANREPLAY_MAX_FILE_BYTES``). A few kilobytes of gzip or zstd can inflate to
one line of gigabytes, and reading it to its end would exhaust memory; a gzip or
zstd file is held to what it inflates to and by how much (``_limits``).

A caller that passes a ``damaged`` hook (``spanreplay.sources`` does) can deal
with damage: a damaged line of a JSON-lines file (half a line with the next one
appended after it, garbage bytes) is skipped with one warning that names
file:line and the runs it held, and handed to the hook (``_damage``), so that one
bad line costs its own run, never the file or the directory. When a whole line
follows the torn part on the same line, that line is read. In a directory or a
glob, a file that cannot be read at all is skipped the same way. Without a hook
(a conversion, a push) a damaged line stops the read with its error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import glob
import gzip
import io
import itertools
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import orjson

from .._semconv import RUN_ID
from .._spans import SpanRecord
from ..errors import TraceFormatError
from . import _otlp_json_typed, _otlp_proto, _records
from ._base import Incomplete, MalformedTrace, NotATrace, warn
from ._damage import Damage, DamageHook, runs_named
from ._limits import (
    BUFFER,
    FILE_LIMIT,
    LINE_LIMIT,
    Compressed,
    FileTooLarge,
    Inflated,
    Inflation,
    Limits,
    TooInflated,
    capped,
    inflated,
    limits,
    raised,
    size_text,
)
from ._lines import LineTooLong, line_number, matching_lines, numbered_lines
from ._zstd import MAGIC as _ZSTD_MAGIC
from ._zstd import ZstdCutShort, ZstdError, ZstdStream
from .documents import FORMATS, classify, document_spans, format_error

STDIN = "-"
STDIN_NAME = "<stdin>"
GZIP_MAGIC = b"\x1f\x8b"
BOM = b"\xef\xbb\xbf"
_GLOB_CHARS = frozenset("*?[")
# The Collector's file rotation (lumberjack): traces.json -> traces-2024-05-01T10-00-00.000.json.
_ROTATED = r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3}"
_COMPRESSED_SUFFIXES = ("", ".gz", ".zst")
# How an OTLP/JSON line starts, whoever wrote it (spanreplay, the Collector): found
# inside a damaged line, it is where a whole line written after a torn one begins.
# Inside a JSON string its quotes would be escaped, so it is never payload text.
_LINE_START = b'{"resourceSpans"'
# Tries at reading a whole line out of one damaged line: each parses the rest of it.
_RECOVERY_TRIES = 4
# How far ahead a file whose first line is not a trace is looked at for trace lines.
_LOOKAHEAD = 1 << 16


def expand(source: str | os.PathLike[str]) -> list[str]:
    """The files a source names: itself, a directory's files (recursively), a glob's matches."""
    return _files(source)[0]


def _files(source: str | os.PathLike[str]) -> tuple[list[str], bool]:
    """The files, and whether the user named this one file (so it must be a trace)."""
    text = os.fspath(source)
    if text == STDIN:
        return [STDIN], True
    if "\0" in text:
        raise TraceFormatError(
            f"{text!r} is not a path (it holds a NUL character); pass a trace file, a directory or a glob."
        )
    path = Path(text)
    if path.is_dir():
        files = sorted(
            str(p)
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise TraceFormatError(
                f"Directory {text} holds no trace files; record a run first (spanreplay demo) or "
                "point at the directory the traces were written to (default ./traces).",
                source=text,
            )
        return files, False
    if path.exists():
        # A file, or a pipe such as bash's <(zcat runs.jsonl.gz); a Collector file brings its backups.
        return [*rotated_backups(path), text], True
    if _GLOB_CHARS & set(text):
        files = sorted(p for p in glob.glob(text, recursive=True) if os.path.isfile(p))
        if not files:
            raise TraceFormatError(
                f"The pattern {text} matches no files; check the path and quote the pattern.", source=text
            )
        return files, False
    raise TraceFormatError(
        f"No such file or directory: {text}; pass a trace file, a directory, a glob or - for stdin.", source=text
    )


def rotated_backups(path: Path) -> list[str]:
    """The backups the Collector's rotation made of the file at ``path``, oldest first.

    The Collector's file exporter rotates ``traces.json`` to
    ``traces-2024-05-01T10-00-00.000.json`` (the time it was rotated) beside it;
    a run that was being written across a rotation is in both.
    """
    if not path.is_file():
        return []  # a pipe, a device: no siblings to look for
    stem, suffix = path.stem, path.suffix
    pattern = re.compile(
        re.escape(stem) + _ROTATED + re.escape(suffix) + "(?:" + "|".join(map(re.escape, _COMPRESSED_SUFFIXES)) + ")"
    )
    try:
        siblings = [p for p in path.parent.iterdir() if pattern.fullmatch(p.name) and p.is_file()]
    except OSError:
        return []
    # The timestamp sorts as text: the oldest first.
    return [str(p) for p in sorted(siblings, key=lambda p: p.name)]


def iter_spans(
    source: str | os.PathLike[str], *, contains: bytes | None = None, damaged: DamageHook | None = None
) -> Iterator[SpanRecord]:
    """Every span in a source, file by file, line by line.

    Files in a directory or a glob that are not traces at all (a README, a
    config file) are skipped with a SpanReplayWarning; a file named on its own
    must be a trace.

    Args:
        contains: in JSON-lines files, skip lines that do not contain these bytes
            without parsing them (a quoted run id: filtering one run costs a
            substring search, not a JSON parse). It must not contain a newline;
            empty bytes filter nothing.
        damaged: called with each damaged line skipped (after its warning), and
            with each file of a directory or glob skipped whole; a damaged line
            of a filtered read is seen only when it holds ``contains``.

    Raises:
        TraceFormatError: a source that cannot be read, naming the file and line.
    """
    files, explicit = _files(source)
    for name in files:
        yield from read_file(name, contains=contains, explicit=explicit, damaged=damaged)


def read_file(
    name: str, *, contains: bytes | None = None, explicit: bool = True, damaged: DamageHook | None = None
) -> Iterator[SpanRecord]:
    """Every span in one file (``-`` is stdin), streamed.

    Args:
        contains: see ``iter_spans``.
        explicit: the user named this file; when False, a file that is not a
            trace, or that cannot be read (damaged, past a limit), is skipped
            with a warning instead of failing: one file never costs the directory.
        damaged: see ``iter_spans``.
    """
    shown = STDIN_NAME if name == STDIN else name
    if damaged is None:
        yield from _read_file(name, shown, contains, explicit, damaged)
        return
    # The runs whose spans this file handed on: a file skipped part way may have held more of them.
    held: dict[str, None] = {}
    try:
        for span in _read_file(name, shown, contains, explicit, damaged):
            run_id = span.attributes.get(RUN_ID)
            if type(run_id) is str and run_id not in held:
                held[run_id] = None
            yield span
    except TraceFormatError as exc:
        if explicit:
            raise
        reason = str(exc).rstrip(".")
        refused = f"; runs {', '.join(held)} were in it and are refused when loaded" if held else ""
        warn(f"Skipped {shown} from there on{refused}: {reason}.")
        damaged(Damage(shown, None, reason, tuple(held)))


def _read_file(
    name: str, shown: str, contains: bytes | None, explicit: bool, damaged: DamageHook | None
) -> Iterator[SpanRecord]:
    limit = limits()

    def locate(offset: int) -> int | None:
        """The line number at a byte offset, for messages: the file is read again up to it."""
        if name == STDIN:
            return None  # read once
        with _open(name, shown, None) as (again, _, _):
            return line_number(again, offset)

    with _open(name, shown, limit) as (stream, compression, inflation):
        reading = _Reading(shown, contains, locate, limit.line, damaged, inflation)
        try:
            yield from _read(reading, stream, explicit)
        except LineTooLong as exc:
            lineno = exc.lineno or (locate(exc.offset) if exc.offset is not None else None)
            where = f"{shown}:{lineno}" if lineno is not None else f"{shown} at byte {exc.offset}"
            raise TraceFormatError(
                f"{where}: a line holds more than {size_text(exc.limit)}{inflated(compression)}, past the limit "
                f"{LINE_LIMIT} sets; no trace line is that long, so the file is damaged or was made to exhaust "
                f"memory. If it is a real trace, raise the limit ({raised(LINE_LIMIT, exc.limit)}) and read it "
                "again.",
                source=shown,
                line=lineno,
            ) from None
        except TooInflated as exc:
            raise TraceFormatError(exc.sentence(shown, compression or "zstd"), source=shown) from None
        except FileTooLarge as exc:
            raise TraceFormatError(
                f"{shown} holds more than {size_text(exc.limit)}{inflated(compression)}, past the limit {FILE_LIMIT} "
                f"sets; if it is a real trace, raise the limit ({raised(FILE_LIMIT, exc.limit)}) and read it again.",
                source=shown,
            ) from None
        except EOFError as exc:
            # A compressed stream that ends early: the writer was stopped mid-file.
            what = "zstd" if isinstance(exc, ZstdCutShort) else "gzip"
            warn(
                f"{shown} ends in the middle of its {what} stream (the writer was stopped); read everything before it."
            )
        except (OSError, zlib.error, ZstdError) as exc:
            if compression:
                fix = f"if it is {compression} it is damaged, so copy or export it again"
            else:
                fix = "check the disk or copy the file again"
            raise TraceFormatError(f"{shown} cannot be read ({exc}); {fix}.", source=shown) from None


@contextlib.contextmanager
def _open(name: str, shown: str, limit: Limits | None) -> Iterator[tuple[IO[bytes], str, Inflation | None]]:
    """The plain bytes of a file (or stdin), the compression they were in ("" for none), and
    the count of what it inflates to (None without ``limit``), which its zstd records add to.

    ``limit``: the caps to hold the file to; None reads it unbounded (reading again
    up to a place already read once, to number a line).
    """
    raw: IO[bytes]
    try:
        raw = _stdin() if name == STDIN else open(name, "rb", buffering=BUFFER)  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise TraceFormatError(
            f"Cannot open {shown}: {exc.strerror or exc}; check the path and its permissions.", source=shown
        ) from None
    with raw:
        try:
            magic = _peek(raw, 4)
        except OSError as exc:
            raise TraceFormatError(
                f"Cannot read {shown}: {exc.strerror or exc}; check that it is a readable file.", source=shown
            ) from None
        most = limit.file if limit is not None else None
        inflation = Inflation(limit) if limit is not None else None
        compressed: IO[bytes] = raw if inflation is None else Compressed(raw, inflation)  # type: ignore[assignment]
        if magic[:2] == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=compressed, mode="rb") as unzipped:
                plain: IO[bytes] = unzipped  # type: ignore[assignment]
                if inflation is not None:
                    plain = io.BufferedReader(Inflated(plain, inflation), BUFFER)
                yield capped(plain, most), "gzip", inflation
        elif magic[:4] == _ZSTD_MAGIC:
            # A whole file in zstd (zstd's own tool, or a rotated file compressed later).
            unzstd: io.RawIOBase = ZstdStream(compressed)
            if inflation is not None:
                unzstd = Inflated(unzstd, inflation)  # type: ignore[arg-type]
            with io.BufferedReader(unzstd, 1 << 16) as buffered:
                yield capped(buffered, most), "zstd", inflation
        else:
            yield capped(raw, most), "", inflation


def _stdin() -> IO[bytes]:
    try:
        fd = os.dup(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):
        buffer = getattr(sys.stdin, "buffer", None)
        if buffer is None:
            raise OSError("stdin is not open for reading") from None
        # Wrapped so that closing our reader leaves the process's stdin open.
        return io.BufferedReader(_Unclosed(buffer))
    # A duplicate descriptor: closing it leaves the process's stdin open.
    return io.BufferedReader(io.FileIO(fd, "rb"))


class _Unclosed(io.RawIOBase):
    def __init__(self, inner: IO[bytes]) -> None:
        self._inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _peek(stream: IO[bytes], size: int) -> bytes:
    peek = getattr(stream, "peek", None)
    return bytes(peek(size)) if peek is not None else b""


@dataclasses.dataclass(frozen=True, slots=True)
class _Reading:
    """What one read of one file goes by: its name as shown, the filter, the line limit, the hook."""

    name: str
    contains: bytes | None
    locate: Callable[[int], int | None]
    limit: int | None
    damaged: DamageHook | None
    inflation: Inflation | None


def _read(reading: _Reading, stream: IO[bytes], explicit: bool) -> Iterator[SpanRecord]:
    name, limit = reading.name, reading.limit
    first: bytes | None
    raw_head = _peek(stream, 64)
    if _records.looks_like_records(raw_head):
        yield from _read_records(name, stream, reading.contains, reading.inflation)
        return
    head = raw_head.removeprefix(BOM).lstrip()
    if head and head[:1] not in b"{[":
        if reading.damaged is not None and _trace_lines_ahead(stream):
            # JSON lines whose first line is damaged (garbage written before the first span).
            yield from _read_lines(reading, stream, start=1, offset=0)
            return
        first, lineno, at = head, 1, 0  # not JSON: no need to read what may be one long binary "line"
    else:
        first, lineno, at = _first_line(stream, limit)
    if first is None:
        if explicit:
            raise TraceFormatError(
                f"{name} is empty, so it holds no trace; pass the file a run was written to.", source=name
            )
        warn(f"Skipped {name}: it is empty.")
        return
    if first[:1] not in (b"{", b"["):
        if explicit:
            raise TraceFormatError(
                f"{name} is not a trace file (it starts with {first[:20]!r}, not JSON); {FORMATS}.", source=name
            )
        warn(f"Skipped {name}: not a trace file (it does not start with JSON).")
        return
    try:
        doc = orjson.loads(first)
    except orjson.JSONDecodeError as exc:
        if not _cut_short(exc, first):
            # A syntax error inside the first line: JSON lines with a damaged line.
            yield from _read_lines(reading, stream, start=lineno, offset=at, head=first)
        elif not first.endswith(b"\n"):
            # One line, cut short: the writer was stopped while writing its only span.
            warn(f"{name}:{lineno}: the only line is cut short (the writer was stopped while writing it).")
        elif reading.damaged is not None and _trace_lines_ahead(stream, at_line_start=True):
            # Not the start of a document spread over lines: a torn first line, and OTLP lines after it.
            yield from _read_lines(reading, stream, start=lineno, offset=at, head=first)
        else:
            # The start of a JSON document spread over many lines, parsed whole: held to the line limit.
            data = first + (stream.read() if limit is None else stream.read(limit + 1 - len(first)))
            if limit is not None and len(data) > limit:
                raise TraceFormatError(
                    f"{name} is one JSON document of more than {size_text(limit)}, past the limit {LINE_LIMIT} sets "
                    f"(a document is parsed whole, as a line is); raise the limit ({raised(LINE_LIMIT, limit)}) "
                    "to read it.",
                    source=name,
                ) from None
            yield from _read_document(name, data, explicit)
        return
    try:
        classify(doc)
    except NotATrace as exc:
        if reading.damaged is not None and first.endswith(b"\n") and _trace_lines_ahead(stream, at_line_start=True):
            yield from _read_lines(reading, stream, start=lineno, offset=at, head=first)
            return
        if explicit:
            raise format_error(exc, name, lineno) from None
        warn(f"Skipped {name}: {exc}, so it is not a trace file.")
        return
    if reading.contains is None or reading.contains in first:
        yield from _line_spans(reading, first, lineno, at, doc)
    yield from _read_lines(reading, stream, start=lineno + 1, offset=at + len(first))


def _trace_lines_ahead(stream: IO[bytes], *, at_line_start: bool = False) -> bool:
    """Whether OTLP/JSON lines follow within the next bytes: what is before them is a damaged line."""
    ahead = _peek(stream, _LOOKAHEAD)
    return (at_line_start and ahead.startswith(_LINE_START)) or b"\n" + _LINE_START in ahead


def _first_line(stream: IO[bytes], limit: int | None) -> tuple[bytes | None, int, int]:
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


def _cut_short(exc: orjson.JSONDecodeError, line: bytes) -> bool:
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
            return bool(inner.doc) and _cut_short(inner, line[: bad.start])
    return False


def _read_lines(
    reading: _Reading, stream: IO[bytes], *, start: int, offset: int, head: bytes = b""
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
            if not line.endswith(b"\n") and _cut_short(exc, line):
                where = _origin(reading.name, lineno or reading.locate(at), at)
                warn(
                    f"{where}: the last line is cut short (the writer was stopped while writing it); "
                    "read everything before it."
                )
                return
            reason = f"not valid JSON ({exc.msg} at column {_column(exc)})"
            yield from _damaged(reading, line, lineno, at, reason, _invalid_json(reason))
            continue
        yield from _line_spans(reading, line, lineno, at, doc)


def _offsets(numbered: Iterator[tuple[int, bytes]], offset: int) -> Iterator[tuple[int | None, int, bytes]]:
    """Numbered lines with their byte offsets, for a damaged line's ``Damage``."""
    for lineno, line in numbered:
        yield lineno, offset, line
        offset += len(line)


def _origin(name: str, lineno: int | None, at: int) -> str:
    return f"{name}:{lineno}" if lineno is not None else f"{name} at byte {at}"


def _line_spans(reading: _Reading, line: bytes, lineno: int | None, at: int, doc: Any) -> Iterator[SpanRecord]:
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
_Strict = Callable[[str, "int | None"], TraceFormatError]


def _invalid_json(reason: str) -> _Strict:
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
    reading: _Reading, line: bytes, lineno: int | None, at: int, reason: str, strict: _Strict
) -> Iterator[SpanRecord]:
    """Skip a damaged line with one warning, hand it to the hook, and read a whole line written after it;
    without a hook, raise ``strict``'s error."""
    lineno = lineno or reading.locate(at)
    if reading.damaged is None:
        raise strict(reading.name, lineno) from None
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


def _read_records(
    name: str, stream: IO[bytes], contains: bytes | None, inflation: Inflation | None
) -> Iterator[SpanRecord]:
    """The spans of a file of length-prefixed records (protobuf, or JSON), each maybe zstd."""
    # Protobuf holds strings unquoted: the run id needle is looked for without its quotes.
    bare = contains.strip(b'"') if contains is not None else None
    try:
        for number, offset, body in _records.records(stream, inflation):
            where = f"{name} record {number} (at byte {offset})"
            try:
                if body[:1] == b"{":
                    if contains is not None and contains not in body:
                        continue
                    try:
                        doc = orjson.loads(body)
                    except orjson.JSONDecodeError as exc:
                        raise MalformedTrace(f"its JSON is not valid ({exc.msg} at character {exc.pos})") from None
                    yield from document_spans(doc, where)
                else:
                    if bare is not None and bare not in body:
                        continue
                    yield from _otlp_proto.spans_from_message(_otlp_proto.parse(body), where)
            except Incomplete as exc:
                raise TraceFormatError(f"{where}: {exc}.", source=name) from None
            except MalformedTrace as exc:
                raise TraceFormatError(
                    f"{where} is not a trace spanreplay can read ({exc}); the file is damaged, so copy it again "
                    "from the Collector's output.",
                    source=name,
                ) from None
    except _records.CutShort as exc:
        warn(f"{name}: {exc} (the writer was stopped while writing it); read everything before it.")
    except _records.RecordError as exc:
        raise TraceFormatError(
            f"{name} at byte {exc.offset}: {exc}; copy the file again from the Collector's output.", source=name
        ) from None


def _read_document(name: str, data: bytes, explicit: bool) -> Iterator[SpanRecord]:
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(
            f"{name}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno}); "
            "repair the file or export it again.",
            source=name,
            line=exc.lineno,
        ) from None
    try:
        yield from document_spans(doc, name)
    except NotATrace as exc:
        if explicit:
            raise format_error(exc, name, None) from None
        warn(f"Skipped {name}: {exc}, so it is not a trace file.")
    except MalformedTrace as exc:
        raise format_error(exc, name, None) from None

"""Reading a source's files: opening them (and stdin), format sniffing and error wording.

The format is chosen from the content, never the file name: gzip and zstd by
their magic bytes (and read as streams); the Collector's length-prefixed
records (protobuf, or JSON in per-record zstd) by a plausible length followed
by the start of a record; JSON lines (``_json_lines``) when the first line is a
complete JSON value; otherwise one JSON document; inside a document its keys
tell OTLP from Jaeger, Jaeger's api/v3 and Tempo's two trace APIs. Which files a
source names is ``_listing``'s. Every failure leaves here as a
``TraceFormatError`` that names the file (and line) and the fix.

A line is parsed whole, so it is held whole: one longer than a limit
(``SPANREPLAY_MAX_LINE_BYTES``, once decompressed) is refused as soon as that
much of it is read, and a file can be held to a limit too
(``SPANREPLAY_MAX_FILE_BYTES``). A few kilobytes of gzip or zstd can inflate to
one line of gigabytes, and reading it to its end would exhaust memory; a gzip or
zstd file is held to what it inflates to and by how much (``_limits``).

A caller that passes a ``damaged`` hook (``spanreplay.sources`` does) is handed
each damaged line ``_json_lines`` skips, and, in a directory or a glob, each
file that cannot be read at all, skipped with a warning that names the runs it
had handed on, so that one file never costs the directory. Without a hook (a
conversion, a push) the first damage stops the read with its error.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import sys
import zlib
from collections.abc import Iterator
from typing import IO, Any

import orjson

from spanreplay.errors import TraceFormatError
from spanreplay.model.spans import SpanRecord
from spanreplay.semconv import RUN_ID

from . import _otlp_proto, _records
from ._base import Incomplete, MalformedTrace, NotATrace, warn
from ._damage import Damage, DamageHook
from ._json_lines import BOM, Reading, cut_short, first_line, line_spans, read_lines, trace_lines_ahead
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
from ._lines import LineTooLong, line_number, peek
from ._listing import STDIN, STDIN_NAME, source_files
from ._zstd import MAGIC as _ZSTD_MAGIC
from ._zstd import ZstdCutShort, ZstdError, ZstdStream
from .documents import FORMATS, classify, document_spans, format_error

GZIP_MAGIC = b"\x1f\x8b"


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
    files, explicit = source_files(source)
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
        yield from _read_file(name, shown, contains, damaged, explicit=explicit)
        return
    # The runs whose spans this file handed on: a file skipped part way may have held more of them.
    held: dict[str, None] = {}
    try:
        for span in _read_file(name, shown, contains, damaged, explicit=explicit):
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
    name: str, shown: str, contains: bytes | None, damaged: DamageHook | None, *, explicit: bool
) -> Iterator[SpanRecord]:
    limit = limits()

    def locate(offset: int) -> int | None:
        """The line number at a byte offset, for messages: the file is read again up to it."""
        if name == STDIN:
            return None  # read once
        with _open(name, shown, None) as (again, _, _):
            return line_number(again, offset)

    with _open(name, shown, limit) as (stream, compression, inflation):
        reading = Reading(shown, contains, locate, limit.line, damaged, inflation)
        try:
            yield from _read(reading, stream, explicit=explicit)
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
            magic = peek(raw, 4)
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


def _read(reading: Reading, stream: IO[bytes], *, explicit: bool) -> Iterator[SpanRecord]:
    name, limit = reading.name, reading.limit
    first: bytes | None
    raw_head = peek(stream, 64)
    if _records.looks_like_records(raw_head):
        yield from _read_records(name, stream, reading.contains, reading.inflation)
        return
    head = raw_head.removeprefix(BOM).lstrip()
    if head and head[:1] not in b"{[":
        if reading.damaged is not None and trace_lines_ahead(stream):
            # JSON lines whose first line is damaged (garbage written before the first span).
            yield from read_lines(reading, stream, start=1, offset=0)
            return
        first, lineno, at = head, 1, 0  # not JSON: no need to read what may be one long binary "line"
    else:
        first, lineno, at = first_line(stream, limit)
    first = _json_start(name, first, explicit=explicit)
    if first is None:
        return
    try:
        doc = orjson.loads(first)
    except orjson.JSONDecodeError as exc:
        cut = cut_short(exc, first)
        yield from _read_unparsed_start(reading, stream, first, lineno, at, cut=cut, explicit=explicit)
        return
    try:
        classify(doc)
    except NotATrace as exc:
        if reading.damaged is not None and first.endswith(b"\n") and trace_lines_ahead(stream, at_line_start=True):
            yield from read_lines(reading, stream, start=lineno, offset=at, head=first)
            return
        if explicit:
            raise format_error(exc, name, lineno) from None
        warn(f"Skipped {name}: {exc}, so it is not a trace file.")
        return
    if reading.contains is None or reading.contains in first:
        yield from line_spans(reading, first, lineno, at, doc)
    yield from read_lines(reading, stream, start=lineno + 1, offset=at + len(first))


def _json_start(name: str, first: bytes | None, *, explicit: bool) -> bytes | None:
    """``first``, when the file has a first line and it starts JSON; else None, the file refused
    (``explicit``) or skipped with a warning."""
    if first is None:
        if explicit:
            raise TraceFormatError(
                f"{name} is empty, so it holds no trace; pass the file a run was written to.", source=name
            )
        warn(f"Skipped {name}: it is empty.")
        return None
    if first[:1] not in (b"{", b"["):
        if explicit:
            raise TraceFormatError(
                f"{name} is not a trace file (it starts with {first[:20]!r}, not JSON); {FORMATS}.", source=name
            )
        warn(f"Skipped {name}: not a trace file (it does not start with JSON).")
        return None
    return first


def _read_unparsed_start(
    reading: Reading, stream: IO[bytes], first: bytes, lineno: int, at: int, *, cut: bool, explicit: bool
) -> Iterator[SpanRecord]:
    """The spans of a file whose first line ``first`` is not JSON by itself (``cut``: it ends early)."""
    name, limit = reading.name, reading.limit
    if not cut:
        # A syntax error inside the first line: JSON lines with a damaged line.
        yield from read_lines(reading, stream, start=lineno, offset=at, head=first)
    elif not first.endswith(b"\n"):
        # One line, cut short: the writer was stopped while writing its only span.
        warn(f"{name}:{lineno}: the only line is cut short (the writer was stopped while writing it).")
    elif reading.damaged is not None and trace_lines_ahead(stream, at_line_start=True):
        # Not the start of a document spread over lines: a torn first line, and OTLP lines after it.
        yield from read_lines(reading, stream, start=lineno, offset=at, head=first)
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
        yield from _read_document(name, data, explicit=explicit)


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


def _read_document(name: str, data: bytes, *, explicit: bool) -> Iterator[SpanRecord]:
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

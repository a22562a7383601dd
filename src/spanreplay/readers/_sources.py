"""Sources (files, directories, globs, stdin) and format sniffing, streaming.

The format is chosen from the content, never the file name: gzip by its magic
bytes, JSON lines when the first line is a complete JSON object, otherwise one
JSON document; inside a document its keys tell OTLP from Jaeger.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import sys
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import orjson

from .._spans import SpanRecord
from ..errors import TraceFormatError
from . import _jaeger_json, _otlp_json
from ._otlp_json import MalformedTrace

STDIN = "-"
_GZIP_MAGIC = b"\x1f\x8b"
_GLOB_CHARS = frozenset("*?[")
_OTHER_SIGNALS = ("resourceLogs", "resourceMetrics", "resourceProfiles")


class SpanReplayWarning(UserWarning):
    """Something in a source that spanreplay read past (a torn last line, say)."""


def expand(source: str | os.PathLike[str]) -> list[str]:
    """The files a source names: itself, a directory's files (recursively), a glob's matches."""
    text = os.fspath(source)
    if text == STDIN:
        return [STDIN]
    path = Path(text)
    if path.is_dir():
        files = sorted(
            str(p) for p in path.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise TraceFormatError(
                f"Directory {text} holds no trace files; record a run first (spanreplay demo) or "
                "point at the directory the traces were written to (default ./traces).",
                source=text,
            )
        return files
    if path.is_file():
        return [text]
    if _GLOB_CHARS & set(text):
        files = sorted(p for p in glob.glob(text, recursive=True) if os.path.isfile(p))
        if not files:
            raise TraceFormatError(f"The pattern {text} matches no files; check the path and quote the pattern.", source=text)
        return files
    raise TraceFormatError(f"No such file or directory: {text}; pass a trace file, a directory, a glob or - for stdin.", source=text)


def iter_spans(source: str | os.PathLike[str], *, contains: bytes | None = None) -> Iterator[SpanRecord]:
    """Every span in a source, file by file, line by line.

    Args:
        contains: in JSON-lines files, skip lines that do not contain these bytes
            without parsing them (a run id: filtering one run costs a substring
            search per line, not a JSON parse).
    """
    files = expand(source)
    explicit = len(files) == 1
    for name in files:
        yield from read_file(name, contains=contains, explicit=explicit)


def read_file(name: str, *, contains: bytes | None = None, explicit: bool = True) -> Iterator[SpanRecord]:
    with _open(name) as stream:
        head = _peek(stream)
        first = head.lstrip()[:1]
        if first not in (b"{", b"["):
            if not explicit:
                warnings.warn(f"Skipped {name}: not a trace file (it does not start with JSON).", SpanReplayWarning, stacklevel=2)
                return
            shown = head[:20]
            raise TraceFormatError(
                f"{name} is not a trace file: it starts with {shown!r}, not JSON. spanreplay reads "
                "OTLP/JSON (lines or one document, optionally gzip) and Jaeger JSON.",
                source=name,
            )
        if _first_line_is_document(head):
            yield from _read_lines(name, stream, contains)
        else:
            yield from _read_document(name, stream)


def _open(name: str) -> IO[bytes]:
    if name == STDIN:
        raw: IO[bytes] = io.BufferedReader(io.FileIO(os.dup(sys.stdin.fileno()), "rb"))
    else:
        try:
            raw = open(name, "rb")  # noqa: SIM115 (closed by the caller's with)
        except OSError as exc:
            raise TraceFormatError(f"Cannot open {name}: {exc.strerror}; check the path and its permissions.", source=name) from None
    magic = raw.peek(2)[:2] if isinstance(raw, io.BufferedReader) else b""
    if magic == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def _peek(stream: IO[bytes]) -> bytes:
    peek = getattr(stream, "peek", None)
    data: bytes = peek(65536) if peek is not None else b""
    return data


def _first_line_is_document(head: bytes) -> bool:
    line, newline, _ = head.lstrip().partition(b"\n")
    if not newline and len(head) >= 65536:
        return False  # a first line longer than the peek: treat the file as one document
    try:
        return isinstance(orjson.loads(line), dict)
    except orjson.JSONDecodeError:
        return False


def _read_lines(name: str, stream: IO[bytes], contains: bytes | None) -> Iterator[SpanRecord]:
    lineno = 0
    for line in stream:
        lineno += 1
        if contains is not None and contains not in line:
            continue
        if not line.strip():
            continue
        try:
            doc = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            if not line.endswith(b"\n"):
                warnings.warn(
                    f"{name}:{lineno}: the last line is cut short (the writer was killed while "
                    "writing it); read everything before it.",
                    SpanReplayWarning,
                    stacklevel=3,
                )
                return
            raise TraceFormatError(
                f"{name}:{lineno}: not valid JSON ({exc}); each line of an OTLP/JSON-lines file "
                "must be one complete JSON object. Remove or repair that line.",
                source=name,
                line=lineno,
            ) from None
        yield from _spans(doc, name, lineno)


def _read_document(name: str, stream: IO[bytes]) -> Iterator[SpanRecord]:
    try:
        doc = orjson.loads(stream.read())
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(
            f"{name}:{exc.lineno}: not valid JSON ({exc.msg} at column {exc.colno}); repair the file "
            "or export it again.",
            source=name,
            line=exc.lineno,
        ) from None
    except (OSError, EOFError) as exc:
        raise TraceFormatError(f"{name}: cannot be read ({exc}); the file is damaged or cut short.", source=name) from None
    yield from _spans(doc, name, None)


def _spans(doc: Any, name: str, lineno: int | None) -> Iterator[SpanRecord]:
    origin = f"{name}:{lineno}" if lineno is not None else name
    try:
        if not isinstance(doc, Mapping):
            raise MalformedTrace(f"the top level is a JSON {type(doc).__name__}, not an object")
        yield from _dispatch(doc, origin)
    except MalformedTrace as exc:
        raise TraceFormatError(
            f"{origin}: not a trace spanreplay can read: {exc}. spanreplay reads OTLP/JSON "
            "(resourceSpans) and Jaeger JSON (data/spans).",
            source=name,
            line=lineno,
        ) from None


def _dispatch(doc: Mapping[str, Any], origin: str) -> Iterator[SpanRecord]:
    if "resourceSpans" in doc or "batches" in doc:
        yield from _otlp_json.spans_from_document(doc, origin)
    elif isinstance(doc.get("result"), Mapping) and "resourceSpans" in doc["result"]:
        yield from _otlp_json.spans_from_document(doc["result"], origin)  # Jaeger api/v3
    elif isinstance(doc.get("trace"), Mapping):
        yield from _otlp_json.spans_from_document(doc["trace"], origin)  # Tempo api/v2
    elif isinstance(doc.get("data"), list) or _jaeger_json.is_jaeger_trace(doc):
        for trace in _jaeger_json.traces_of(doc):
            yield from _jaeger_json.spans_from_trace(_otlp_json._obj(trace), origin)
    elif any(key in doc for key in _OTHER_SIGNALS):
        return  # OTLP logs, metrics or profiles: a valid file that holds no spans
    else:
        keys = ", ".join(sorted(map(str, doc))[:6]) or "none"
        raise MalformedTrace(f"its top-level keys ({keys}) are neither OTLP's resourceSpans nor Jaeger's data/spans")

"""Length-prefixed records: the Collector file exporter's binary layout, and zstd.

With ``format: proto``, or with ``format: json`` plus ``compression: zstd``, the
Collector's file exporter writes each batch as a 4-byte big-endian length and
that many bytes: a ``TracesData`` protobuf message, or OTLP/JSON, each one
optionally a zstd frame of its own. A whole file may also be one zstd stream
(a rotated file compressed afterwards); ``_sources`` unwraps that before
anything here looks at it.

Records are read one at a time, so memory holds the largest record, never the
file. A record that does not hold the needle is skipped without being decoded
(after decompressing it, when it is compressed: the needle is in the plain bytes).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Final

from ._limits import Inflation
from ._zstd import MAGIC as ZSTD_MAGIC
from ._zstd import ZstdError, inflate

PREFIX_BYTES: Final = 4
# A single batch larger than this is not something a Collector writes (its gRPC
# receiver stops at 4 MiB by default); a larger length means the bytes are not
# records at all, and reading that many would only exhaust memory.
MAX_RECORD_BYTES: Final = 256 << 20
# The first byte of a serialized TracesData: field 1 (resource_spans), length-delimited.
PROTO_FIRST_BYTE: Final = 0x0A


class RecordError(Exception):
    """A record that cannot be read; ``offset`` is where it starts in the (plain) file."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


class CutShort(RecordError):
    """The file ends inside a record: the writer was stopped while writing it."""


def looks_like_records(head: bytes) -> bool:
    """Whether the first bytes of a file are a length prefix and the start of a record."""
    if len(head) < PREFIX_BYTES + 1:
        return False
    size = int.from_bytes(head[:PREFIX_BYTES], "big")
    if not 0 < size <= MAX_RECORD_BYTES:
        return False
    body = head[PREFIX_BYTES:]
    return body.startswith(ZSTD_MAGIC) or body[0] == PROTO_FIRST_BYTE or body[:1] == b"{"


def records(stream: IO[bytes], inflation: Inflation | None = None) -> Iterator[tuple[int, int, bytes]]:
    """``(record number from 1, byte offset, plain bytes)`` for each record of the stream.

    ``inflation`` counts what the zstd records inflate to, across the file: each
    record is bounded on its own, but thousands of them would not be.
    """
    offset, number = 0, 0
    while True:
        prefix = stream.read(PREFIX_BYTES)
        if not prefix:
            return
        number += 1
        if len(prefix) < PREFIX_BYTES:
            raise CutShort(f"record {number} ends inside its 4-byte length", offset)
        size = int.from_bytes(prefix, "big")
        if size > MAX_RECORD_BYTES:
            raise RecordError(
                f"record {number} claims {size} bytes, more than the {MAX_RECORD_BYTES >> 20} MiB any batch holds, "
                "so the file is damaged from there on",
                offset,
            )
        body = stream.read(size)
        if len(body) < size:
            raise CutShort(f"record {number} ends after {len(body)} of its {size} bytes", offset)
        if body.startswith(ZSTD_MAGIC):
            body = _inflate(body, number, offset, inflation)
        yield number, offset, body
        offset += PREFIX_BYTES + size


def _inflate(frame: bytes, number: int, offset: int, inflation: Inflation | None) -> bytes:
    try:
        return inflate(frame, MAX_RECORD_BYTES, inflation)
    except (ZstdError, EOFError) as exc:
        raise RecordError(f"record {number} is not a whole zstd frame ({exc})", offset) from None

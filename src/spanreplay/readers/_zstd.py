"""zstd, read in bounded steps: whole-file streams and the Collector's per-record frames.

``zstandard``'s own readers stop quietly at a frame that was cut short, and a
single call may inflate a small crafted frame to gigabytes. Here input is fed a
few kilobytes at a time, so no step produces more than a bounded amount, and a
stream that ends inside a frame raises ``ZstdCutShort`` (an ``EOFError``, as
``gzip`` raises) instead of passing for a complete file.
"""

from __future__ import annotations

import io
from typing import IO, Any, Final

import zstandard

from ._limits import Inflation

MAGIC: Final = b"\x28\xb5\x2f\xfd"
# Input fed per step. zstd inflates at most ~32768:1 (run-length blocks), so one
# step yields at most ~128 MiB even from a hostile frame; real JSON yields ~40 KiB.
_FEED: Final = 4096

ZstdError = zstandard.ZstdError


class ZstdCutShort(EOFError):
    """The input ends inside a zstd frame: the writer was stopped while writing it."""


def inflate(frame: bytes, limit: int, inflation: Inflation | None = None) -> bytes:
    """The plain bytes of one or more whole zstd frames; ZstdError past ``limit`` bytes or when cut short.

    ``inflation``: the file's running count, which raises TooInflated past its caps.
    """
    stream = ZstdStream(io.BytesIO(frame))
    if inflation is not None:
        inflation.add(len(frame), 0)
    out = bytearray()
    while True:
        piece = stream.read(1 << 20)
        if not piece:
            return bytes(out)
        out += piece
        if inflation is not None:
            inflation.add(0, len(piece))
        if len(out) > limit:
            raise ZstdError(f"it inflates past {limit >> 20} MiB")


class ZstdStream(io.RawIOBase):
    """The plain bytes of a zstd stream of one or more frames, as a readable raw stream."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor()
        self._frame = self._decompressor.decompressobj()
        self._in_frame = False  # bytes of the current frame were fed and it has not ended
        self._pending = memoryview(b"")
        self._unused = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            data = self._unused or self._raw.read(_FEED)
            self._unused = b""
            if not data:
                if self._in_frame:
                    raise ZstdCutShort("the zstd stream ends in the middle of a frame")
                return 0
            if len(data) > _FEED:  # what was left after a frame ended: feed it in steps too
                data, self._unused = data[:_FEED], data[_FEED:]
            self._in_frame = True
            self._pending = memoryview(self._frame.decompress(data))
            if self._frame.eof:
                # The frame ended: what follows is the next frame (or trailing garbage,
                # which the next decompressor refuses).
                self._unused = self._frame.unused_data + self._unused
                self._frame = self._decompressor.decompressobj()
                self._in_frame = False
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

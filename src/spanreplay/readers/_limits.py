"""How much a trace line and a trace file may hold once decompressed, and the wording of the limits.

A line is parsed whole, so it is held whole: a few kilobytes of gzip or zstd can
inflate to one line of gigabytes, and reading it to its end would exhaust memory.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import IO, Any, Final

from .._environment import byte_size, environment

# Lines of a trace file run to tens of kilobytes: read through a buffer of a megabyte.
BUFFER: Final = 1 << 20
# A span is kilobytes and a Collector's batch of them megabytes: no real line comes
# near this, and a line this long already takes gigabytes to parse.
DEFAULT_MAX_LINE_BYTES: Final = 256 << 20
LINE_LIMIT: Final = "SPANREPLAY_MAX_LINE_BYTES"
FILE_LIMIT: Final = "SPANREPLAY_MAX_FILE_BYTES"


@dataclass(frozen=True, slots=True)
class Limits:
    """What one line and one file may hold once decompressed, in bytes; None: no limit."""

    line: int | None
    file: int | None


def limits() -> Limits:
    """The limits the environment sets (read each time: a long-running process may change them).

    Raises:
        ConfigurationError: a limit that is not a size.
    """
    env = environment()
    line = byte_size(env.max_line_bytes, LINE_LIMIT, DEFAULT_MAX_LINE_BYTES)
    file = byte_size(env.max_file_bytes, FILE_LIMIT, 0)
    return Limits(line=line or None, file=file or None)


def size_text(limit: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift and not limit % (1 << shift):
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"


def raised(variable: str, limit: int) -> str:
    """The setting that raises a limit fourfold, or lifts it."""
    larger = limit * 4
    for suffix, shift in (("G", 30), ("M", 20), ("K", 10)):
        if not larger % (1 << shift):
            return f"{variable}={larger >> shift}{suffix}, or 0 for none"
    return f"{variable}={larger}, or 0 for none"


def inflated(compression: str) -> str:
    return f" once its {compression} is decompressed" if compression else ""


class FileTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} bytes")
        self.limit = limit


class Capped(io.RawIOBase):
    """The bytes of a stream, raising FileTooLarge past ``limit`` of them."""

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        self._inner = inner
        self._limit = limit
        self._read = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size: int = self._inner.readinto(buffer)  # type: ignore[attr-defined]
        self._read += size
        if self._read > self._limit:
            raise FileTooLarge(self._limit)
        return size


def capped(stream: IO[bytes], limit: int | None) -> IO[bytes]:
    # Only with a limit: the extra layer costs a copy of every block.
    return stream if limit is None else io.BufferedReader(Capped(stream, limit), BUFFER)

"""How much a trace line and a trace file may hold once decompressed, and the wording of the limits.

A line is parsed whole, so it is held whole: a few kilobytes of gzip or zstd can
inflate to one line of gigabytes, and reading it to its end would exhaust memory.

A compressed file is also bounded in the work it costs: a few hundred kilobytes
of zstd can inflate to gigabytes of valid lines, each parsed, and hold a
directory scan for minutes. So what a gzip or zstd file inflates to is capped
(``SPANREPLAY_MAX_INFLATED_BYTES``), and so is how many plain bytes it yields per
compressed byte (``SPANREPLAY_MAX_INFLATE_RATIO``) once it has yielded
``RATIO_FROM``: trace JSON compresses about 10:1, and even runs of near-identical
spans stay under 200:1 at zstd's default level, while a bomb inflates by thousands.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import IO, Any, Final

from spanreplay._environment import byte_size, environment
from spanreplay.errors import ConfigurationError

# Lines of a trace file run to tens of kilobytes: read through a buffer of a megabyte.
BUFFER: Final = 1 << 20
# A span is kilobytes and a Collector's batch of them megabytes: no real line comes
# near this, and a line this long already takes gigabytes to parse.
DEFAULT_MAX_LINE_BYTES: Final = 256 << 20
LINE_LIMIT: Final = "SPANREPLAY_MAX_LINE_BYTES"
FILE_LIMIT: Final = "SPANREPLAY_MAX_FILE_BYTES"
# A compressed trace file inflates to a few times a plain one's size: gigabytes are an
# export of weeks, and past this one file costs minutes to read.
DEFAULT_MAX_INFLATED_BYTES: Final = 4 << 30
INFLATED_LIMIT: Final = "SPANREPLAY_MAX_INFLATED_BYTES"
DEFAULT_MAX_INFLATE_RATIO: Final = 200
RATIO_LIMIT: Final = "SPANREPLAY_MAX_INFLATE_RATIO"
# The ratio is judged once this much is inflated: the start of a stream (headers, the
# reader's first block) says little, and this much costs well under a second to read.
RATIO_FROM: Final = 16 << 20
_RATIO: Final = re.compile(r"([0-9]{1,9})(?:\s*:\s*1)?")


@dataclass(frozen=True, slots=True)
class Limits:
    """What one line and one file may hold once decompressed, in bytes; None: no limit.

    ``inflated`` and ``ratio`` hold gzip and zstd files alone: the most bytes one
    inflates to, and the most plain bytes per compressed byte past ``RATIO_FROM``.
    """

    line: int | None
    file: int | None
    inflated: int | None = DEFAULT_MAX_INFLATED_BYTES
    ratio: int | None = DEFAULT_MAX_INFLATE_RATIO


def limits() -> Limits:
    """The limits the environment sets (read each time: a long-running process may change them).

    Raises:
        ConfigurationError: a limit that is not a size.
    """
    env = environment()
    line = byte_size(env.max_line_bytes, LINE_LIMIT, DEFAULT_MAX_LINE_BYTES)
    file = byte_size(env.max_file_bytes, FILE_LIMIT, 0)
    inflated = byte_size(env.max_inflated_bytes, INFLATED_LIMIT, DEFAULT_MAX_INFLATED_BYTES)
    ratio = _ratio(env.max_inflate_ratio)
    return Limits(line=line or None, file=file or None, inflated=inflated or None, ratio=ratio or None)


def _ratio(text: str) -> int:
    if not text:
        return DEFAULT_MAX_INFLATE_RATIO
    match = _RATIO.fullmatch(text)
    if match is None:
        raise ConfigurationError(
            f"{RATIO_LIMIT} is {text!r}, not a ratio; write a whole number of plain bytes per compressed byte, "
            f"such as 1000 (or 1000:1), or 0 for no limit."
        )
    return int(match[1])


def size_text(limit: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift and not limit % (1 << shift):
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"


def _about(size: int) -> str:
    """A count of bytes read, to a tenth of its unit."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift:
            return f"{size / (1 << shift):.1f} {unit}"
    return f"{size} bytes"


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


class TooInflated(Exception):
    """A compressed stream past the inflated-size cap (``ratio`` False) or the ratio cap (True)."""

    def __init__(self, limit: int, *, ratio: bool, inflated: int, compressed: int) -> None:
        super().__init__(f"inflated {inflated} bytes from {compressed}")
        self.limit = limit
        self.ratio = ratio
        self.inflated = inflated
        self.compressed = compressed

    def sentence(self, shown: str, compression: str) -> str:
        """The refusal, naming the file, the cap, what was read and the setting that raises it."""
        if self.ratio:
            return (
                f"{shown} inflates to more than {self.limit} times its size once its {compression} is decompressed "
                f"({_about(self.inflated)} from the first {_about(self.compressed)}), past the limit "
                f"{RATIO_LIMIT} sets; trace files compress far less, so it is damaged or was made to hold up the "
                f"readers. If it is a real trace, raise the limit ({RATIO_LIMIT}={self.limit * 4}, or 0 for none) "
                "and read it again."
            )
        return (
            f"{shown} inflates to more than {size_text(self.limit)} once its {compression} is decompressed, past "
            f"the limit {INFLATED_LIMIT} sets; if it is a real trace, raise the limit "
            f"({raised(INFLATED_LIMIT, self.limit)}) and read it again."
        )


class Inflation:
    """What one compressed file has inflated to so far, against its caps."""

    def __init__(self, limits: Limits) -> None:
        self._file = limits.file
        self._most = limits.inflated
        self._ratio = limits.ratio
        self.compressed = 0
        self.inflated = 0

    def add(self, compressed: int, inflated: int) -> None:
        """Count bytes read from the file and bytes they inflated to; TooInflated past a cap."""
        self.compressed += compressed
        self.inflated += inflated
        # The file limit first: one step can inflate past it and a cap at once, and it
        # is the limit the user set for every file.
        if self._file is not None and self.inflated > self._file:
            raise FileTooLarge(self._file)
        if self._most is not None and self.inflated > self._most:
            raise TooInflated(self._most, ratio=False, inflated=self.inflated, compressed=self.compressed)
        if (
            self._ratio is not None
            and self.inflated > RATIO_FROM
            and self.inflated > self._ratio * max(self.compressed, 1)
        ):
            raise TooInflated(self._ratio, ratio=True, inflated=self.inflated, compressed=self.compressed)


class Compressed(io.RawIOBase):
    """The compressed bytes of a file, counted into an ``Inflation`` as they are read."""

    def __init__(self, inner: IO[bytes], inflation: Inflation) -> None:
        self._inner = inner
        self._inflation = inflation

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(buffer))
        buffer[: len(data)] = data
        self._inflation.add(len(data), 0)
        return len(data)


class Inflated(io.RawIOBase):
    """The plain bytes of a decompressing stream, counted into an ``Inflation``."""

    def __init__(self, inner: IO[bytes], inflation: Inflation) -> None:
        # One step at a time (readinto1 of a buffered reader such as GzipFile): filling a
        # whole buffer would run into a cut-short stream's EOFError before handing on
        # the lines it decompressed.
        self._step = getattr(inner, "readinto1", None) or inner.readinto  # type: ignore[attr-defined]
        self._inflation = inflation

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size: int = self._step(buffer)
        self._inflation.add(0, size)
        return size

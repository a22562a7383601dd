"""Streaming the lines of a JSON-lines file, keeping only those that hold a needle.

Filtering one run out of a Collector export of many runs is the loader's hot
path. Looking at every line from Python costs more than the search itself, so
the file is read in large blocks and a substring search jumps from one
occurrence of the needle to the next: lines without it are never copied, split
or parsed. Memory holds one block plus the longest line, whatever the file's size.

What is left is reading each block and searching it. From the page cache a read
is a memory copy, and ``bytes.find`` searches slower than that copy, so it would
cost more than the read; StringZilla's SIMD search runs faster than the copy, so
filtering costs little more than reading (the figures are in benchmarks/README.md).
Mapping the file instead of reading it was measured slower: faulting the pages in
costs more than copying them.

Filtered lines are located by byte offset, not line number: counting the
newlines of the skipped text would take longer than finding the needle in it.
``line_number`` turns an offset into a line number where a message needs one.

A line longer than the caller's limit raises ``LineTooLong`` as soon as that many
bytes are read, before it is whole: a small compressed file can inflate to one
line of many gigabytes, and holding it would exhaust memory.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import IO

import stringzilla

BLOCK_BYTES = 1 << 20
_NL = b"\n"


class LineTooLong(Exception):
    """A line longer than the limit: ``lineno`` or ``offset`` (where it starts) says which."""

    def __init__(self, limit: int, *, lineno: int | None = None, offset: int | None = None) -> None:
        super().__init__(f"a line longer than {limit} bytes")
        self.limit = limit
        self.lineno = lineno
        self.offset = offset


def numbered_lines(
    stream: IO[bytes], *, start: int = 1, head: bytes = b"", limit: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` for every line; ``head`` is line ``start``, already read.

    ``limit``: the most bytes a line may hold, its newline included (None: no limit).
    """
    if head:
        yield start, head
        start += 1
    if limit is None:
        yield from enumerate(stream, start)
        return
    for number, line in enumerate(iter(functools.partial(stream.readline, limit + 1), b""), start):
        if len(line) > limit:
            raise LineTooLong(limit, lineno=number)
        yield number, line


def matching_lines(
    stream: IO[bytes], needle: bytes, *, offset: int = 0, head: bytes = b"", limit: int | None = None
) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, line)`` for each line that contains ``needle``.

    Lines keep their ``\\n``; a last line without one was cut short or simply
    not terminated, which the caller tells apart. ``head`` is one whole line
    already read from the stream, starting at ``offset``. The needle must not
    be empty nor contain a newline. ``limit``: as for ``numbered_lines``, for
    the lines that hold the needle and for any line that outruns a block.
    """
    if not needle or _NL in needle:
        raise ValueError(f"the needle must be non-empty bytes without a newline, not {needle!r}")
    if head:
        if needle in head:
            yield offset, head
        offset += len(head)
    yield from _matching_read_lines(stream, needle, offset, limit)


def _matching_read_lines(
    stream: IO[bytes], needle: bytes, offset: int, limit: int | None
) -> Iterator[tuple[int, bytes]]:
    """``matching_lines`` of what is left to read from ``stream``, which is at byte ``offset``."""
    most = BLOCK_BYTES if limit is None else limit
    partial: list[bytes] = []  # the start of a line that continues into the next block
    partial_at = offset  # where that line starts
    partial_size = 0
    while True:
        block = stream.read(BLOCK_BYTES)
        if not block:
            break
        base = offset  # the offset of block[0]
        offset += len(block)
        begin = 0
        if partial:
            first_end = block.find(_NL) + 1
            if not first_end:
                partial.append(block)  # inside one long line: wait for its end
                partial_size += len(block)
                if limit is not None and partial_size > limit:
                    raise LineTooLong(limit, offset=partial_at)
                continue
            # The line that straddles blocks: the only bytes ever joined.
            if limit is not None and partial_size + first_end > limit:
                raise LineTooLong(limit, offset=partial_at)
            partial.append(block[:first_end])
            line = b"".join(partial)
            partial = []
            if needle in line:
                yield partial_at, line
            begin = first_end
        end = block.rfind(_NL) + 1
        if end > begin:
            yield from _whole_lines_holding(block, needle, begin, end, base, most)
        else:
            end = begin
        if end < len(block):
            partial, partial_at = [block[end:]], base + end
            partial_size = len(block) - end
            if partial_size > most:
                raise LineTooLong(most, offset=partial_at)
    tail = b"".join(partial)
    if tail and needle in tail:
        yield partial_at, tail


def _whole_lines_holding(
    block: bytes, needle: bytes, begin: int, end: int, base: int, most: int
) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, line)`` for each line holding ``needle`` in ``block[begin:end]``, whole lines at ``base``."""
    # stringzilla.find is block.find(needle, start, end), by SIMD.
    hit: int = stringzilla.find(block, needle, begin, end)
    while hit != -1:
        line_start = block.rfind(_NL, begin, hit) + 1 or begin
        line_end = block.find(_NL, hit, end) + 1
        if line_end - line_start > most:  # only a limit below the block size
            raise LineTooLong(most, offset=base + line_start)
        yield base + line_start, block[line_start:line_end]
        hit = stringzilla.find(block, needle, line_end, end)


def line_number(stream: IO[bytes], offset: int) -> int:
    """The number of the line that starts at byte ``offset`` of ``stream`` (read from its start)."""
    newlines = 0
    while offset > 0:
        block = stream.read(min(BLOCK_BYTES, offset))
        if not block:
            break
        newlines += block.count(_NL)
        offset -= len(block)
    return newlines + 1


def peek(stream: IO[bytes], size: int) -> bytes:
    """Up to ``size`` bytes ahead in ``stream``, left unread; none from a stream that cannot peek."""
    ahead = getattr(stream, "peek", None)
    return bytes(ahead(size)) if ahead is not None else b""

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
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

import stringzilla

BLOCK_BYTES = 1 << 20
_NL = b"\n"


def numbered_lines(stream: IO[bytes], *, start: int = 1, head: bytes = b"") -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` for every line; ``head`` is line ``start``, already read."""
    if head:
        yield start, head
        start += 1
    yield from enumerate(stream, start)


def matching_lines(
    stream: IO[bytes], needle: bytes, *, offset: int = 0, head: bytes = b""
) -> Iterator[tuple[int, bytes]]:
    """``(byte offset, line)`` for each line that contains ``needle``.

    Lines keep their ``\\n``; a last line without one was cut short or simply
    not terminated, which the caller tells apart. ``head`` is one whole line
    already read from the stream, starting at ``offset``. The needle must not
    be empty nor contain a newline.
    """
    if not needle or _NL in needle:
        raise ValueError(f"the needle must be non-empty bytes without a newline, not {needle!r}")
    if head:
        if needle in head:
            yield offset, head
        offset += len(head)
    partial: list[bytes] = []  # the start of a line that continues into the next block
    partial_at = offset  # where that line starts
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
                continue
            # The line that straddles blocks: the only bytes ever joined.
            partial.append(block[:first_end])
            line = b"".join(partial)
            partial = []
            if needle in line:
                yield partial_at, line
            begin = first_end
        end = block.rfind(_NL) + 1
        if end > begin:
            # stringzilla.find is block.find(needle, start, end), by SIMD.
            hit: int = stringzilla.find(block, needle, begin, end)
            while hit != -1:
                line_start = block.rfind(_NL, begin, hit) + 1 or begin
                line_end = block.find(_NL, hit, end) + 1
                yield base + line_start, block[line_start:line_end]
                hit = stringzilla.find(block, needle, line_end, end)
        else:
            end = begin
        if end < len(block):
            partial, partial_at = [block[end:]], base + end
    tail = b"".join(partial)
    if tail and needle in tail:
        yield partial_at, tail


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

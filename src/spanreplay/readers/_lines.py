"""Streaming the lines of a JSON-lines file, keeping only those that hold a needle.

Filtering one run out of a Collector export of many runs is the loader's hot
path. Looking at every line from Python costs more than the search itself, so
the file is read in large blocks and ``bytes.find`` jumps from one occurrence of
the needle to the next: lines without it are never copied, split or parsed.
Memory holds one block plus the longest line, whatever the file's size.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

BLOCK_BYTES = 1 << 20
_NL = b"\n"


def matching_lines(
    stream: IO[bytes], needle: bytes | None, *, start: int = 1, head: bytes = b""
) -> Iterator[tuple[int, bytes]]:
    """``(line number, line)`` for each line that contains ``needle`` (every line when None).

    Lines keep their ``\\n``; a last line without one was cut short or simply
    not terminated, which the caller tells apart. ``head`` is one whole line
    already read from the stream (while sniffing), numbered ``start``.
    """
    if head:
        if needle is None or needle in head:
            yield start, head
        start += 1
    if needle is None:
        yield from enumerate(stream, start)
        return
    newlines = start - 1  # newlines before the first byte of `pending`
    pending: list[bytes] = []
    while True:
        block = stream.read(BLOCK_BYTES)
        if not block:
            break
        last_newline = block.rfind(_NL)
        if last_newline == -1:
            pending.append(block)  # inside one long line: wait for its end
            continue
        if pending:
            pending.append(block)
            buf = b"".join(pending)
            end = len(buf) - (len(block) - last_newline - 1)
        else:
            buf, end = block, last_newline + 1
        counted = 0  # buf[:counted] is included in `newlines`
        hit = buf.find(needle, 0, end)
        while hit != -1:
            line_start = buf.rfind(_NL, 0, hit) + 1
            line_end = buf.find(_NL, hit, end) + 1
            newlines += buf.count(_NL, counted, line_start)
            counted = line_start
            yield newlines + 1, buf[line_start:line_end]
            hit = buf.find(needle, line_end, end)
        newlines += buf.count(_NL, counted, end)
        pending = [buf[end:]] if end < len(buf) else []
    tail = b"".join(pending)
    if tail and needle in tail:
        yield newlines + 1, tail

"""Many texts scanned as one: the texts of a payload joined with NUL.

Asking a detector about each of a payload's strings costs a Python call per
string and per detector; a tool output of 250 records holds over a thousand
strings. A detector is *separable* when it finds in ``"\\x00".join(texts)``
exactly what it finds in each text alone, shifted: nothing it matches, and
nothing it looks at around a finding, can be a NUL, so a NUL between two texts
reads to it like the end of one and the start of the next. Such a detector runs
once over the joined texts. Others (a private key runs to the end of its text;
a detector of your own unless its expressions show otherwise) are asked text by
text.

A regular expression is separable when no part of it can match a NUL (no ``.``,
no negated class or ``\\D``, ``\\W``, ``\\S``) and it uses no anchor a NUL does
not stand in for (``^``, ``$``, ``\\A``, ``\\Z``); ``\\b`` and lookarounds are
fine (``_regex.shape_of`` tells).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from typing import Final

__all__ = ["SEPARATOR", "join", "split_windows", "starts_of"]

Window = tuple[int, int]

SEPARATOR: Final = "\x00"


def join(texts: Sequence[str]) -> str:
    return texts[0] if len(texts) == 1 else SEPARATOR.join(texts)


def starts_of(texts: Sequence[str]) -> list[int]:
    """Where each text starts in the joined texts, and one past the end of the last plus one."""
    # A comprehension of the lengths: faster than mapping (1).__add__ over them, which
    # calls through a method wrapper per text (a tool output holds thousands).
    return list(itertools.accumulate([len(text) + 1 for text in texts], initial=0))


def split_windows(windows: Iterable[Window], starts: Sequence[int]) -> dict[int, list[Window]]:
    """Windows over the joined texts, cut at the texts' ends: per text, in its own offsets."""
    out: dict[int, list[Window]] = {}
    last = len(starts) - 2
    for a, b in windows:
        k = bisect.bisect_right(starts, a) - 1
        while k <= last and starts[k] < b:
            base = starts[k]
            end = starts[k + 1] - 1
            lo = a - base if a > base else 0
            hi = (b if b < end else end) - base
            if lo < hi:
                out.setdefault(k, []).append((lo, hi))
            k += 1
    return out

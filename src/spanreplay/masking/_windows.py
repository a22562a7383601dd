"""Where the hyperscan gate lets a pattern look: windows around its prefilter's matches."""

from __future__ import annotations

from ._detector import Window
from ._hints import AFTER_ESCAPED, AFTER_PLAIN

__all__ = ["around", "before_ends", "unescaped"]


def unescaped(prefilter: str) -> str:
    """``prefilter`` for text that is not JSON-escaped: each ``after()`` boundary without
    the escape sequences it accepts for JSON text (in a plain string, the character
    before a finding is itself, never the last of an escape). Hyperscan scans the
    shorter form faster."""
    return prefilter.replace(AFTER_ESCAPED, AFTER_PLAIN)


def around(matches: list[Window], reach: int, n: int) -> list[Window]:
    """The prefilter matches widened by ``reach``, clipped to the text, overlaps merged."""
    matches.sort()
    out: list[Window] = []
    last = -1  # where the last window ends
    for start, end in matches:
        a = start - reach if start > reach else 0
        b = end + reach
        if b > n:
            b = n
        if a > last:
            out.append((a, b))
            last = b
        elif b > last:
            out[-1] = (out[-1][0], b)
            last = b
    return out


def before_ends(ends: list[int], lead: int, reach: int, n: int) -> list[Window]:
    """Windows for prefilter matches known by their ends alone: from ``lead`` before
    each end (the widest match, and ``reach``) to ``reach`` after it, clipped to the
    text, overlaps merged. Each holds the window ``around`` makes of the match."""
    ends.sort()  # hyperscan reports them in order: one pass
    out: list[Window] = []
    last = -lead - 1  # where the last window ends: before any window here, at first
    for end in ends:
        a = end - lead
        b = end + reach
        if a > last:
            out.append((a, b))
        else:
            out[-1] = (out[-1][0], b)
        last = b
    # Every window is as wide as the next, so they start and end in order: only the
    # first can start before the text, and only the last end past it.
    if out[0][0] < 0:
        out[0] = (0, out[0][1])
    if last > n:
        out[-1] = (out[-1][0], n)
    return out

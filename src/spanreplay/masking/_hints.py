"""Engine hints: what lets the gates ask a detector less often, kept off its public shape.

A detector, as written, is a pattern plus an optional check (see ``_detector``).
How often it is asked is the gates' business, and rests on hints:

- ``min_length``: the shortest text it can find anything in;
- ``literals``: strings of which one occurs in any text it finds something in;
- ``prefilter`` (hyperscan syntax) and ``reach``: where the hyperscan gate looks;
- ``separable``: it finds in texts joined with NUL what it finds in each alone.

A wrong hint skips a finding, and a prefilter on one engine only. So hints are
*derived* from a detector's expressions wherever that can be done soundly
(``min_length``, ``literals``, ``separable``; see ``_regex``), and the two that
cannot (``prefilter``, ``reach``) are set only on the built-in detectors, which
the differential tests hold to the plain scan on both engines. A detector of
your own has no prefilter: both gates ask it through its derived literals.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from spanreplay.errors import ConfigurationError

from ._regex import first_characters, shape_of

__all__ = [
    "AFTER_ESCAPED",
    "AFTER_PLAIN",
    "OLD_HINTS",
    "UNHINTED",
    "DetectorHints",
    "PatternHints",
    "after",
    "before",
    "combined",
    "derived",
    "hints_of",
    "with_hints",
]


@dataclass(frozen=True, slots=True)
class PatternHints:
    """What the gates know of one expression.

    Attributes:
        literals: one of these occurs in any text the expression matches in; ``()``
            when no such set is known.
        min_width: no match is shorter.
        separable: see ``_joined``.
        prefilter: hyperscan syntax, matching near every hit, in plain and in
            JSON-escaped text; built-in detectors only.
        reach: with a prefilter: every hit (and what its lookarounds read) lies within
            ``reach`` characters of a prefilter match.
    """

    literals: tuple[str, ...] = ()
    min_width: int = 0
    separable: bool = False
    prefilter: str | None = None
    reach: int | None = None


@dataclass(frozen=True, slots=True)
class DetectorHints:
    """What the gates know of one detector (see the module's docstring)."""

    min_length: int = 1
    literals: tuple[str, ...] = ()
    prefilter: str | None = None
    separable: bool = False


# A detector nothing is known of: asked about every string, one at a time.
UNHINTED: Final = DetectorHints()

# The fields a detector could carry before hints were derived; now ignored.
OLD_HINTS: Final = ("min_length", "literals", "prefilter", "reach", "separable")


def hints_of(detector: object) -> DetectorHints:
    """The hints of ``detector``: its own when it is one of ours, else none at all."""
    hints = getattr(detector, "hints", None)
    return hints if isinstance(hints, DetectorHints) else UNHINTED


def derived(regex: re.Pattern[str], *, refine: bool) -> PatternHints:
    """The hints an expression's parse tree vouches for. ``refine``: a refine callback
    of the user's own, which may read anything in the text (not separable)."""
    shape = shape_of(regex)
    return PatternHints(
        literals=first_characters(regex),
        min_width=shape.min_width,
        separable=shape.separable and not refine,
    )


def combined(patterns: Sequence[PatternHints], min_length: int | None = None) -> DetectorHints:
    """A detector's hints from its patterns' (any of which may find something)."""
    literals: tuple[str, ...] = (
        () if any(not p.literals for p in patterns) else tuple(dict.fromkeys(x for p in patterns for x in p.literals))
    )
    return DetectorHints(
        min_length=min_length if min_length is not None else max(1, min(p.min_width for p in patterns)),
        literals=literals,
        prefilter=(
            None if any(p.prefilter is None for p in patterns) else "|".join(f"(?:{p.prefilter})" for p in patterns)
        ),
        separable=all(p.separable for p in patterns),
    )


def with_hints(
    hints: PatternHints,
    *,
    prefilter: str | None = None,
    reach: int | None = None,
    literals: Iterable[str] | None = None,
    separable: bool | None = None,
) -> PatternHints:
    """``hints`` with a built-in pattern's own: its prefilter, reach and literals."""
    if reach is not None and (prefilter is None or reach < 1):
        raise ConfigurationError(f"reach={reach} needs a prefilter to reach from, and must be at least 1.")
    return replace(
        hints,
        prefilter=prefilter,
        reach=reach,
        literals=hints.literals if literals is None else tuple(literals),
        separable=hints.separable if separable is None else separable,
    )


# --- prefilter boundaries --------------------------------------------------------------

# In JSON text a newline is the two characters "\n", so the character before a
# finding can read as a letter ("n", "t", ...) or a hex digit ("\u001f") there.
_ESCAPE_END: Final = r"\\[bfnrt]|\\u00[0-9a-fA-F]{2}"
# The end of each ``after()`` boundary, with the part that is there for JSON text alone.
AFTER_ESCAPED: Final = "]|" + _ESCAPE_END + ")"
AFTER_PLAIN: Final = "])"


def after(excluded: str) -> str:
    """Prefilter syntax for "at the start, or after a character not in ``[excluded]``".

    It holds in plain text and in JSON-escaped text, so one prefilter serves the
    gate that reads a whole serialized payload and the one that reads strings.
    """
    return rf"(?:^|[^{excluded}]|{_ESCAPE_END})"


def before(excluded: str) -> str:
    """Prefilter syntax for "at the end, or before a character not in ``[excluded]``"."""
    return rf"(?:[^{excluded}]|$)"

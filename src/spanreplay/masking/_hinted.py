"""Built-in detectors with engine hints: the one place a prefilter or a reach is set.

A built-in expression carries, besides what its parse tree vouches for (see
``_hints.derived``), a hyperscan prefilter, the reach of its hits around that
prefilter's matches, and its literals; a built-in detector, its shortest text.
The differential tests hold every built-in detector to the plain scan of its
expressions on both engines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from ._detector import Check, Pattern, Refine, RegexDetector
from ._hints import combined, with_hints

__all__ = ["hinted", "hinted_detector"]


def hinted(  # noqa: PLR0913 -- Pattern's keywords plus the four engine hints, passed by name by every built-in detector
    regex: str | re.Pattern[str],
    *,
    prefilter: str | None = None,
    reach: int | None = None,
    literals: Iterable[str] | None = None,
    group: int | str = 0,
    check: Check | None = None,
    refine: Refine | None = None,
    separable: bool | None = None,
) -> Pattern:
    """A built-in ``Pattern`` with its hints. ``separable``: True for a refine of ours
    that reads no further than one character past the span it is given."""
    pattern = Pattern(regex, group=group, check=check, refine=refine)
    pattern.hints = with_hints(pattern.hints, prefilter=prefilter, reach=reach, literals=literals, separable=separable)
    return pattern


def hinted_detector(
    name: str,
    patterns: Pattern | Sequence[Pattern],
    *,
    min_length: int | None = None,
    pseudonymize: bool = True,
    normalize: Callable[[str], str] | None = None,
) -> RegexDetector:
    """A built-in ``RegexDetector`` of hinted patterns, with its shortest text (by default,
    its expressions' shortest match)."""
    detector = RegexDetector(name, patterns, pseudonymize=pseudonymize, normalize=normalize)
    detector.hints = combined([p.hints for p in detector.patterns], min_length)
    return detector

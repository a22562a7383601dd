"""The detector contract: what finds secrets and personal data in a piece of text.

A detector is an object with a ``name`` (the rule name recorded on the span and
the label of its placeholder), ``pseudonymize``, ``normalize(found)`` and a
``__call__(text)`` that yields the ``(start, end)`` of each thing it finds.
Nothing else on it is read: how often the gates ask it is derived (see
``_hints``), so no field of a detector of your own can make one engine skip it.

Most detectors are ``RegexDetector``s: one or more ``Pattern``s, each a regular
expression plus an optional check of each hit (Luhn, mod 97, digit counts). A
pattern's hits are found by scanning left to right: at each position where the
expression matches and the check accepts, the hit is taken and the scan resumes
after it; where the check rejects, the scan resumes one character on. The
hyperscan gate may run a built-in expression in small windows around its
prefilter's matches only and gets the same hits (see ``Pattern.spans``).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, runtime_checkable

from spanreplay.errors import ConfigurationError

from ._hints import OLD_HINTS, DetectorHints, PatternHints, combined, derived
from ._regex import shape_of

__all__ = ["Check", "Detector", "Pattern", "Refine", "RegexDetector", "Span", "Window", "warn_old_hints"]

Span = tuple[int, int]
Window = tuple[int, int]


@runtime_checkable
class Detector(Protocol):
    """What the masking pipeline asks of a detector.

    Attributes:
        name: the rule name recorded on the span, and the placeholder's label
            (``<email:3f9a2c1b07d4e85a>``): lower case letters, digits and ``_``.
        pseudonymize: True for personal data (a keyed token, so equal values stay
            equal); False for credentials, which always become a plain placeholder.
    """

    name: str
    pseudonymize: bool

    def __call__(self, text: str) -> Iterable[Span]:
        """The ``(start, end)`` of each finding in ``text``."""
        ...

    def normalize(self, found: str) -> str:
        """The canonical form of a finding, hashed into its pseudonym (so ``A@X.com`` == ``a@x.com``)."""
        ...


Check = Callable[[str], bool]
Refine = Callable[[str, int, int], Span | None]


def _warn_hints(where: str, **given: object) -> None:
    old = [name for name, value in given.items() if value is not None]
    if old:
        warnings.warn(
            f"{where} was given {', '.join(f'{name}=' for name in old)}: engine hints are deprecated "
            "and ignored, since a wrong one made an engine skip what the detector finds. What the "
            "engines need is derived from the expression; remove the argument.",
            DeprecationWarning,
            stacklevel=3,
        )


def warn_old_hints(detector: object) -> None:
    """Warn when a detector of the user's own carries fields that once were engine hints."""
    old = [name for name in OLD_HINTS if hasattr(detector, name)]
    if old:
        warnings.warn(
            f"Detector {getattr(detector, 'name', detector)!r} has {', '.join(old)}: engine hints are "
            "deprecated and ignored, since a wrong one made an engine skip what the detector finds. "
            "The detector is asked about every string; remove the attributes.",
            DeprecationWarning,
            stacklevel=3,
        )


class Pattern:
    """One regular expression of a detector, and an optional check of each hit.

    Args:
        regex: the expression (compiled with ``re.ASCII`` when given as text). It must
            run in linear time: prefer possessive quantifiers and bounded repeats.
        group: the group whose span is the finding (the whole match by default).
        check: called with the finding's text; False rejects the hit.
        refine: called with the text and the finding's span; returns the span to
            mask or None to reject the hit. A pattern with a ``refine`` is asked
            text by text (it may read anything in the text).
        prefilter, reach, literals: deprecated and ignored (a ``DeprecationWarning``):
            what the engines need is derived from ``regex``.
    """

    __slots__ = ("check", "extent", "group", "hints", "refine", "regex")

    def __init__(
        self,
        regex: str | re.Pattern[str],
        *,
        group: int | str = 0,
        check: Check | None = None,
        refine: Refine | None = None,
        prefilter: str | None = None,
        reach: int | None = None,
        literals: Iterable[str] | None = None,
    ) -> None:
        self.regex = re.compile(regex, re.ASCII) if isinstance(regex, str) else regex
        _warn_hints(f"Pattern({self.regex.pattern!r})", prefilter=prefilter, reach=reach, literals=literals)
        self.group = group
        self.check = check
        self.refine = refine
        # What the gates may assume of this expression: only what its parse tree says.
        # The built-in detectors add their own prefilters (see ``_hints``).
        self.hints: PatternHints = derived(self.regex, refine=refine is not None)
        self.extent = shape_of(self.regex).extent

    def __repr__(self) -> str:
        return f"Pattern({self.regex.pattern!r})"

    def spans(self, text: str, windows: Sequence[Window] | None = None) -> list[Span]:
        """The hits in ``text``; with ``windows`` (sorted, apart), only those inside them.

        Windows built from the prefilter matches widened by ``reach`` give exactly
        the hits of a whole-text scan. A search inside a window sees the text end
        at a cut: the window's end, or ``reach`` past it for an expression of
        unbounded width. The cut can change only a match whose attempt read up
        to it (a lookahead that looked past it, a run it stopped): one that
        starts less than the expression's extent before the cut (or, for an
        expression of unbounded width, ends within ``reach`` of it) is matched
        again against the whole text. A match that starts past the window's end
        is left to the window it lies in.
        """
        search = self.regex.search
        rematch = self.regex.match
        check = self.check
        group = self.group
        refine = self.refine
        n = len(text)
        extent = self.extent
        # No match fits in fewer characters: the rest of a window shorter than
        # this is not searched.
        shortest = self.hints.min_width or 1
        last = 0
        found: list[Span] = []
        reach = self.hints.reach or 0
        # An expression of unbounded width searches each window with the text cut
        # ``reach`` past the window's end: a match that starts inside the window then
        # reads past the cut only when it is longer than any hit, so a hit is not
        # matched a second time against the whole text.
        margin = reach if extent is None else 0
        for a, b in windows if windows is not None else ((0, n),):
            pos = a if a > last else last
            cut = b + margin if b + margin < n else n
            while b - pos >= shortest:
                match = search(text, pos, cut)
                if match is None:
                    break
                at, after = match.span()
                if at >= b:
                    break
                if cut < n and (after > cut - reach if extent is None else at + extent > cut):
                    match = rematch(text, at)
                    if match is None:
                        pos = at + 1
                        continue
                    after = match.end()
                if group:
                    start, end = match.span(group)
                else:
                    start = at
                    end = after
                if start < end and (check is None or check(text[start:end])):
                    span = (start, end) if refine is None else refine(text, start, end)
                    if span is not None:
                        found.append(span)
                        # Past what was masked, not past the match: a refine that kept
                        # only the start of a match leaves the rest to be searched.
                        last = pos = span[1] if span[1] > at else after
                        continue
                pos = at + 1
        return found


def _identity(text: str) -> str:
    return text


class RegexDetector:
    """A detector made of one or more ``Pattern``s.

    ``RegexDetector("ticket_id", r"TCK-[0-9]{8}+")`` is a detector of your own; add
    ``check=`` to reject hits a checksum or a count rules out.

    Args:
        name: rule name and placeholder label.
        pattern: an expression, a ``Pattern``, or a list of ``Pattern``s for several.
        pseudonymize: see ``Detector``.
        normalize: the canonical form of a finding for its pseudonym.
        group, check, refine: for a single expression, see ``Pattern``.
        min_length, prefilter, reach, literals: deprecated and ignored (a
            ``DeprecationWarning``): what the engines need is derived from the expressions.
    """

    def __init__(  # noqa: PLR0913 -- public keyword options since 0.1; grouping them would break every user's detector
        self,
        name: str,
        pattern: str | re.Pattern[str] | Pattern | Sequence[Pattern],
        *,
        pseudonymize: bool = True,
        normalize: Callable[[str], str] | None = None,
        group: int | str = 0,
        check: Check | None = None,
        refine: Refine | None = None,
        min_length: int | None = None,
        prefilter: str | None = None,
        reach: int | None = None,
        literals: Iterable[str] | None = None,
    ) -> None:
        _warn_hints(
            f"RegexDetector({name!r})", min_length=min_length, prefilter=prefilter, reach=reach, literals=literals
        )
        if isinstance(pattern, (str, re.Pattern)):
            patterns: tuple[Pattern, ...] = (Pattern(pattern, group=group, check=check, refine=refine),)
        elif isinstance(pattern, Pattern):
            patterns = (pattern,)
        else:
            patterns = tuple(pattern)
        if not patterns:
            raise ConfigurationError(f"RegexDetector {name!r} has no pattern.")
        self.name = name
        self.patterns = patterns
        self.pseudonymize = pseudonymize
        self._normalize = normalize or _identity
        self.hints: DetectorHints = combined([p.hints for p in patterns])

    def __repr__(self) -> str:
        return f"RegexDetector({self.name!r}, {[p.regex.pattern for p in self.patterns]!r})"

    def __call__(self, text: str) -> list[Span]:
        found: list[Span] = []
        for pattern in self.patterns:
            literals = pattern.hints.literals
            if literals and not any(lit in text for lit in literals):
                continue
            found += pattern.spans(text)
        return found

    def locate(self, text: str, windows: Sequence[Sequence[Window] | None]) -> list[Span]:
        """The same findings as ``self(text)``, given each pattern's windows (None: scan it all)."""
        if len(windows) == 1:
            (only,) = windows
            return self(text) if only is None else self.patterns[0].spans(text, only) if only else []
        found: list[Span] = []
        for pattern, pattern_windows in zip(self.patterns, windows, strict=True):
            if pattern_windows is None:
                literals = pattern.hints.literals
                if literals and not any(lit in text for lit in literals):
                    continue
                found += pattern.spans(text)
            elif pattern_windows:
                found += pattern.spans(text, pattern_windows)
        return found

    def normalize(self, found: str) -> str:
        return self._normalize(found)

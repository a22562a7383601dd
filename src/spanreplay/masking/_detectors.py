"""Detectors: callables that find secrets and personal data in a piece of text.

A detector is an object with a ``name`` (the rule name recorded on the span and
the label of its placeholder) and a ``__call__(text)`` that yields the
``(start, end)`` of each thing it finds. Everything else on it is a hint that
lets the pipeline ask it less often: ``min_length``, ``literals`` (one of them
occurs in any text it finds something in) and ``prefilter`` (a pattern that the
hyperscan engine looks for first). Hints never change what a detector finds.

Most built-in detectors are ``RegexDetector``s: one or more ``Pattern``s, each a
regular expression plus an optional check of each hit (Luhn, mod 97, digit
counts). A pattern's hits are found by scanning left to right: at each position
where the expression matches and the check accepts, the hit is taken and the scan
resumes after it; where the check rejects, the scan resumes one character on.
Because a pattern with a ``reach`` only ever finds things within ``reach``
characters of a match of its ``prefilter``, the hyperscan engine can run the
expression in small windows around those matches and get the same hits (see
``Pattern.spans``).

Every built-in expression runs in linear time with Python's ``re``: each begins
with a literal or a narrow character class so the engine can skip ahead, takes
its left boundary with a fixed-width lookbehind placed after that first
character (a leading lookbehind would be tried at every position), and uses
possessive quantifiers or bounded repeats, so no run of letters, digits, ``@`` or
``.`` makes it backtrack.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Final, Protocol, runtime_checkable

from ..errors import ConfigurationError
from . import _checks
from ._regex import shape_of

__all__ = [
    "BUILTIN_DETECTORS",
    "Detector",
    "Pattern",
    "RegexDetector",
    "after",
    "before",
    "builtin_detectors",
]

Span = tuple[int, int]
Window = tuple[int, int]

DIGITS: Final = tuple("0123456789")


@runtime_checkable
class Detector(Protocol):
    """What the masking pipeline asks of a detector.

    Attributes:
        name: the rule name recorded on the span, and the placeholder's label
            (``<email:3f9a2c1b>``): lower case letters, digits and ``_``.
        pseudonymize: True for personal data (a keyed token, so equal values stay
            equal); False for credentials, which always become a plain placeholder.
        min_length: the shortest text this detector can find anything in.
        literals: strings of which at least one occurs in any text the detector
            finds something in; empty when there is no such set.
        prefilter: a pattern in hyperscan syntax (no lookarounds, no
            backreferences) that matches somewhere in any text the detector finds
            something in, and in that text JSON-escaped; None to be asked about
            every text. ``after()`` and ``before()`` write boundaries that hold in both.

    A detector may also say ``separable = True``: it finds in texts joined with
    NUL what it finds in each alone (see ``_joined``), so it can be asked once
    about all of a payload's strings. Without it, it is asked text by text.
    """

    name: str
    pseudonymize: bool
    min_length: int
    literals: tuple[str, ...]
    prefilter: str | None

    def __call__(self, text: str) -> Iterable[Span]:
        """The ``(start, end)`` of each finding in ``text``."""
        ...

    def normalize(self, found: str) -> str:
        """The canonical form of a finding, hashed into its pseudonym (so ``A@X.com`` == ``a@x.com``)."""
        ...


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


# --- patterns ------------------------------------------------------------------------------

Check = Callable[[str], bool]
Refine = Callable[[str, int, int], Span | None]


class Pattern:
    """One regular expression of a detector, and how to find its hits fast.

    Args:
        regex: the expression (compiled with ``re.ASCII`` when given as text). It must
            run in linear time: prefer possessive quantifiers and bounded repeats.
        prefilter: hyperscan syntax; see ``Detector.prefilter``.
        reach: with a prefilter, the promise that every hit (and every character
            the expression's lookarounds read around it) lies within ``reach``
            characters of a prefilter match: the hit starts at most ``reach``
            before the match starts and ends at most ``reach`` after it ends.
            None makes no such promise: the expression then scans the whole text.
        literals: see ``Detector.literals``.
        group: the group whose span is the finding (the whole match by default).
        check: called with the finding's text; False rejects the hit.
        refine: called with the text and the finding's span; returns the span to
            mask or None to reject the hit. A pattern with a ``refine`` of your own
            is asked text by text (it may read anything in the text).
    """

    __slots__ = (
        "_extent",
        "_min_width",
        "check",
        "group",
        "literals",
        "prefilter",
        "reach",
        "refine",
        "regex",
        "separable",
    )

    def __init__(
        self,
        regex: str | re.Pattern[str],
        *,
        prefilter: str | None = None,
        reach: int | None = None,
        literals: Iterable[str] = (),
        group: int | str = 0,
        check: Check | None = None,
        refine: Refine | None = None,
    ) -> None:
        self.regex = re.compile(regex, re.ASCII) if isinstance(regex, str) else regex
        if reach is not None and (prefilter is None or reach < 1):
            raise ConfigurationError(
                f"Pattern {self.regex.pattern!r} has reach={reach} but no prefilter to reach from; give "
                "prefilter= too, or leave reach out (the pattern then scans whole texts)."
            )
        self.prefilter = prefilter
        self.reach = reach
        self.literals = tuple(literals)
        self.group = group
        self.check = check
        self.refine = refine
        shape = shape_of(self.regex)
        self.separable = shape.separable and (refine is None or refine in _SEPARABLE_REFINES)
        self._min_width = shape.min_width
        self._extent = shape.extent

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
        extent = self._extent
        # No match fits in fewer characters: the rest of a window shorter than
        # this is not searched.
        shortest = self._min_width or 1
        last = 0
        found: list[Span] = []
        reach = self.reach or 0
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
                        last = pos = after
                        continue
                pos = at + 1
        return found


def _identity(text: str) -> str:
    return text


class RegexDetector:
    """A detector made of one or more ``Pattern``s.

    ``RegexDetector("ticket_id", r"TCK-[0-9]{8}+", literals=("TCK-",))`` is enough
    for a pattern of your own; a ``prefilter`` (and a ``reach``) let the hyperscan
    engine skip it, or search only near its prefilter's matches.

    Args:
        name: rule name and placeholder label.
        pattern: an expression, or a list of ``Pattern``s for several.
        pseudonymize: see ``Detector``.
        min_length: see ``Detector``.
        normalize: the canonical form of a finding for its pseudonym.
        prefilter, reach, literals, group, check, refine: for a single expression,
            see ``Pattern``.
    """

    def __init__(
        self,
        name: str,
        pattern: str | re.Pattern[str] | Sequence[Pattern],
        *,
        pseudonymize: bool = True,
        min_length: int = 1,
        normalize: Callable[[str], str] | None = None,
        prefilter: str | None = None,
        reach: int | None = None,
        literals: Iterable[str] = (),
        group: int | str = 0,
        check: Check | None = None,
        refine: Refine | None = None,
    ) -> None:
        if isinstance(pattern, (str, re.Pattern)):
            patterns: tuple[Pattern, ...] = (
                Pattern(
                    pattern,
                    prefilter=prefilter,
                    reach=reach,
                    literals=literals,
                    group=group,
                    check=check,
                    refine=refine,
                ),
            )
        else:
            patterns = tuple(pattern)
        if not patterns:
            raise ConfigurationError(f"RegexDetector {name!r} has no pattern.")
        self.name = name
        self.patterns = patterns
        self.pseudonymize = pseudonymize
        self.min_length = min_length
        self._normalize = normalize or _identity
        self.prefilter: str | None = (
            None if any(p.prefilter is None for p in patterns) else "|".join(f"(?:{p.prefilter})" for p in patterns)
        )
        self.literals: tuple[str, ...] = (
            ()
            if any(not p.literals for p in patterns)
            else tuple(dict.fromkeys(x for p in patterns for x in p.literals))
        )
        self.separable = all(p.separable for p in patterns)

    def __repr__(self) -> str:
        return f"RegexDetector({self.name!r}, {[p.regex.pattern for p in self.patterns]!r})"

    def __call__(self, text: str) -> list[Span]:
        found: list[Span] = []
        for pattern in self.patterns:
            if pattern.literals and not any(lit in text for lit in pattern.literals):
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
                if pattern.literals and not any(lit in text for lit in pattern.literals):
                    continue
                found += pattern.spans(text)
            elif pattern_windows:
                found += pattern.spans(text, pattern_windows)
        return found

    def normalize(self, found: str) -> str:
        return self._normalize(found)


# --- email ------------------------------------------------------------------------

# The domain is matched forward from the "@"; the local part is read backward, as
# the run of its characters that str.rstrip takes off the end of a window of at most
# 65 characters before the "@", so a long run before an "@" costs nothing.
_AT_DOMAIN: Final = re.compile(
    r"@(?:[A-Za-z0-9\-]{1,63}+\.){1,8}(?:[A-Za-z]{2,24}+|xn--[A-Za-z0-9\-]{1,59}+)(?![A-Za-z0-9\-])",
    re.ASCII,
)
# The characters of a local part, for str.rstrip, and those it neither starts nor ends with.
_LOCAL_TEXT: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-"
_LOCAL_PUNCTUATION: Final = "._%+-"
_LOCAL_MAX: Final = 64
_LOCAL_WINDOW: Final = _LOCAL_MAX + 1


class EmailDetector:
    """``jane.doe+tag@mail.example.co.uk``: a local part of at most 64 characters, a dotted domain."""

    name: str = "email"
    pseudonymize: bool = True
    min_length: int = 6
    literals: tuple[str, ...] = ("@",)
    prefilter: str | None = r"[A-Za-z0-9._%+\-]@[A-Za-z0-9\-]+\.[A-Za-z0-9\-]"
    # Neither the domain, nor the local part read backwards, nor the checks around
    # them take a NUL.
    separable: bool = True

    def __call__(self, text: str) -> list[Span]:
        found: list[Span] = []
        last_end = 0
        find = text.find
        search = _AT_DOMAIN.search
        # str.find skips to the next "@" far faster than the expression's own scan;
        # the search from there still runs a stretch of "@"s that start no domain in C.
        at = find("@")
        while at != -1:
            match = search(text, at)
            if match is None:
                break
            at, end = match.span()
            # The local part: the run of local-part characters before the "@", read
            # back at most 65 characters (no further than the last finding's end).
            lo = at - _LOCAL_WINDOW if at - _LOCAL_WINDOW > last_end else last_end
            window = text[lo:at]
            before = len(window.rstrip(_LOCAL_TEXT))
            # One longer than RFC 5321 allows is no local part; one neither starts nor
            # ends with punctuation.
            if len(window) - before <= _LOCAL_MAX:
                local = window[before:].lstrip(_LOCAL_PUNCTUATION)
                if local and local[-1] != ".":
                    found.append((at - len(local), end))
                    last_end = end
            at = find("@", end)
        return found

    def normalize(self, found: str) -> str:
        return found.lower()


# --- IPv6 ---------------------------------------------------------------------------------

# An address is a whole run of hex digits, ":" and "." that starts with at most four
# hex digits and a ":", then at most four more and a second ":" (every address has
# two colons at most five characters apart, and its first group before them), with no
# letter, digit or "_" either side of the run. The expression starts at that first
# ":" (a literal the engine finds fast; starting at a hex digit would stop at every
# "a" to "f" in prose), and looks behind it for the first group: exactly k hex digits
# after a character that cannot precede an address. The refine steps back over them.
_IPV6: Final = (
    # No address goes on from a ":" or "." before this one: one test settles a run of colons.
    r":(?<![:.]:)(?:(?<![0-9A-Za-z_]:)"
    + "".join(rf"|(?<=[0-9A-Fa-f]{{{k}}}:)(?<![0-9A-Za-z_:.][0-9A-Fa-f]{{{k}}}:)" for k in range(1, 5))
    + r")[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:.]*+(?![0-9A-Za-z_])"
)
_HEX: Final = "0123456789ABCDEFabcdef"
_IPV6_MAX: Final = 45  # ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255


def _ipv6_refine(text: str, colon: int, stop: int) -> Span | None:
    # Back over the (at most four) hex digits of the first group: those that rstrip
    # takes off the four characters before the colon.
    head = text[colon - 4 if colon > 4 else 0 : colon]
    start = colon - len(head) + len(head.rstrip(_HEX))
    # No address is longer than 45 characters, and at most the two characters of a
    # trailing "." or ":" (a sentence's end) are not its own: nothing here grows with the run.
    if stop - start > _IPV6_MAX + 2:
        return None
    if _checks.ipv6_ok(text[start:stop]):
        return start, stop
    end = stop
    for _ in (1, 2):
        if end <= start or text[end - 1] not in ".:":
            return None
        end -= 1
        if _checks.ipv6_ok(text[start:end]):
            return start, end
    return None


def _ipv6_normalize(found: str) -> str:
    packed = _checks.ipv6_packed(found)
    return found.lower() if packed is None else socket.inet_ntop(socket.AF_INET6, packed)


# --- private keys ---------------------------------------------------------------------------

_PEM_BEGIN: Final = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", re.ASCII)
_PEM_END: Final = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", re.ASCII)


class PrivateKeyDetector:
    """PEM private keys (PKCS#1, PKCS#8, OpenSSH, PGP) from the BEGIN line to the END line.

    A key whose END line is missing (a cut log line) is masked to the end of the
    text: half a private key is still a secret.
    """

    name: str = "private_key"
    pseudonymize: bool = False
    min_length: int = 27  # -----BEGIN PRIVATE KEY-----
    literals: tuple[str, ...] = ("-----BEGIN",)
    prefilter: str | None = r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY"
    # A key without its END line runs to the end of its own text.
    separable: bool = False

    def __call__(self, text: str) -> Iterator[Span]:
        pos = 0
        while True:
            begin = _PEM_BEGIN.search(text, pos)
            if begin is None:
                return
            end = _PEM_END.search(text, begin.end())
            stop = end.end() if end is not None else len(text)
            yield begin.start(), stop
            pos = stop

    def normalize(self, found: str) -> str:
        return found


# --- the built-in set -------------------------------------------------------------------------


_IBAN_COUNTRIES: Final = _checks.IBAN_COUNTRIES
# What the digit patterns let through besides digits; deleted to leave the digits.
_NUMBER_PUNCTUATION: Final = str.maketrans("", "", " .-()+/")


def _digits_only(text: str) -> str:
    return text.translate(_NUMBER_PUNCTUATION)


def _has_digit(text: str) -> bool:
    return any("0" <= ch <= "9" for ch in text)


def _iban_refine(text: str, start: int, stop: int) -> Span | None:
    country = _IBAN_COUNTRIES.get(text[start : start + 2])
    if country is None:
        return None
    length, letters = country
    # The expression may run on into a following group; the country fixes the
    # length. The end lies past ``length`` characters and the spaces among them:
    # the least ``end`` with ``end - spaces before it == length``.
    found = text[start:stop]
    if " " in found:
        compact = found.replace(" ", "")
        if len(compact) < length:
            return None
        # Where the IBAN is written in the usual groups of four, it ends at ``end``
        # below. When ``end`` meets the rule above (one count tells), the least end
        # that does is ``end``, or one less where the character before is a space
        # (the expression never lets two spaces meet); else the loop finds it.
        end = length + (length - 1) // 4
        if found.count(" ", 0, end) == end - length:
            if found[end - 1] == " ":
                end -= 1
        else:
            end = length
            while (wider := length + found.count(" ", 0, end)) != end:
                end = wider
        end += start
    else:
        compact = found
        if len(found) < length:
            return None
        end = start + length
    if end < len(text) and text[end].isalnum():
        return None
    # ``iban_ok`` of compact[:length], less what the expression already holds to:
    # the country is known, and the check digits are digits ([A-Z]{2}[0-9]{2}).
    account = compact[4:length]
    # ASCII here, so the bytes test (C's table) stands for str.isdigit (Unicode's).
    if not account.encode("ascii").isdigit():
        account = account.translate(_checks.IBAN_LETTERS)
    return (start, end) if int(f"{account}{letters}{compact[2:4]}") % 97 == 1 else None


# Refines of our own that read the text no further than one character past the
# span they are given (or, for IPv6, back over the hex digits the expression's
# lookbehind took), where a NUL reads like the end or the start of the text.
_SEPARABLE_REFINES: Final = frozenset((_iban_refine, _ipv6_refine))


def _phone_international(text: str) -> bool:
    return _checks.digit_count_between(text, 8, 15)


def _phone_national(text: str) -> bool:
    return _checks.digit_count_between(text, 9, 12) and _DATE_PREFIX.match(text) is None


def _phone_normalize(found: str) -> str:
    return ("+" if found.startswith("+") else "") + _digits_only(found)


# 05.03.2024 or 05/03/2024 10 is a date (and an hour), not a phone number.
_DATE_PREFIX: Final = re.compile(r"[0-3][0-9][./\-][01][0-9][./\-](?:19|20)[0-9]{2}", re.ASCII)
_TOKEN: Final = "A-Za-z0-9_\\-"
_BEARER_TOKEN: Final = "A-Za-z0-9._~+/=\\-"


def _phone() -> RegexDetector:
    return RegexDetector(
        "phone",
        [
            # International: "+", digits, single separators, parenthesized area codes.
            Pattern(
                r"\+(?<![0-9A-Za-z_+]\+)[0-9](?:[0-9]|[ .\-][0-9]|[ .\-]?\([0-9]{1,4}\))*+",
                prefilter=after("0-9A-Za-z_+") + r"\+[0-9][0-9 .()\-]{7}",
                reach=40,
                literals=("+",),
                check=_phone_international,
            ),
            # North American: (415) 555-0132, 415-555-0132, 415.555.0132, 415 555 0132.
            Pattern(
                r"(?:\((?<![0-9A-Za-z_]\()[2-9][0-9]{2}\) ?|[2-9](?<![0-9A-Za-z_+][2-9])[0-9]{2}[ .\-])"
                r"[0-9]{3}[ .\-][0-9]{4}(?![0-9]|[.\-][0-9])",
                # No left boundary: inside this alternation it makes hyperscan four times slower.
                prefilter=r"(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[ .\-])[0-9]{3}[ .\-][0-9]{4}" + before("0-9"),
                reach=8,
                literals=DIGITS,
            ),
            # National numbers with a trunk 0 and separated groups: 020 7946 0958,
            # 07700 900123, 01 23 45 67 89, 030 12345678, 089/1234567.
            Pattern(
                r"0(?<![0-9A-Za-z_.,+]0)[1-9][0-9]{0,4}(?:[ .\-/][0-9]{2,8}){1,4}(?![0-9:]|[.\-][0-9])",
                prefilter=after("0-9A-Za-z_.,+") + r"0[1-9](?:[ .\-/]?[0-9]){7}",
                reach=48,
                literals=("0",),
                check=_phone_national,
            ),
        ],
        min_length=9,
        normalize=_phone_normalize,
    )


def builtin_detectors(*, ip_addresses: bool = True) -> tuple[Detector, ...]:
    """The built-in detectors, in priority order (the first wins where two overlap)."""
    detectors: list[Detector] = [
        PrivateKeyDetector(),
        RegexDetector(
            "jwt",
            rf"eyJ(?<![{_TOKEN}]eyJ)[{_TOKEN}]{{4,}}+\.[{_TOKEN}]{{4,}}+\.[{_TOKEN}]*+",
            pseudonymize=False,
            min_length=13,  # eyJ, 4, ".", 4, "."
            literals=("eyJ",),
            prefilter=rf"eyJ[{_TOKEN}]{{4}}",
        ),
        RegexDetector(
            "anthropic_api_key",
            rf"sk-ant-(?<![{_TOKEN}]sk-ant-)[{_TOKEN}]{{20,}}+",
            pseudonymize=False,
            min_length=27,
            literals=("sk-ant-",),
            prefilter=rf"sk-ant-[{_TOKEN}]{{20}}",
        ),
        RegexDetector(
            "openai_api_key",
            rf"sk-(?<![{_TOKEN}]sk-)(?!ant-)(?:proj-|svcacct-|admin-)?[{_TOKEN}]{{20,}}+",
            pseudonymize=False,
            min_length=23,
            literals=("sk-",),
            # Twenty key characters that do not begin with "ant-": an Anthropic key
            # does not wake this detector up too.
            prefilter=(
                rf"sk-(?:[A-Zb-z0-9_\-][{_TOKEN}]{{19}}|a(?:[A-Za-mo-z0-9_\-][{_TOKEN}]{{18}}"
                rf"|n(?:[A-Za-su-z0-9_\-][{_TOKEN}]{{17}}|t[A-Za-z0-9_][{_TOKEN}]{{16}})))"
            ),
        ),
        RegexDetector(
            "aws_access_key_id",
            r"A(?<![A-Za-z0-9_]A)(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9_])",
            pseudonymize=False,
            min_length=20,
            literals=("AKIA", "ASIA", "ABIA", "ACCA"),
            prefilter=r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}",
        ),
        RegexDetector(
            "github_token",
            [
                Pattern(
                    r"gh(?<![A-Za-z0-9_]gh)[pousr]_[A-Za-z0-9]{36,}+",
                    prefilter=r"gh[pousr]_[A-Za-z0-9]{36}",
                    literals=("gh",),
                ),
                Pattern(
                    r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,}+",
                    prefilter=r"github_pat_[A-Za-z0-9_]{22}",
                    literals=("github_pat_",),
                ),
            ],
            pseudonymize=False,
            min_length=33,
        ),
        RegexDetector(
            "slack_token",
            r"xox(?<![A-Za-z0-9_]xox)[bpaers]-[A-Za-z0-9\-]{10,}+",
            pseudonymize=False,
            min_length=15,
            literals=("xox",),
            prefilter=r"xox[bpaers]-[A-Za-z0-9\-]{10}",
        ),
        RegexDetector(
            "bearer_token",
            [
                # Two literal-first expressions ("earer", "EARER") scan far faster than
                # one that starts with the class [Bb].
                Pattern(
                    rf"earer(?<=[Bb]earer)(?<![A-Za-z0-9_][Bb]earer)[ \t]++([{_BEARER_TOKEN}]{{12,}}+)",
                    prefilter=r"[Bb]earer",
                    literals=("earer",),
                    group=1,
                    check=_has_digit,
                ),
                Pattern(
                    rf"EARER(?<=BEARER)(?<![A-Za-z0-9_]BEARER)[ \t]++([{_BEARER_TOKEN}]{{12,}}+)",
                    prefilter=r"BEARER",
                    literals=("EARER",),
                    group=1,
                    check=_has_digit,
                ),
            ],
            pseudonymize=False,
            min_length=19,
        ),
        EmailDetector(),
        RegexDetector(
            "payment_card",
            r"[2-6](?<![0-9A-Za-z_][2-6])"
            r"(?:[0-9]{11,18}|[0-9]{3}(?P<sep>[ \-])"
            r"(?:[0-9]{4}(?P=sep)[0-9]{4}(?P=sep)[0-9]{4}(?:(?P=sep)[0-9]{3})?|[0-9]{6}(?P=sep)[0-9]{4,5}))"
            r"(?![0-9])",
            prefilter=(
                after("0-9A-Za-z_") + r"[2-6](?:[0-9]{11,18}|[0-9]{3}[ \-]"
                r"(?:[0-9]{4}[ \-][0-9]{4}[ \-][0-9]{4}(?:[ \-][0-9]{3})?|[0-9]{6}[ \-][0-9]{4,5}))" + before("0-9")
            ),
            reach=8,
            min_length=12,
            literals=("2", "3", "4", "5", "6"),
            check=_checks.card_text_ok,
            normalize=_digits_only,
        ),
        RegexDetector(
            "iban",
            r"[A-Z](?<![0-9A-Za-z_][A-Z])[A-Z][0-9]{2}(?: ?[A-Z0-9]{4}){2,7}+(?: ?[A-Z0-9]{1,3})?",
            prefilter=after("0-9A-Za-z_") + r"[A-Z]{2}[0-9]{2} ?[A-Z0-9]{4} ?[A-Z0-9]{4}",
            reach=48,
            min_length=15,
            literals=DIGITS,
            refine=_iban_refine,
            normalize=lambda found: found.replace(" ", ""),
        ),
        RegexDetector(
            "us_ssn",
            r"[0-8](?<![0-9A-Za-z_\-][0-8])[0-9]{2}-[0-9]{2}-[0-9]{4}(?![0-9]|-[0-9])",
            prefilter=after("0-9A-Za-z_\\-") + r"[0-8][0-9]{2}-[0-9]{2}-[0-9]{4}" + before("0-9"),
            reach=8,
            min_length=11,
            literals=("-",),
            check=_checks.ssn_ok,
            normalize=_digits_only,
        ),
        _phone(),
    ]
    if ip_addresses:
        detectors.append(
            RegexDetector(
                "ipv4",
                r"[0-9](?<![0-9A-Za-z_.][0-9])[0-9]{0,2}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?![0-9]|\.[0-9])",
                prefilter=after("0-9A-Za-z_.") + r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}" + before("0-9"),
                reach=8,
                min_length=7,
                literals=(".",),
                check=_checks.ipv4_ok,
            )
        )
        detectors.append(
            RegexDetector(
                "ipv6",
                _IPV6,
                prefilter=r"::[0-9A-Fa-f]|[0-9A-Fa-f]::|(?:[0-9A-Fa-f]{1,4}:){3}[0-9A-Fa-f]",
                # A whole address, at most 47 characters with a trailing "." or ":",
                # holds a prefilter match: "::" beside a hex digit, or three groups.
                reach=48,
                min_length=6,
                literals=(":",),
                refine=_ipv6_refine,
                normalize=_ipv6_normalize,
            )
        )
    return tuple(detectors)


BUILTIN_DETECTORS: Final = builtin_detectors()

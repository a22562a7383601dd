"""Detectors: callables that find secrets and personal data in a piece of text.

A detector is an object with a ``name`` (the rule name recorded on the span and
the label of its placeholder) and a ``__call__(text)`` that yields the
``(start, end)`` of each thing it finds. Everything else on it is a hint that
lets the pipeline skip it: ``min_length``, ``literals`` (one of them must occur in
any text it finds something in) and ``prefilter`` (a pattern without lookarounds
that the hyperscan engine scans for). The hints never change what a detector
finds, only how often it is asked.

Every built-in pattern runs in linear time with Python's ``re``: each begins
with a literal or a narrow character class so the engine can skip ahead, takes
its left boundary with a fixed-width lookbehind placed after that first
character (a leading lookbehind would be tried at every position), and uses
possessive quantifiers or bounded repeats so no run of letters, digits, ``@`` or
``.`` makes it backtrack.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Final, Protocol, runtime_checkable

from . import _checks

__all__ = [
    "BUILTIN_DETECTORS",
    "DIGITS",
    "Detector",
    "RegexDetector",
    "builtin_detectors",
]

Span = tuple[int, int]

# A numeric detector can only find something in text that holds a digit; testing
# the ten digits with ``in`` (memchr) is far cheaper than any regex scan.
DIGITS: Final = tuple("0123456789")


@runtime_checkable
class Detector(Protocol):
    """What the masking pipeline asks of a detector.

    Attributes:
        name: the rule name recorded on the span, and the placeholder's label
            (``<email:3f9a2c1b>``). Lower case letters, digits and ``_``.
        pseudonymize: True for personal data (a keyed token, so equal values stay
            equal); False for credentials, which always become a plain placeholder.
        min_length: the shortest text this detector can find anything in.
        literals: strings of which at least one occurs in any text the detector
            finds something in; empty when there is no such set.
        prefilter: a regular expression in the common subset of hyperscan and
            ``re`` (no lookarounds, no backreferences) that matches, in the text
            or in its JSON-escaped form, wherever the detector finds something;
            None to be asked about every text.
    """

    name: str
    pseudonymize: bool
    min_length: int
    literals: tuple[str, ...]
    prefilter: str | None

    def __call__(self, text: str) -> Iterable[Span]:
        """The ``(start, end)`` of each finding in ``text``, in order, not overlapping."""
        ...

    def normalize(self, found: str) -> str:
        """The canonical form of a finding, hashed into its pseudonym (so ``A@X.com`` == ``a@x.com``)."""
        ...


def _identity(text: str) -> str:
    return text


class RegexDetector:
    """A detector made of one compiled pattern and an optional check of each hit.

    Args:
        name: rule name and placeholder label.
        pattern: the pattern (compiled with ``re.ASCII`` when given as text). It must
            run in linear time: prefer possessive quantifiers (``++``, ``{8,}+``) and
            bounded repeats, and never nest unbounded repeats.
        group: the group whose span is the finding (``0``, the whole match, by default).
        check: called with the finding's text; a hit is dropped when it returns False.
        pseudonymize: see ``Detector``.
        min_length: see ``Detector``.
        literals: see ``Detector``.
        prefilter: see ``Detector``.
        normalize: the canonical form of a finding for its pseudonym.
    """

    def __init__(
        self,
        name: str,
        pattern: str | re.Pattern[str],
        *,
        group: int | str = 0,
        check: Callable[[str], bool] | None = None,
        pseudonymize: bool = True,
        min_length: int = 1,
        literals: Iterable[str] = (),
        prefilter: str | None = None,
        normalize: Callable[[str], str] | None = None,
    ) -> None:
        self.name = name
        self.pattern = re.compile(pattern, re.ASCII) if isinstance(pattern, str) else pattern
        self.group = group
        self.check = check
        self.pseudonymize = pseudonymize
        self.min_length = min_length
        self.literals = tuple(literals)
        self.prefilter = prefilter
        self._normalize = normalize or _identity

    def __repr__(self) -> str:
        return f"RegexDetector({self.name!r}, {self.pattern.pattern!r})"

    def __call__(self, text: str) -> Iterator[Span]:
        check = self.check
        group = self.group
        for match in self.pattern.finditer(text):
            start, end = match.span(group)
            if start < end and (check is None or check(text[start:end])):
                yield start, end

    def normalize(self, found: str) -> str:
        return self._normalize(found)


# --- email ------------------------------------------------------------------------

_LOCAL_CHARS: Final = "A-Za-z0-9._%+\\-"
# The domain is matched forward from the "@" (a literal, which the regex engine
# finds with a fast search); the local part is matched backward, on a reversed
# window of at most 65 characters, so a long run before an "@" costs nothing.
_AT_DOMAIN: Final = re.compile(
    r"@(?:[A-Za-z0-9\-]{1,63}+\.){1,8}(?:[A-Za-z]{2,24}+|xn--[A-Za-z0-9\-]{1,59}+)(?![A-Za-z0-9\-])",
    re.ASCII,
)
_LOCAL_REVERSED: Final = re.compile(f"[{_LOCAL_CHARS}]{{1,65}}", re.ASCII)
_LOCAL_MAX: Final = 64


class EmailDetector:
    """``jane.doe+tag@mail.example.co.uk``: a local part of at most 64 characters, a dotted domain."""

    name: str = "email"
    pseudonymize: bool = True
    min_length: int = 6
    literals: tuple[str, ...] = ("@",)
    prefilter: str | None = r"[A-Za-z0-9._%+\-]@[A-Za-z0-9\-]+\.[A-Za-z0-9\-]"

    def __call__(self, text: str) -> Iterator[Span]:
        last_end = 0
        for match in _AT_DOMAIN.finditer(text):
            at = match.start()
            window = text[max(last_end, at - _LOCAL_MAX - 1) : at][::-1]
            local = _LOCAL_REVERSED.match(window)
            if local is None or local.end() > _LOCAL_MAX:
                continue  # no local part, or one longer than RFC 5321 allows
            start = at - local.end()
            # A local part neither starts nor ends with punctuation.
            while start < at and not text[start].isalnum():
                start += 1
            if start == at or text[at - 1] == ".":
                continue
            last_end = match.end()
            yield start, last_end

    def normalize(self, found: str) -> str:
        return found.lower()


# --- phone numbers -------------------------------------------------------------------

# International: "+" then digits, single separators and parenthesized area codes.
_PHONE_INTERNATIONAL: Final = re.compile(
    r"\+(?<![0-9A-Za-z_+]\+)[0-9](?:[0-9]|[ .\-][0-9]|[ .\-]?\([0-9]{1,4}\))*+", re.ASCII
)
# North American: (415) 555-0132, 415-555-0132, 415.555.0132, 415 555 0132.
_PHONE_NANP: Final = re.compile(
    r"(?:\((?<![0-9A-Za-z_]\()[2-9][0-9]{2}\) ?|[2-9](?<![0-9A-Za-z_+][2-9])[0-9]{2}[ .\-])"
    r"[0-9]{3}[ .\-][0-9]{4}(?![0-9]|[.\-][0-9])",
    re.ASCII,
)
# National numbers with a trunk 0 and separated groups: 020 7946 0958, 07700 900123,
# 01 23 45 67 89, 030 12345678, 089/1234567.
_PHONE_NATIONAL: Final = re.compile(
    r"0(?<![0-9A-Za-z_.,+]0)[1-9][0-9]{0,4}(?:[ .\-/][0-9]{2,8}){1,4}(?![0-9:]|[.\-][0-9])", re.ASCII
)
# 05.03.2024 or 05/03/2024 10 is a date (and an hour), not a phone number.
_DATE_PREFIX: Final = re.compile(r"[0-3][0-9][./\-][01][0-9][./\-](?:19|20)[0-9]{2}", re.ASCII)


class PhoneDetector:
    """International numbers (E.164 with separators) and common national formats."""

    name: str = "phone"
    pseudonymize: bool = True
    min_length: int = 9
    literals: tuple[str, ...] = DIGITS
    prefilter: str | None = (
        r"\+[0-9][0-9 .()\-]{7}"
        r"|(?:\([2-9][0-9]{2}\) ?|[2-9][0-9]{2}[ .\-])[0-9]{3}[ .\-][0-9]{4}"
        r"|0[1-9](?:[ .\-/]?[0-9]){7}"
    )

    def __call__(self, text: str) -> Iterator[Span]:
        found: list[Span] = []
        if "+" in text:
            for match in _PHONE_INTERNATIONAL.finditer(text):
                if _checks.phone_digits_ok(match.group(), 8, 15):
                    found.append(match.span())
        for match in _PHONE_NANP.finditer(text):
            found.append(match.span())
        if "0" in text:
            for match in _PHONE_NATIONAL.finditer(text):
                number = match.group()
                if _checks.phone_digits_ok(number, 9, 12) and not _DATE_PREFIX.match(number):
                    found.append(match.span())
        if len(found) > 1:
            found.sort()
        end = -1
        for span in found:
            if span[0] >= end:
                end = span[1]
                yield span

    def normalize(self, found: str) -> str:
        return ("+" if found.startswith("+") else "") + "".join(ch for ch in found if ch.isdigit())


# --- cards, IBAN, SSN ---------------------------------------------------------------------

_CARD: Final = re.compile(
    r"[2-6](?<![0-9A-Za-z_][2-6])"
    r"(?:[0-9]{11,18}|[0-9]{3}(?P<sep>[ \-])"
    r"(?:[0-9]{4}(?P=sep)[0-9]{4}(?P=sep)[0-9]{4}(?:(?P=sep)[0-9]{3})?|[0-9]{6}(?P=sep)[0-9]{4,5}))"
    r"(?![0-9])",
    re.ASCII,
)


def _digits_only(text: str) -> str:
    return "".join(ch for ch in text if ch.isdigit())


def _card_check(text: str) -> bool:
    return _checks.card_ok(_digits_only(text))


_SSN: Final = re.compile(r"[0-8](?<![0-9A-Za-z_\-][0-8])[0-9]{2}-[0-9]{2}-[0-9]{4}(?![0-9]|-[0-9])", re.ASCII)

_IBAN: Final = re.compile(
    r"[A-Z](?<![0-9A-Za-z_][A-Z])[A-Z][0-9]{2}(?: ?[A-Z0-9]{4}){2,7}+(?: ?[A-Z0-9]{1,3})?", re.ASCII
)


class IbanDetector:
    """IBANs, compact or in groups of four, checked by country length and mod 97."""

    name: str = "iban"
    pseudonymize: bool = True
    min_length: int = 15
    literals: tuple[str, ...] = DIGITS
    prefilter: str | None = r"[A-Z]{2}[0-9]{2} ?[A-Z0-9]{4} ?[A-Z0-9]{4}"

    def __call__(self, text: str) -> Iterator[Span]:
        for match in _IBAN.finditer(text):
            start, stop = match.span()
            length = _checks.IBAN_LENGTHS.get(text[start : start + 2])
            if length is None:
                continue
            # The pattern may run on into a following word; the country fixes the length.
            end, count = start, 0
            while end < stop and count < length:
                if text[end] != " ":
                    count += 1
                end += 1
            if count != length or (end < len(text) and text[end].isalnum()):
                continue
            if _checks.iban_ok(text[start:end].replace(" ", "")):
                yield start, end

    def normalize(self, found: str) -> str:
        return found.replace(" ", "")


# --- IP addresses -----------------------------------------------------------------------------

_IPV4: Final = re.compile(
    r"[0-9](?<![0-9A-Za-z_.][0-9])[0-9]{0,2}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?![0-9]|\.[0-9])", re.ASCII
)
# Two colons at most five characters apart start every IPv6 address; the literal
# ":" lets the engine skip ahead, and the address is then grown in both directions.
_IPV6_HINT: Final = re.compile(r":[0-9A-Fa-f]{0,4}:", re.ASCII)
_IPV6_HEAD_REVERSED: Final = re.compile(r"[0-9A-Fa-f]{0,5}", re.ASCII)
_IPV6_BODY: Final = re.compile(r"[0-9A-Fa-f:.]*+", re.ASCII)
_WORDISH: Final = frozenset("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")


class IPv6Detector:
    """IPv6 host addresses, full or compressed, with an embedded IPv4 tail or not."""

    name: str = "ipv6"
    pseudonymize: bool = True
    min_length: int = 6
    literals: tuple[str, ...] = (":",)
    prefilter: str | None = r"::[0-9A-Fa-f]|[0-9A-Fa-f]::|(?:[0-9A-Fa-f]{1,4}:){3}[0-9A-Fa-f]"

    def __call__(self, text: str) -> Iterator[Span]:
        pos = 0
        n = len(text)
        while True:
            hint = _IPV6_HINT.search(text, pos)
            if hint is None:
                return
            colon = hint.start()
            head = _IPV6_HEAD_REVERSED.match(text[max(pos, colon - 5) : colon][::-1])
            start = colon - (head.end() if head else 0)
            body = _IPV6_BODY.match(text, start)
            end = body.end() if body else colon + 1
            pos = max(end, colon + 1)
            if colon - start > 4 or (start > 0 and (text[start - 1] in _WORDISH or text[start - 1] in ":.")):
                continue
            if end < n and text[end] in _WORDISH:
                continue
            candidate = text[start:end]
            while candidate and candidate[-1] in ".:" and not _checks.ipv6_ok(candidate):
                candidate = candidate[:-1]
            if candidate and _checks.ipv6_ok(candidate):
                yield start, start + len(candidate)

    def normalize(self, found: str) -> str:
        return ipaddress.IPv6Address(found).compressed


# --- credentials --------------------------------------------------------------------------------

_TOKEN: Final = "A-Za-z0-9_\\-"

_PEM_BEGIN: Final = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", re.ASCII)
_PEM_END: Final = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", re.ASCII)


class PrivateKeyDetector:
    """PEM private keys (PKCS#1, PKCS#8, OpenSSH, PGP) from the BEGIN line to the END line.

    A key whose END line is missing (a cut log line) is masked to the end of the
    text: half a private key is still a secret.
    """

    name: str = "private_key"
    pseudonymize: bool = False
    min_length: int = 30
    literals: tuple[str, ...] = ("-----BEGIN",)
    prefilter: str | None = r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY"

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


def _has_digit(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def builtin_detectors(*, ip_addresses: bool = True) -> tuple[Detector, ...]:
    """The built-in detectors, in priority order (the first wins where two overlap)."""
    detectors: list[Detector] = [
        PrivateKeyDetector(),
        RegexDetector(
            "jwt",
            rf"eyJ(?<![{_TOKEN}]eyJ)[{_TOKEN}]{{4,}}+\.[{_TOKEN}]{{4,}}+\.[{_TOKEN}]*+",
            pseudonymize=False,
            min_length=20,
            literals=("eyJ",),
            prefilter=rf"eyJ[{_TOKEN}]{{4}}[{_TOKEN}]*\.[{_TOKEN}]{{4}}",
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
            prefilter=rf"sk-[{_TOKEN}]{{20}}",
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
            r"gh(?<![A-Za-z0-9_]gh)[pousr]_[A-Za-z0-9]{36,}+",
            pseudonymize=False,
            min_length=40,
            literals=("gh",),
            prefilter=r"gh[pousr]_[A-Za-z0-9]{36}",
        ),
        RegexDetector(
            "github_token",
            r"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_]{22,}+",
            pseudonymize=False,
            min_length=33,
            literals=("github_pat_",),
            prefilter=r"github_pat_[A-Za-z0-9_]{22}",
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
            r"(?:[Bb]earer|BEARER)(?<![A-Za-z0-9_][Bb][EeAaRr]{5})[ \t]++([A-Za-z0-9._~+/=\-]{12,}+)",
            group=1,
            check=_has_digit,
            pseudonymize=False,
            min_length=19,
            literals=("earer", "EARER"),
            prefilter=r"[Bb]earer|BEARER",
        ),
        EmailDetector(),
        RegexDetector(
            "payment_card",
            _CARD,
            check=_card_check,
            min_length=12,
            literals=("2", "3", "4", "5", "6"),
            prefilter=(
                r"[2-6](?:[0-9]{11}|[0-9]{3}[ \-]"
                r"(?:[0-9]{4}[ \-][0-9]{4}[ \-][0-9]{4}|[0-9]{6}[ \-][0-9]{4}))"
            ),
            normalize=_digits_only,
        ),
        IbanDetector(),
        RegexDetector(
            "us_ssn",
            _SSN,
            check=_checks.ssn_ok,
            min_length=11,
            literals=("-",),
            prefilter=r"[0-9]{3}-[0-9]{2}-[0-9]{4}",
            normalize=_digits_only,
        ),
        PhoneDetector(),
    ]
    if ip_addresses:
        detectors.append(
            RegexDetector(
                "ipv4",
                _IPV4,
                check=_checks.ipv4_ok,
                min_length=7,
                literals=(".",),
                prefilter=r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}",
            )
        )
        detectors.append(IPv6Detector())
    return tuple(detectors)


BUILTIN_DETECTORS: Final = builtin_detectors()

"""Built-in detectors for personal data: email addresses, payment cards, IBANs,
US social security numbers and phone numbers.

Each becomes a keyed pseudonym of its canonical form (``<email:3f9a2c1b07d4e85a>``), so
equal values stay equal. Every expression runs in linear time with Python's
``re``: it begins with a literal or a narrow character class so the engine can
skip ahead, takes its left boundary with a fixed-width lookbehind placed after
that first character, and uses possessive or bounded repeats, so no run of
letters, digits, ``@`` or ``.`` makes it backtrack.
"""

from __future__ import annotations

import re
from typing import Final

from . import _checks
from ._detector import Detector, Pattern, RegexDetector, Span
from ._hinted import hinted, hinted_detector
from ._hints import DetectorHints, after, before

__all__ = ["EmailDetector", "personal_detectors"]

DIGITS: Final = tuple("0123456789")

# Between the groups of a card number: a space, a no-break space (U+00A0, U+202F:
# what "4111 1111" becomes in a formatted document), a hyphen or a dot, mixed or not.
_CARD_SEP: Final = "[ \\-.\u00a0\u202f]"
# The same for the prefilter: a no-break space is "?" to the locating scan and its
# UTF-8 bytes to the payload scan.
_CARD_SEP_BYTES: Final = r"(?:[ \-.?]|\xc2\xa0|\xe2\x80\xaf)"

# The domain is matched forward from the "@"; the local part is read backward, as
# the run of its characters that str.rstrip takes off the end of a window of at most
# 65 characters before the "@", so a long run before an "@" costs nothing.
# A label may hold letters of any script (bücher.de, 例え.テスト): [^\x00-\x7f\W] is a
# non-ASCII letter or digit. The end is tested against ASCII only: text in a script
# written without spaces may follow an ASCII domain directly (jane@example.comは).
_AT_DOMAIN: Final = re.compile(
    r"@(?:(?:[A-Za-z0-9\-]|[^\x00-\x7f\W]){1,63}+\.){1,8}"
    r"(?:[A-Za-z]{2,24}+|xn--[A-Za-z0-9\-]{1,59}+|[^\x00-\x7f\W\d]{2,24}+)(?![A-Za-z0-9\-])"
)
# A URL escape (%20, %3A) ends what came before a local part: in URL-encoded text
# the address starts after the last one.
_URL_ESCAPE: Final = re.compile(r"%[0-9A-Fa-f]{2}", re.ASCII)
# The characters of a local part, for str.rstrip, and those it neither starts nor ends with.
_LOCAL_TEXT: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._%+-"
_LOCAL_PUNCTUATION: Final = "._%+-"
_LOCAL_MAX: Final = 64
_LOCAL_WINDOW: Final = _LOCAL_MAX + 1


class EmailDetector:
    """``jane.doe+tag@mail.example.co.uk``: a local part of at most 64 characters, a dotted domain."""

    name: str = "email"
    pseudonymize: bool = True
    hints: DetectorHints = DetectorHints(
        min_length=6,
        literals=("@",),
        # A non-ASCII character is "?" to the locating scan and its UTF-8 bytes to
        # the payload scan.
        prefilter=r"[A-Za-z0-9._%+\-]@[A-Za-z0-9\-?\x80-\xff]+\.[A-Za-z0-9\-?\x80-\xff]",
        # Neither the domain, nor the local part read backwards, nor the checks
        # around them take a NUL.
        separable=True,
    )

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
            local = window[len(window.rstrip(_LOCAL_TEXT)) :]
            if "%" in local:
                escapes = _URL_ESCAPE.findall(local)
                if escapes:
                    local = local[local.rfind(escapes[-1]) + 3 :]
            # One longer than RFC 5321 allows is no local part; one neither starts nor
            # ends with punctuation.
            if len(local) <= _LOCAL_MAX:
                local = local.lstrip(_LOCAL_PUNCTUATION)
                if local and local[-1] != ".":
                    found.append((at - len(local), end))
                    last_end = end
            at = find("@", end)
        return found

    def normalize(self, found: str) -> str:
        return found.lower()


def personal_detectors() -> list[Detector]:
    """The personal-data detectors, in priority order."""
    return [
        EmailDetector(),
        hinted_detector(
            "payment_card",
            hinted(
                r"[2-6](?<![0-9A-Za-z_][2-6])"
                rf"(?:[0-9]{{11,18}}|[0-9]{{3}}{_CARD_SEP}"
                rf"(?:[0-9]{{4}}{_CARD_SEP}[0-9]{{4}}{_CARD_SEP}[0-9]{{4}}(?:{_CARD_SEP}[0-9]{{3}})?"
                rf"|[0-9]{{6}}{_CARD_SEP}[0-9]{{4,5}}))"
                r"(?![0-9])",
                prefilter=(
                    after("0-9A-Za-z_") + rf"[2-6](?:[0-9]{{11,18}}|[0-9]{{3}}{_CARD_SEP_BYTES}"
                    rf"(?:[0-9]{{4}}{_CARD_SEP_BYTES}[0-9]{{4}}{_CARD_SEP_BYTES}[0-9]{{4}}(?:{_CARD_SEP_BYTES}[0-9]{{3}})?"
                    rf"|[0-9]{{6}}{_CARD_SEP_BYTES}[0-9]{{4,5}}))" + before("0-9")
                ),
                reach=8,
                literals=("2", "3", "4", "5", "6"),
                check=_checks.card_text_ok,
            ),
            min_length=12,
            normalize=_digits_only,
        ),
        hinted_detector(
            "iban",
            hinted(
                r"[A-Z](?<![0-9A-Za-z_][A-Z])[A-Z][0-9]{2}(?: ?[A-Z0-9]{4}){2,7}+(?: ?[A-Z0-9]{1,3})?",
                prefilter=after("0-9A-Za-z_") + r"[A-Z]{2}[0-9]{2} ?[A-Z0-9]{4} ?[A-Z0-9]{4}",
                reach=48,
                literals=DIGITS,
                refine=_iban_refine,
                # The refine reads no further than one character past the span it is
                # given: a NUL there reads like the text's end.
                separable=True,
            ),
            min_length=15,
            normalize=lambda found: found.replace(" ", ""),
        ),
        hinted_detector(
            "us_ssn",
            [
                # 123-45-6789, and 123 45 6789: groups of three, two and four say SSN
                # with spaces as they do with hyphens. One expression: it is the scan
                # from every digit that costs.
                hinted(
                    r"[0-8](?<![0-9A-Za-z_\-][0-8])[0-9]{2}"
                    r"(?:-[0-9]{2}-[0-9]{4}(?![0-9]|-[0-9])| [0-9]{2} [0-9]{4}(?![0-9]| [0-9]|[.\-][0-9]))",
                    prefilter=after("0-9A-Za-z_\\-") + r"[0-8][0-9]{2}[ \-][0-9]{2}[ \-][0-9]{4}" + before("0-9"),
                    reach=8,
                    literals=DIGITS,
                    check=_checks.ssn_ok,
                ),
                # Nine digits with no separator are an SSN only after its name ("SSN:
                # 123456789"); alone they are any id. Each name's expression starts
                # with a literal, which the engine finds far faster than a class.
                _ssn_named("SSN(?<![A-Za-z0-9_]SSN)", "SSN"),
                _ssn_named("sn(?<=[Ss]sn)(?<![A-Za-z0-9_][Ss]sn)", "[Ss]sn"),
                _ssn_named(
                    r"ocial(?<=[Ss]ocial)(?<![A-Za-z0-9_][Ss]ocial)[ _\-][Ss]ecurity(?:[ _\-](?:[Nn]umber|[Nn]o\.?))?",
                    r"[Ss]ocial[ _\-][Ss]ecurity",
                ),
                _ssn_named(
                    r"OCIAL(?<=SOCIAL)(?<![A-Za-z0-9_]SOCIAL)[ _\-]SECURITY(?:[ _\-](?:NUMBER|NO\.?))?",
                    r"SOCIAL[ _\-]SECURITY",
                ),
            ],
            min_length=11,
            normalize=_digits_only,
        ),
        _phone(),
    ]


def _ssn_named(name: str, prefilter: str) -> Pattern:
    """Nine digits after ``name`` (an expression), a colon, "#" or "=" and spaces between."""
    return hinted(
        name + r"[ \t]{0,4}[:#=]?[ \t]{0,4}([0-8][0-9]{8})(?![0-9])",
        # At most 17 characters between, in JSON-escaped text (a tab is "\t" there).
        prefilter=prefilter + r"[^0-9]{0,24}[0-8][0-9]{8}" + before("0-9"),
        reach=8,
        literals=DIGITS,
        group=1,
        check=_checks.ssn_ok,
    )


_IBAN_COUNTRIES: Final = _checks.IBAN_COUNTRIES
# What the digit patterns let through besides digits; deleted to leave the digits.
_NUMBER_PUNCTUATION: Final = str.maketrans("", "", " .-()+/\u00a0\u202f")


def _digits_only(text: str) -> str:
    return text.translate(_NUMBER_PUNCTUATION)


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


def _phone_international(text: str, start: int, stop: int) -> Span | None:
    """The number in ``text[start:stop]``: the whole match when it holds 8 to 15 digits."""
    return _longest_number(text, start, stop, 8, 15)


def _phone_national(text: str, start: int, stop: int) -> Span | None:
    """The number in ``text[start:stop]``: the whole match when it holds 9 to 12 digits
    and is not a date."""
    if _DATE_PREFIX.match(text, start, stop) is not None:
        return None
    return _longest_number(text, start, stop, 9, 12)


def _longest_number(text: str, start: int, stop: int, fewest: int, most: int) -> Span | None:
    """``text[start:stop]`` cut to its longest run of space-separated groups that holds
    at most ``most`` digits; None when that run holds fewer than ``fewest``.

    The expressions take every digit group the separators join, so a number
    followed by more digits after a space ("+44 20 7946 0958 10.0.0.1", or two
    numbers in a row) is one match with too many digits. Rejecting it left the
    number unmasked, and masking the masked text then found it.
    """
    found = text[start:stop]
    cut = len(found)
    while cut > 0:
        digits = _checks.digit_count(found[:cut])
        if digits <= most:
            return (start, start + cut) if digits >= fewest else None
        cut = found.rfind(" ", 0, cut)
    return None


def _phone_double_zero(text: str, start: int, stop: int) -> Span | None:
    """The number in ``text[start:stop]``: 8 to 15 digits after the "00"."""
    return _longest_number(text, start, stop, 10, 17)


def _phone_normalize(found: str) -> str:
    # "0044 20 ..." is "+44 20 ...": one token for both (a national number has one 0).
    if found.startswith("00"):
        return "+" + _digits_only(found)[2:]
    return ("+" if found.startswith("+") else "") + _digits_only(found)


# One prefilter for the North American, Brazilian and Russian forms: an area code (in
# parentheses, or three digits and a separator) and a group, then 2 and 2 digits, hold
# each of them (a Russian number's "8 " lies within the reach before). A prefilter of
# each form's own made hyperscan's scan of every payload markedly slower; this one,
# and the Chinese one beside it, hardly. No left boundary: inside this alternation it
# makes hyperscan scan slowly.
_GROUPED_PREFILTER: Final = (
    r"(?:\([1-9][0-9]{1,2}\) ?9?[0-9]{3,4}|[2-9][0-9]{2}[ .\-][0-9]{3})[ .\-][0-9]{2}[ \-]?[0-9]{2}" + before("0-9")
)

# 05.03.2024 or 05/03/2024 10 is a date (and an hour), not a phone number.
_DATE_PREFIX: Final = re.compile(r"[0-3][0-9][./\-][01][0-9][./\-](?:19|20)[0-9]{2}", re.ASCII)


def _phone() -> RegexDetector:
    return hinted_detector(
        "phone",
        [
            # International: "+", digits, single separators, parenthesized area codes.
            hinted(
                r"\+(?<![0-9A-Za-z_+]\+)[0-9](?:[0-9]|[ .\-][0-9]|[ .\-]?\([0-9]{1,4}\))*+",
                prefilter=after("0-9A-Za-z_+") + r"\+[0-9][0-9 .()\-]{7}",
                reach=40,
                literals=("+",),
                refine=_phone_international,
                # It reads only inside the span it is given.
                separable=True,
            ),
            # North American: (415) 555-0132, 415-555-0132, 415.555.0132, 415 555 0132.
            hinted(
                r"(?:\((?<![0-9A-Za-z_]\()[2-9][0-9]{2}\) ?|[2-9](?<![0-9A-Za-z_+][2-9])[0-9]{2}[ .\-])"
                r"[0-9]{3}[ .\-][0-9]{4}(?![0-9]|[.\-][0-9])",
                prefilter=_GROUPED_PREFILTER,
                reach=8,
                literals=DIGITS,
            ),
            # National numbers with a trunk 0 and separated groups: 020 7946 0958,
            # 07700 900123, 01 23 45 67 89, 030 12345678, 089/1234567.
            hinted(
                r"0(?<![0-9A-Za-z_.,+]0)[1-9][0-9]{0,4}(?:[ .\-/][0-9]{2,8}){1,4}(?![0-9:]|[.\-][0-9])",
                prefilter=after("0-9A-Za-z_.,+") + r"0[1-9](?:[ .\-/]?[0-9]){7}",
                reach=48,
                literals=("0",),
                refine=_phone_national,
                # It reads only inside the span it is given.
                separable=True,
            ),
            # Brazilian: (11) 91234-5678, (21) 2345-6789. An expression of its own (as the
            # two below): one that starts with a literal scans fast in Python.
            hinted(
                r"\((?<![0-9A-Za-z_]\()[1-9][0-9]\) ?9?[0-9]{4}[ .\-][0-9]{4}(?![0-9]|[.\-][0-9])",
                prefilter=_GROUPED_PREFILTER,
                reach=8,
                literals=("(",),
            ),
            # Chinese mobile: 138 0013 8000, 138-0013-8000.
            hinted(
                r"1(?<![0-9A-Za-z_+]1)[3-9][0-9][ \-][0-9]{4}[ \-][0-9]{4}(?![0-9]|[.\-][0-9])",
                # No left boundary: with one, hyperscan scans every payload slowly.
                prefilter=r"1[3-9][0-9][ \-][0-9]{4}[ \-][0-9]{4}" + before("0-9"),
                reach=8,
                literals=("1",),
            ),
            # International with "00" for "+": 0044 20 7946 0958, 001 (415) 555-0132. A
            # separator after the country code: "0012345678" alone is an id.
            hinted(
                r"0(?<![0-9A-Za-z_.,+]0)0[1-9][0-9]{0,3}(?:[ .\-][0-9]|[ .\-]?\([0-9]{1,4}\))"
                r"(?:[0-9]|[ .\-][0-9]|[ .\-]?\([0-9]{1,4}\))*+",
                prefilter=after("0-9A-Za-z_.,+") + r"00[1-9][0-9 .()\-]{7}",
                reach=48,
                literals=("00",),
                refine=_phone_double_zero,
                # It reads only inside the span it is given.
                separable=True,
            ),
            # Russian, with the trunk 8: 8 (495) 123-45-67, 8 912 345-67-89.
            hinted(
                r"8(?<![0-9A-Za-z_.,+]8)(?:[ \-]?\([3-9][0-9]{2}\) ?|[ \-][3-9][0-9]{2}[ \-])"
                r"[0-9]{3}[ \-][0-9]{2}[ \-][0-9]{2}(?![0-9]|[.\-][0-9])",
                prefilter=_GROUPED_PREFILTER,
                reach=8,
                literals=("8",),
            ),
        ],
        min_length=9,
        normalize=_phone_normalize,
    )

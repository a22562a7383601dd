"""The checks, refines and search loops written for speed, against plain references.

Each function that a detector runs once per candidate is written out for speed
(bytes tables, set lookups, fewer calls). The references here are the textbook
forms, kept short and obvious: Luhn digit by digit, mod 97 on the rearranged
IBAN, ``ipaddress`` for IPv6, and the search loop of ``Pattern.spans`` and the
email detector as they read before. Hypothesis feeds both
well-formed values and the malformed text around them.
"""

from __future__ import annotations

import ipaddress
import re
import string
from collections.abc import Iterator, Sequence

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from spanreplay.masking import BUILTIN_DETECTORS, Pattern, RegexDetector, _builtin_network, _builtin_personal, _checks
from spanreplay.masking._builtin_personal import EmailDetector
from spanreplay.masking._checks import (
    IBAN_LENGTHS,
    card_network_ok,
    card_ok,
    card_text_ok,
    iban_ok,
    ipv4_ok,
    ipv6_ok,
    luhn_ok,
    ssn_ok,
)
from spanreplay.masking._hinted import hinted

SLOW = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _builtin(name: str) -> RegexDetector:
    (detector,) = [d for d in BUILTIN_DETECTORS if d.name == name]
    assert isinstance(detector, RegexDetector)
    return detector


# --- references ------------------------------------------------------------------------------


def luhn_reference(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def card_reference(digits: str) -> bool:
    return 12 <= len(digits) <= 19 and card_network_ok(digits) and luhn_reference(digits)


def iban_reference(compact: str) -> bool:
    """ISO 13616: the country's length; the first four characters moved to the end,
    each letter written as its number (A = 10 ... Z = 35), the whole mod 97 is 1."""
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    if not all(ch in string.digits or ch in string.ascii_uppercase for ch in rearranged):
        return False
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def ipv4_reference(text: str) -> bool:
    parts = text.split(".")
    if len(parts) != 4 or not all(p and p.isascii() and p.isdigit() for p in parts):
        return False
    if any(len(p) > 1 and p[0] == "0" for p in parts):
        return False
    octets = [int(p) for p in parts]
    if any(o > 255 for o in octets) or octets[0] in (0, 127) or octets[0] >= 224:
        return False
    masks = {0, 128, 192, 224, 240, 248, 252, 254, 255}
    return octets[0] < 128 or not all(o in masks for o in octets)


def ipv4_as_it_was(text: str) -> bool:
    """``ipv4_ok`` before its set lookups, for text of any shape (int() takes "+4" and " 4")."""
    parts = text.split(".")
    if len(parts) != 4:
        return False
    if any(len(p) > 1 and p[0] == "0" for p in parts):
        return False
    first, second, third, fourth = (int(p) for p in parts)
    if second > 255 or third > 255 or fourth > 255 or first in (0, 127) or first >= 224:
        return False
    masks = {0, 128, 192, 224, 240, 248, 252, 254, 255}
    return first < 128 or not all(o in masks for o in (first, second, third, fourth))


def ipv6_reference(text: str) -> bool:
    if "%" in text:
        return False
    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return False
    if address.is_multicast or address.is_link_local or int(address) < 256:
        return False
    groups = [g for g in text.split(":") if g]
    return len(groups) >= 3 or len(groups[0]) == 4


def iban_refine_reference(text: str, start: int, stop: int) -> tuple[int, int] | None:
    length = IBAN_LENGTHS.get(text[start : start + 2])
    if length is None:
        return None
    found = text[start:stop]
    compact = found.replace(" ", "")
    if len(compact) < length:
        return None
    # Walk to the character that makes ``length`` of them, spaces not counted.
    end, seen = start, 0
    while seen < length:
        if text[end] != " ":
            seen += 1
        end += 1
    if end < len(text) and text[end].isalnum():
        return None
    return (start, end) if iban_reference(compact[:length]) else None


def ipv6_refine_reference(text: str, colon: int, stop: int) -> tuple[int, int] | None:
    start = colon
    while start > colon - 4 and start > 0 and text[start - 1] in string.hexdigits:
        start -= 1
    if stop - start > 47:
        return None
    candidate = text[start:stop]
    for _ in range(3):
        if ipv6_reference(candidate):
            return start, start + len(candidate)
        if not candidate or candidate[-1] not in ".:":
            return None
        candidate = candidate[:-1]
    return None


def spans_reference(pattern: Pattern, text: str, windows: Sequence[tuple[int, int]] | None) -> list[tuple[int, int]]:
    """``Pattern.spans`` as one loop for every kind of pattern (its documented steps)."""
    n = len(text)
    reach = pattern.hints.reach or 0
    extent = pattern.extent
    shortest = pattern.hints.min_width or 1
    last = 0
    found: list[tuple[int, int]] = []
    margin = reach if extent is None else 0
    for a, b in windows if windows is not None else ((0, n),):
        pos = max(a, last)
        cut = min(b + margin, n)
        while b - pos >= shortest:
            match = pattern.regex.search(text, pos, cut)
            if match is None:
                break
            at, after = match.span()
            if at >= b:
                break
            if cut < n and (after > cut - reach if extent is None else at + extent > cut):
                match = pattern.regex.match(text, at)
                if match is None:
                    pos = at + 1
                    continue
                after = match.end()
            start, end = match.span(pattern.group) if pattern.group else (at, after)
            if start < end and (pattern.check is None or pattern.check(text[start:end])):
                span = (start, end) if pattern.refine is None else pattern.refine(text, start, end)
                if span is not None:
                    found.append(span)
                    # A refine that kept the start of a match leaves the rest to search.
                    last = pos = span[1] if span[1] > at else after
                    continue
            pos = at + 1
    return found


_AT_DOMAIN = re.compile(
    r"@(?:(?:[A-Za-z0-9\-]|[^\x00-\x7f\W]){1,63}+\.){1,8}"
    r"(?:[A-Za-z]{2,24}+|xn--[A-Za-z0-9\-]{1,59}+|[^\x00-\x7f\W\d]{2,24}+)(?![A-Za-z0-9\-])"
)
_LOCAL_REVERSED = re.compile(r"[A-Za-z0-9._%+\-]{1,65}", re.ASCII)
# A URL escape, reversed: the local part starts after the last one.
_ESCAPE_REVERSED = re.compile(r"[0-9A-Fa-f]{2}%", re.ASCII)


def emails_reference(text: str) -> Iterator[tuple[int, int]]:
    """Every domain match in turn; its local part matched on the reversed text before it."""
    last_end = 0
    for match in _AT_DOMAIN.finditer(text):
        at = match.start()
        run = text[max(last_end, at - 65) : at][::-1]
        local = _LOCAL_REVERSED.match(run)
        if local is None:
            continue
        length = local.end()
        escape = _ESCAPE_REVERSED.search(run, 0, length)
        if escape is not None:
            length = escape.start()
        if length > 64:
            continue
        start = at - length
        while start < at and not text[start].isalnum():
            start += 1
        if start == at or text[at - 1] == ".":
            continue
        last_end = match.end()
        yield start, last_end


# --- strategies ------------------------------------------------------------------------------


def _digits(low: int, high: int) -> st.SearchStrategy[str]:
    return st.text(string.digits, min_size=low, max_size=high)


@st.composite
def card_texts(draw: st.DrawFn) -> str:
    """Digit runs that start like a card (or not), in groups with one kind of separator or none."""
    head = draw(st.sampled_from(["4", "51", "2221", "2720", "34", "37", "36", "300", "6011", "65", "62", "3530", "50"]))
    digits = head + draw(_digits(8, 18))
    if draw(st.booleans()):
        # Finish with the digit that passes Luhn: half the candidates are cards.
        digits = digits[:-1]
        digits += next(d for d in string.digits if luhn_reference(digits + d))
    sep = draw(st.sampled_from(["", " ", "-"]))
    if sep:
        digits = sep.join(digits[i : i + 4] for i in range(0, len(digits), 4))
    return digits


@st.composite
def ibans(draw: st.DrawFn) -> str:
    """A valid IBAN (or one with a wrong check, a letter, a digit short or over)."""
    country = draw(st.sampled_from(sorted(IBAN_LENGTHS)))
    bban = draw(st.text(string.digits + string.ascii_uppercase[:6], min_size=IBAN_LENGTHS[country] - 4))
    bban = bban[: IBAN_LENGTHS[country] - 4]
    check = next(f"{c:02d}" for c in range(100) if iban_reference(country + f"{c:02d}" + bban))
    compact = country + check + bban
    flaw = draw(st.integers(0, 5))
    if flaw == 4:
        # Letters for check digits that pass the sum all the same: iban_ok takes them.
        pairs = [a + b for a in string.ascii_uppercase for b in string.ascii_uppercase]
        compact = country + next(p for p in pairs if iban_reference(country + p + bban)) + bban
    if flaw == 1:
        compact = compact[:-1] + str((int(compact[-1], 36) + 1) % 10)
    elif flaw == 2:
        compact = compact[:-1]
    elif flaw == 3:
        compact += draw(st.sampled_from(string.digits + "AZ"))
    return compact


@st.composite
def written_ibans(draw: st.DrawFn) -> str:
    """An IBAN as text: in groups of four with spaces at some of the group breaks, and
    what may follow it (another group, a word, punctuation)."""
    compact = draw(ibans())
    groups = [compact[i : i + 4] for i in range(0, len(compact), 4)]
    spaced = groups[0]
    for group in groups[1:]:
        spaced += draw(st.sampled_from([" ", " ", ""])) + group
    tail = draw(st.sampled_from(["", ".", " ", " 12", " 1234 5678", "7", "X", "\x00", ",DE"]))
    head = draw(st.sampled_from(["", " ", "IBAN: ", "x", "\x00"]))
    return head + spaced + tail


IP6_FRAGMENTS = st.sampled_from(
    ["0", "1", "a", "F", "db8", "2001", "fe80", "ff02", "ffff", "12345", ":", "::", ":::", ".", "1.2.3.4", "%", "g"]
)


@st.composite
def ipv6_texts(draw: st.DrawFn) -> str:
    if draw(st.booleans()):
        packed = draw(st.binary(min_size=16, max_size=16))
        text = str(ipaddress.IPv6Address(packed))
        if draw(st.booleans()):
            text = ipaddress.IPv6Address(packed).exploded
        if draw(st.booleans()):
            text = text.upper()
        return text + draw(st.sampled_from(["", ".", ":", ".:", "::", "%eth0", " x"]))
    return "".join(draw(st.lists(IP6_FRAGMENTS, max_size=14)))


# Text around the things the digit and address patterns look for.
FRAGMENTS = st.sampled_from(
    [
        "0", "1", "2", "4", "5", "9", "00", "12", "255", "4111", "0132", " ", "  ", "-", ".", "..", "/", "(", ")",
        "+", "+1 ", ":", "::", "a", "f", "Z", "DE", "DE89 ", "GB82 WEST", "@", "x@", "@a.bc", "é", "\x00", "\n",
        "2001:db8::", "fe80::1", "203.0.113.", "555-0132", "123-45-", "05.03.2024", "(415) ",
    ]
)  # fmt: skip
TEXTS = st.lists(FRAGMENTS, max_size=50).map("".join)


# --- cards -----------------------------------------------------------------------------------


@SLOW
@given(card_texts())
@example("4111 1111 1111 1111")
@example("3782-822463-10005")
@example("1234567812345670")
@example("4111111111111111111")
def test_card_checks_match_textbook_luhn(text: str) -> None:
    digits = text.replace(" ", "").replace("-", "")
    expected = card_reference(digits)
    assert card_text_ok(text) == expected
    assert card_ok(digits) == expected
    assert luhn_ok(digits) == luhn_reference(digits)


@SLOW
@given(st.text(string.digits + " -xA", max_size=24))
def test_card_text_check_on_any_digit_text(text: str) -> None:
    # Short, long, no digits, a letter (which no card pattern lets through): the
    # bytes path decides as card_ok does on the text without its separators.
    digits = text.replace(" ", "").replace("-", "")
    assert card_text_ok(text) == card_ok(digits)
    if digits.isdigit():
        assert card_ok(digits) == card_reference(digits)


# --- IBAN --------------------------------------------------------------------------------------


@SLOW
@given(ibans() | st.text(string.digits + string.ascii_uppercase + "a ", max_size=36))
@example("DE89370400440532013000")
@example("GB82WEST12345698765432")
@example("DE8937040044053201300")
@example("DEAB370400440532013000")
def test_iban_ok_matches_textbook_mod_97(compact: str) -> None:
    assert iban_ok(compact) == iban_reference(compact)


@SLOW
@given(written_ibans() | TEXTS)
@example("DE89 3704 0044 0532 0130 00")
@example("DE89 3704 0044 0532 0130 00 1234")
@example("NO93 8601 1117 947")
@example("DE8937040044 0532 0130 00")
@example("BE68 5390 0754 7034.")
@example("BE685390 0754 7034 1234")  # spaced as usual up to its end, but for one break
def test_iban_refine_matches_the_textbook_walk(text: str) -> None:
    (pattern,) = _builtin("iban").patterns
    for match in pattern.regex.finditer(text):
        start, stop = match.span()
        assert _builtin_personal._iban_refine(text, start, stop) == iban_refine_reference(text, start, stop), match


# --- IPv4, SSN, phone -------------------------------------------------------------------------


@SLOW
@given(
    st.tuples(*[st.integers(0, 300)] * 4).map(lambda q: ".".join(map(str, q)))
    | st.tuples(*[st.sampled_from(["0", "00", "01", "1", "10", "127", "128", "192", "255", "256"])] * 4).map(".".join)
    | st.text("0123456789.", max_size=16)
)
@example("255.255.255.0")
@example("192.168.1.10")
@example("128.0.0.0")
@example("01.2.3.4")
def test_ipv4_ok_matches_the_reference(text: str) -> None:
    # An empty part ("1..2.3") makes int() raise, as it always did: the test below.
    assume(len(text.split(".")) != 4 or all(text.split(".")))
    assert ipv4_ok(text) == ipv4_reference(text)


@SLOW
@given(st.text("0123456789.+ _-a٤", max_size=16))
@example("1.2.3.+4")
@example("1.2.3.4_0")
@example("1.2.3. 4")
def test_ipv4_ok_keeps_its_results_on_any_text(text: str) -> None:
    try:
        expected = ipv4_as_it_was(text)
    except ValueError:
        expected = None  # int() refused a part: the checks raise as they did
    if expected is None:
        try:
            ipv4_ok(text)
        except ValueError:
            return
        raise AssertionError(f"ipv4_ok({text!r}) no longer raises")
    assert ipv4_ok(text) == expected


@SLOW
@given(st.from_regex(r"\A[0-9]{3}-[0-9]{2}-[0-9]{4}\Z") | st.sampled_from(["000-12-3456", "666-12-3456"]))
@example("912-34-5678")
@example("123-00-4567")
@example("123-45-0000")
def test_ssn_ok_matches_the_issued_ranges(text: str) -> None:
    area, group, serial = int(text[:3]), int(text[4:6]), int(text[7:])
    assert ssn_ok(text) == (area not in (0, 666) and area < 900 and group != 0 and serial != 0)


@SLOW
@given(TEXTS)
def test_phone_checks_count_ascii_digits(text: str) -> None:
    assume(text.isascii())
    assert _checks.digit_count(text) == sum(ch in string.digits for ch in text)
    # Without a space there is no group to cut at: the whole text is the number, or nothing is.
    text = text.replace(" ", "")
    digits = sum(ch in string.digits for ch in text)
    date = re.match(r"[0-3][0-9][./\-][01][0-9][./\-](?:19|20)[0-9]{2}", text) is not None
    whole = (0, len(text)) if 9 <= digits <= 12 and not date else None
    assert _builtin_personal._phone_national(text, 0, len(text)) == whole


@given(st.lists(st.text(string.digits, min_size=1, max_size=6), min_size=1, max_size=8), st.sampled_from(" .-"))
@example(["44", "20", "0000", "0000", "11.100.100.100"], " ")
def test_an_international_number_is_its_longest_run_of_groups_that_fits(groups: list[str], inner: str) -> None:
    # Groups joined by spaces; each group may itself hold separators other than a space.
    groups = [inner.join(g) if len(g) > 3 and inner != " " else g for g in groups]
    text = "+" + " ".join(groups)
    expected = None
    for taken in range(len(groups), 0, -1):
        head = "+" + " ".join(groups[:taken])
        count = sum(ch.isdigit() for ch in head)
        if count <= 15:
            expected = (0, len(head)) if count >= 8 else None
            break
    assert _builtin_personal._phone_international(text, 0, len(text)) == expected


# --- IPv6 ---------------------------------------------------------------------------------------


@SLOW
@given(ipv6_texts())
@example("2001:db8::1")
@example("::1")
@example("::ffff:1.2.3.4")
@example("fe80::1:2:3")
@example("febf::1:2:3")
@example("fec0::1:2:3")
@example("ff02::1:2:3")
@example("::100:0:0")
@example("0:0:0:0:0:0:0:100")
@example("0:0:0:0:0:0:0:ff")
@example("1::2")
@example("2001::1")
def test_ipv6_ok_matches_ipaddress(text: str) -> None:
    assert ipv6_ok(text) == ipv6_reference(text)
    # inet_pton takes no scope ("%eth0"), which ipaddress does.
    packed = _checks.ipv6_packed(text)
    if "%" in text:
        assert packed is None
    else:
        assert packed == (ipaddress.IPv6Address(text).packed if _valid_ipv6(text) else None)


def _valid_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


@SLOW
@given(st.lists(ipv6_texts() | FRAGMENTS, max_size=6).map("".join))
@example("at 2001:db8::1: then")
@example("x 2001:db8::1. end")
@example("12345:db8::1")
@example("ab:cd:ef:12")
def test_ipv6_refine_matches_the_reference(text: str) -> None:
    (pattern,) = _builtin("ipv6").patterns
    for match in pattern.regex.finditer(text):
        start, stop = match.span()
        assert _builtin_network._ipv6_refine(text, start, stop) == ipv6_refine_reference(text, start, stop), match


# --- Pattern.spans and the email detector ------------------------------------------------------

PATTERNS = [(d.name, i, p) for d in BUILTIN_DETECTORS if isinstance(d, RegexDetector) for i, p in enumerate(d.patterns)]
# Patterns of one's own take the same loop: a plain one whose check turns down hits
# that a match one character on would make, one with a group, one with a refine, and
# one of unbounded width.
PATTERNS += [
    ("plain", 0, Pattern(r"[0-9]{3}(?![0-9])", check=lambda t: t[0] != "1")),
    ("plain", 1, Pattern(r"[0-9][0-9 ]{2,5}[0-9]", check=lambda t: "5" not in t)),
    ("group", 0, Pattern(r"a([0-9]{2})(?![0-9])", group=1, check=lambda t: t != "00")),
    ("refine", 0, Pattern(r"[0-9]{2,4}", refine=lambda text, a, b: (a, b - 1) if b - a > 2 else None)),
    ("unbounded", 0, hinted(r"[0-9]++(?!\.)", prefilter="[0-9]", reach=4, check=lambda t: len(t) != 3)),
]


@st.composite
def windows_in(draw: st.DrawFn, n: int) -> list[tuple[int, int]]:
    """Sorted windows that do not touch, anywhere in a text of ``n`` characters."""
    cuts = sorted(set(draw(st.lists(st.integers(0, n), max_size=8))))
    pairs = [(cuts[i], cuts[i + 1]) for i in range(0, len(cuts) - 1, 2)]
    return [(a, b) for a, b in pairs if a < b]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), TEXTS)
def test_pattern_spans_follows_its_documented_steps(data: st.DataObject, text: str) -> None:
    # Every built-in pattern, in any windows (not only those a prefilter gives),
    # takes the steps the docstring of Pattern.spans describes.
    windows = data.draw(windows_in(len(text)))
    for name, i, pattern in PATTERNS:
        assert pattern.spans(text) == spans_reference(pattern, text, None), (name, i)
        assert pattern.spans(text, windows) == spans_reference(pattern, text, windows), (name, i, windows)


def test_pattern_spans_re_matches_a_hit_cut_by_its_window() -> None:
    # In a window that ends inside a run of 20 digits, the card expression sees a
    # card of 16 digits end at the cut; matched again against the whole text, it is
    # none.
    (pattern,) = _builtin("payment_card").patterns
    text = "card 4111111111111111" + "1111" + " ok"
    assert pattern.spans(text) == []
    for b in range(6, len(text)):
        assert pattern.spans(text, [(0, b)]) == spans_reference(pattern, text, [(0, b)]) == [], b


EMAIL_FRAGMENTS = st.sampled_from(
    ["a", "Z", "9", ".", "..", "_", "%", "+", "-", "@", "@@", "x@y.", "b.cc", "example.com", "xn--p1ai", " ", "\x00",
     "é", "a" * 70, ".a" * 40, "-" * 10, "%20", "%4", "ü", "例え", "テスト"]
)  # fmt: skip


@SLOW
@given(st.lists(EMAIL_FRAGMENTS, max_size=30).map("".join))
@example("jane.doe+tag@mail.example.co.uk and .x@a.bc")
@example("." * 3 + "@example.com")
@example("a" * 65 + "@example.com " + "b" * 64 + "@example.com")
@example("x.@example.com, _y_@example.com")
@example("q=" + "%20".join(["lorem"] * 20) + "%20jane@example.com a%2@b.cc")
@example("info@bücher.de ops@例え.テスト")
def test_email_detector_matches_the_reversed_window_reference(text: str) -> None:
    assert list(EmailDetector()(text)) == list(emails_reference(text))

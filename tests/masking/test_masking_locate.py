"""Where the hyperscan gate looks: windows built from where prefilter matches end.

A pattern with a ``reach`` runs only in windows around its prefilter's matches.
The gate knows most matches by their ends alone, and widens each window by the
prefilter's widest match instead of reading the match's start; only a prefilter
of unbounded or unknown width reports its starts. These tests hold the windows
to straightforward references, and both engines to the same masking where hits
lie right at the edge of their reach, or where the strings end.
"""

from __future__ import annotations

import importlib
import string
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers.masking_engines import FAST, PYTHON, TEXTS, needs_hyperscan
from helpers.masking_samples import FILLER, planted
from spanreplay.masking import Masker, MaskingConfig, RegexDetector
from spanreplay.masking._engine import HyperscanGate
from spanreplay.masking._hinted import hinted, hinted_detector
from spanreplay.masking._hints import hints_of
from spanreplay.masking._windows import around, before_ends, unescaped

# --- the windows, against references ------------------------------------------------------------


def referencearound(ends: list[int], lead: int, reach: int, n: int) -> list[tuple[int, int]]:
    """Each end's window clipped to the text, then windows that overlap or touch merged."""
    out: list[tuple[int, int]] = []
    for a, b in sorted((max(0, end - lead), min(n, end + reach)) for end in ends):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


@st.composite
def ends_in_a_text(draw: st.DrawFn) -> tuple[list[int], int, int, int]:
    n = draw(st.integers(1, 300))
    reach = draw(st.integers(1, 60))
    width = draw(st.integers(1, 40))
    ends = draw(st.lists(st.integers(1, n), min_size=1, max_size=30, unique=True))
    return ends, width + reach, reach, n


@settings(max_examples=300)
@given(ends_in_a_text())
@example(([1], 5, 3, 1))  # one window clipped at both ends
@example(([3, 10], 4, 3, 20))  # windows that touch: merged
@example(([3, 11], 4, 3, 20))  # one character apart: kept apart
def test_windows_from_ends_match_the_reference(case: tuple[list[int], int, int, int]) -> None:
    ends, lead, reach, n = case
    shuffled = list(reversed(ends))  # the order hyperscan reports in does not matter
    assert before_ends(shuffled, lead, reach, n) == referencearound(ends, lead, reach, n)


@st.composite
def matches_of_bounded_width(draw: st.DrawFn) -> tuple[list[tuple[int, int]], int, int, int]:
    n = draw(st.integers(1, 300))
    width = draw(st.integers(1, 40))
    reach = draw(st.integers(1, 60))
    ends = draw(st.lists(st.integers(1, n), min_size=1, max_size=30))
    matches = [(draw(st.integers(max(0, end - width), end - 1)), end) for end in ends]
    return matches, width, reach, n


@settings(max_examples=300)
@given(matches_of_bounded_width())
def test_windows_from_ends_hold_the_windows_of_the_matches_starts(
    case: tuple[list[tuple[int, int]], int, int, int],
) -> None:
    # A match's start, when hyperscan reports it, makes the tightest window; the one
    # built from its end and the prefilter's widest match must hold it.
    matches, width, reach, n = case
    wide = before_ends([end for _, end in matches], width + reach, reach, n)
    for a, b in around(list(matches), reach, n):
        assert any(lo <= a and b <= hi for lo, hi in wide), (a, b, wide)


# --- the gate's widths and flags ---------------------------------------------------------------

parser = importlib.import_module("re._parser")  # what the gate's first guess at a width comes from


def _alone(prefilter: str) -> Any:
    """``prefilter`` compiled on its own, as the payload gate reads it: does it match a payload?"""
    hyperscan: Any = importlib.import_module("hyperscan")
    database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    database.compile(expressions=[prefilter.encode()], ids=[0], elements=1, flags=[hyperscan.HS_FLAG_SINGLEMATCH])
    scratch = hyperscan.Scratch(database)

    def matches(data: bytes) -> bool:
        found: list[int] = []
        database.scan(data, lambda *_: found.append(1), 0, None, scratch)
        return bool(found)

    return matches


ALONE = (
    [(i, _alone(p)) for i, d in enumerate(FAST.detectors) if (p := hints_of(d).prefilter) is not None]
    if isinstance(FAST.gate, HyperscanGate)
    else []
)


@needs_hyperscan
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(TEXTS, min_size=1, max_size=4))
@example(["call 415-555-0132 or (415) 555-0133, card 4111 1111 1111 1111 at 10.0.0.1"])
@example(["call 415-555-0132 or (415) 555-0133 or 415-555-0134, 02 03 04 05 06 07 08 09"])
@example(["no numbers here, only words"])
def test_the_payload_gate_selects_every_detector_whose_prefilter_matches(texts: list[str]) -> None:
    # The number prefilters are compiled without SINGLEMATCH and report every match:
    # the gate still stops at the first report, and misses none.
    gate = FAST.gate
    assert isinstance(gate, HyperscanGate)
    data = orjson.dumps({f"k{n}": text for n, text in enumerate(texts)})
    selected, _ = gate.select_payload(data)
    matched = [i for i, matches in ALONE if matches(data)]
    assert set(matched) <= set(selected)
    if not matched:
        assert list(selected) == []


@needs_hyperscan
def test_every_builtin_prefilter_is_of_known_width_and_asks_for_no_match_start() -> None:
    gate = FAST.gate
    assert isinstance(gate, HyperscanGate)
    assert not gate._starts
    for (i, j), lead in zip(gate._targets, gate._leads, strict=True):
        detector = FAST.detectors[i]
        if j < 0 or not isinstance(detector, RegexDetector) or detector.patterns[j].hints.reach is None:
            continue
        pattern = detector.patterns[j]
        assert pattern.hints.prefilter is not None
        assert pattern.hints.reach is not None
        # Python's parser and hyperscan agree on the built-in prefilters' widths.
        widest = parser.parse(unescaped(pattern.hints.prefilter)).getwidth()[1]
        assert lead == widest + pattern.hints.reach, detector.name


@needs_hyperscan
@pytest.mark.parametrize(
    ("expression", "widest"),
    [
        ("ab?c{2,4}", 6),
        ("(?:^|[^0-9])[0-9]{3}(?:[^0-9]|$)", 5),
        ("a+", None),  # unbounded
        ("a{2,}b", None),
        ("ba{,3}", None),  # "{,3}" repeats to Python; to hyperscan it is four characters
        ("b[[:digit:]]{2}", 4),  # a POSIX class: Python reads it wider, which bounds it still
        ("é{2}", None),  # hyperscan counts the bytes of a non-ASCII character
        ("a(?=b)", None),  # not hyperscan syntax at all
    ],
)
def test_a_prefilters_width_is_bounded_where_hyperscan_confirms_it(expression: str, widest: int | None) -> None:
    gate = FAST.gate
    assert isinstance(gate, HyperscanGate)
    assert gate._widest(expression) == widest


# --- both engines agree where hits lie at the edge of their reach ---------------------------------

# Each hit starts up to 13 characters before its prefilter's match starts (twelve
# letters and "-") and ends where the longest of its matches ends.
EDGE = hinted_detector(
    "edge",
    [
        # Bounded: its windows start the widest match (6) and the reach before each end.
        hinted(r"[a-z]{1,12}+-b[0-9]{1,5}+(?![0-9])", prefilter=r"b[0-9]{1,5}", reach=13),
        # Unbounded: its windows start at its matches' starts.
        hinted(r"[a-z]{1,12}+-c[0-9]++", prefilter=r"c[0-9]+", reach=13),
        # Python would read the prefilter as "x" repeated up to three times, one or
        # three characters, where hyperscan matches the five characters "x{,3}".
        hinted(r"[a-z]{1,12}+-x\{,3\}", prefilter=r"x{,3}", reach=13),
        # Fixed width: every window starts exactly the width and the reach before its end.
        hinted(r"[a-z]{1,12}+-d[0-9]{5}(?![0-9])", prefilter=r"d[0-9]{5}", reach=13),
    ],
    pseudonymize=False,
    min_length=4,
)
EDGE_ENGINES = (
    Masker(MaskingConfig(engine="python", detectors=[EDGE], field_names=())),
    Masker(MaskingConfig(engine="hyperscan", detectors=[EDGE], field_names=())) if FAST is not PYTHON else None,
)


@needs_hyperscan
def test_a_prefilter_of_unbounded_or_misread_width_keeps_its_matches_starts() -> None:
    gate = EDGE_ENGINES[1].gate if EDGE_ENGINES[1] is not None else None
    assert isinstance(gate, HyperscanGate)
    assert gate._starts
    assert gate._leads == (6 + 13, None, None, 6 + 13)
    # A run of digits much longer than the reach: windows taken from the ends alone,
    # without the width, would start past the hit.
    text = "see abcdefghijkl-c" + "1" * 100 + " and abcdefghijkl-x{,3} too"
    for masker in EDGE_ENGINES:
        assert masker is not None
        assert masker.scan_text(text) == ("see <edge> and <edge> too", ("edge",))


# Letters (up to 16: a hit takes twelve at most), "-", then what the prefilters match.
EDGE_PIECES = st.builds(
    lambda letters, body: letters + "-" + body,
    st.text(alphabet="abcz", min_size=0, max_size=16),
    st.one_of(
        st.builds(lambda digits: "b" + digits, st.text(alphabet="0123456789", max_size=8)),
        st.builds(lambda digits: "c" + digits, st.text(alphabet="0123456789", max_size=40)),
        st.sampled_from(["x{,3}", "x{,3", "xx", "x{,3}x"]),
        st.builds(lambda digits: "d" + digits, st.text(alphabet="0123456789", min_size=4, max_size=6)),
    ),
)
EDGE_TEXTS = st.lists(
    EDGE_PIECES | st.sampled_from(["", " ", "-", "9", "b1", "\x00", "A", string.ascii_lowercase[:13]]), max_size=8
).map("".join)


@needs_hyperscan
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EDGE_TEXTS, min_size=1, max_size=6))
@example(["abcdefghijkl-b12345", "zabcdefghijkl-b1"])
@example(["aaaaaaaaaaaaaaaa-c" + "7" * 40])
@example(["zabcdefghijkl-d12345 and on"])
@example(["-baa-baaaaaaaa-c0"])  # a prefilter match where the strings end (see below)
def test_both_engines_find_hits_at_the_edge_of_their_reach(texts: list[str]) -> None:
    python, fast = EDGE_ENGINES
    assert fast is not None
    expected = [python.scan_text(text)[0] for text in texts]
    assert fast.mask("tool", "t", texts).value == expected
    for text in texts:
        assert fast.scan_text(text) == python.scan_text(text)


# Built-in findings written against each other and against their neighbours: a
# window's edge falls wherever one finding ends and the next begins.
GLUE = st.sampled_from(["", " ", "-", ".", ":", "0", "7", "x", "\x00", "\n", "é"])


@st.composite
def packed_findings(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(1, 6))):
        text, secret = draw(planted())
        parts.append(draw(st.sampled_from([text, secret])))
        parts.append(draw(GLUE) + " ".join(draw(st.lists(FILLER, max_size=2))) + draw(GLUE))
    return "".join(parts)


@needs_hyperscan
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(packed_findings(), min_size=1, max_size=5))
def test_both_engines_mask_packed_builtin_findings_alike(texts: list[str]) -> None:
    assert FAST.mask("tool", "t", texts) == PYTHON.mask("tool", "t", texts)
    for text in texts:
        assert FAST.scan_text(text) == PYTHON.scan_text(text)


# --- detectors asked only when a text is long enough --------------------------------------------

# Claims texts of 30 characters at least, and finds "zz" and three digits in shorter
# ones too: whether it is asked shows in what is masked. The other detector has every
# string looked at, the short ones included.
LONG_ONLY = [
    hinted_detector(
        "long_only", hinted(r"zz[0-9]{3}", prefilter=r"zz[0-9]{3}", literals=("zz",)), pseudonymize=False, min_length=30
    ),
    hinted_detector("qq", hinted(r"qq", prefilter=r"qq", literals=("qq",)), pseudonymize=False, min_length=2),
]
LONG_ONLY_ENGINES = (
    Masker(MaskingConfig(engine="python", detectors=LONG_ONLY, field_names=())),
    Masker(MaskingConfig(engine="hyperscan", detectors=LONG_ONLY, field_names=())) if FAST is not PYTHON else None,
)


@needs_hyperscan
@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["zz123", "a zz456\x00b", "x" * 29, "y" * 30, "", "\x00" * 31, "zz"]), max_size=6))
@example(["zz123", "x" * 29])  # no text long enough: not asked
@example(["zz123", "y" * 30])  # one is: asked, and finds what is in the short one
def test_a_detector_is_asked_alike_when_only_some_texts_are_long_enough(texts: list[str]) -> None:
    python, fast = LONG_ONLY_ENGINES
    assert fast is not None
    result = fast.mask("tool", "t", texts)
    assert result == python.mask("tool", "t", texts)
    long_enough = any(len(text) >= 30 for text in texts)
    assert ("zz123" in texts and not long_enough) == ("zz123" in result.value)


# --- matches where the strings end ----------------------------------------------------------------

# Hyperscan misses a match of "c[0-9]+" that ends where its data ends, 15 characters
# or more in, and one of "c[0-9]{1,5}" compiled without SOM_LEFTMOST; the gate puts a
# NUL after the last string, as between the others, so that none ends there.
AT_THE_END = hinted_detector(
    "at_the_end",
    [
        hinted(r"[a-z]{1,12}+-c[0-9]++", prefilter=r"c[0-9]+", reach=13),
        hinted(r"[a-z]{1,12}+-b[0-9]{1,5}+(?![0-9])", prefilter=r"b[0-9]{1,5}", reach=13),
        hinted(r"tok_[0-9]++", prefilter=r"tok_[0-9]+"),
    ],
    pseudonymize=False,
)


@needs_hyperscan
@pytest.mark.parametrize(
    "texts",
    [
        ["-baa-baaaaaaaa-c0"],
        ["zzzzzzzzzzzzzzzz abc-b1"],
        ["one", "zzzzzzzzzzzzzzzz abc-c1"],
        ["see the token tok_1"],
        ["zzzzzzzzzzzzzzzz abc-c1", "zzzzzzzzzzzzzzzz abc-b1"],
    ],
)
def test_a_prefilter_match_where_the_strings_end_is_found(texts: list[str]) -> None:
    python = Masker(MaskingConfig(engine="python", detectors=[AT_THE_END], field_names=()))
    fast = Masker(MaskingConfig(engine="hyperscan", detectors=[AT_THE_END], field_names=()))
    expected = [python.scan_text(text)[0] for text in texts]
    assert all(text.endswith("<at_the_end>") for text in expected[-1:])
    assert fast.mask("tool", "t", texts).value == expected
    assert fast.scan_text(texts[-1]) == python.scan_text(texts[-1])

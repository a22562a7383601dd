"""How strings are scanned: many at once, in windows, with remembered tokens.

A payload's strings are joined with NUL and scanned as one text by every
detector that finds there what it finds in each string alone; these tests hold
the joined scan, the windows the hyperscan engine hands out and the tokens the
scanner remembers to the plain answer: each string masked by itself.
"""

from __future__ import annotations

import re
import string
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers.masking_engines import FAST, PLAIN, PYTHON, TEXTS, needs_hyperscan
from helpers.masking_samples import FILLER, planted
from spanreplay.masking import BUILTIN_DETECTORS, Masker, MaskingConfig, Pattern, RegexDetector
from spanreplay.masking._checks import ipv6_ok
from spanreplay.masking._hinted import hinted, hinted_detector
from spanreplay.masking._hints import hints_of
from spanreplay.masking._regex import first_characters, holds_digit, shape_of

ENGINES = [PYTHON, FAST] if FAST is not PYTHON else [PYTHON]


@st.composite
def dense_messages(draw: st.DrawFn) -> list[str]:
    """Messages with a secret every few words, as in a conversation full of personal data."""
    messages = []
    for _ in range(draw(st.integers(1, 6))):
        parts = []
        for _ in range(draw(st.integers(1, 8))):
            text, _ = draw(planted())
            parts.append(text)
            parts.append(" ".join(draw(st.lists(FILLER, max_size=3))))
        messages.append(" ".join(parts))
    return messages


def alone(masker: Masker, texts: list[str]) -> list[str]:
    return [masker.scan_text(text)[0] for text in texts]


# --- many strings scanned as one give what each scanned alone gives -----------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dense_messages())
def test_dense_messages_are_masked_as_each_message_alone(messages: list[str]) -> None:
    for masker in ENGINES:
        assert masker.mask("model", "m", messages).value == alone(masker, messages)


@needs_hyperscan
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dense_messages())
def test_both_engines_mask_dense_payloads_alike(messages: list[str]) -> None:
    payload = {"messages": [{"role": "user", "content": [{"type": "text", "text": m}]} for m in messages]}
    assert FAST.mask("model", "m", payload) == PYTHON.mask("model", "m", payload)
    assert FAST.session().mask("model", "m", payload) == PYTHON.mask("model", "m", payload)


# Whole secrets and the pieces that end or start one, NUL among them.
JOINABLE = st.lists(
    st.sampled_from(
        [
            "-----BEGIN RSA PRIVATE KEY-----",
            "-----END RSA PRIVATE KEY-----",
            "MIIEpAIBAAKCAQEA",
            "eyJhbGci.eyJzdWIi.",
            "sig",
            "4111 1111 1111 1111",
            "4111",
            " 1111",
            "jane@example.com",
            "@example.com",
            "2001:db8::1",
            ":1",
            "+44 20 7946 0958",
            "\x00",
            " ",
            "x",
            "<email>",
        ]
    ),
    max_size=6,
).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(TEXTS | JOINABLE, min_size=2, max_size=10))
def test_strings_with_nul_and_fragments_are_masked_as_each_alone(texts: list[str]) -> None:
    # The fragments hold NUL, the character the strings are joined with, and pieces
    # of every kind of secret, so a finding that could run from one string into the
    # next, or see its neighbour, would show here.
    for masker in (*ENGINES, PLAIN):
        assert masker.mask("tool", "t", texts).value == alone(masker, texts)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dense_messages())
def test_a_masked_dense_payload_is_not_masked_again(messages: list[str]) -> None:
    for masker in (*ENGINES, PLAIN):
        once = masker.mask("model", "m", messages)
        again = masker.mask("model", "m", once.value)
        assert again.value == once.value
        assert again.fired == ()


# Detectors of one's own that see more than their own string: an anchor, a class
# that takes NUL, and a refine that reads the whole text. Each is asked string by string.
NOT_SEPARABLE = [
    RegexDetector("line_ref", r"^REF-[0-9]{4}"),
    # Two with prefilters, as the built-in ones have, that the hyperscan gate locates.
    hinted_detector("tail", hinted(r"END[0-9]+$", literals=("END",), prefilter=r"END[0-9]", reach=30)),
    hinted_detector("pair", hinted(r"ab.cd", literals=("ab",), prefilter=r"ab", reach=4)),
    RegexDetector("pair_as_written", r"ab.cd"),
    RegexDetector(
        "first_word",
        [Pattern(r"[a-z]{5}", refine=lambda text, start, end: (start, end) if start == 0 else None)],
    ),
]
OWN_FRAGMENTS = st.sampled_from(["REF-1234", "END42", "ab", "\x00", "cd", "abXcd", " ", "hello", "x", "9"])


@pytest.mark.parametrize("engine", ["python", "hyperscan"])
@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(OWN_FRAGMENTS, max_size=8).map("".join), min_size=2, max_size=6))
def test_detectors_that_see_past_their_string_are_asked_string_by_string(
    engine: Literal["python", "hyperscan"], texts: list[str]
) -> None:
    if engine == "hyperscan" and FAST is PYTHON:
        pytest.skip("the hyperscan package is not installed")
    masker = Masker(MaskingConfig(engine=engine, detectors=NOT_SEPARABLE, field_names=()))
    assert not any(hints_of(d).separable for d in NOT_SEPARABLE)
    assert masker.mask("tool", "t", texts).value == alone(masker, texts)


def test_a_detector_class_of_ones_own_is_asked_string_by_string() -> None:
    class Word:
        name: str = "word"
        pseudonymize: bool = False

        def __call__(self, text: str) -> list[tuple[int, int]]:
            # Sees its whole string: only a string that starts with the word counts.
            return [(0, 6)] if text.startswith("secret") else []

        def normalize(self, found: str) -> str:
            return found

    engines: tuple[Literal["python", "hyperscan"], ...] = ("python", "hyperscan") if FAST is not PYTHON else ("python",)
    for engine in engines:
        masker = Masker(MaskingConfig(engine=engine, detectors=[Word()], field_names=()))
        result = masker.mask("tool", "t", ["secret one", "a secret", "secret"])
        assert result.value == ["<word> one", "a secret", "<word>"]
        assert result.fired == (("[0]", "word"), ("[2]", "word"))


def test_a_match_cut_short_by_its_window_is_matched_again_whole() -> None:
    # An international number may run on: the prefilter matches its first digits,
    # and its window ends 40 characters on, where the run has taken 12 of its 19
    # digits. Against the whole text it has too many, and the number is its first
    # 15 digits (up to the second "(5)"), not the 12 the window saw.
    text = "call +1 " + " ".join(f"({i % 10})" for i in range(2, 20)) + " now"
    for masker in ENGINES:
        masked, fired = masker.scan_text(text)
        assert fired == ("phone",)
        assert masked.startswith("call <phone:")
        assert masked.endswith("> (6) (7) (8) (9) now")


# Key bodies near the line between the two kinds of "sk-" key: "ant-" or almost.
SK_BODIES = st.lists(st.sampled_from(["a", "n", "t", "-", "_", "A", "x9", "ant-", "ant", "an"]), max_size=14).map(
    "".join
)


@settings(max_examples=300, deadline=None)
@given(SK_BODIES, st.sampled_from(["", "key ", "x", "sk-"]))
def test_keys_that_begin_like_an_anthropic_key_are_found_alike_by_both_engines(body: str, before: str) -> None:
    # The OpenAI key's prefilter leaves out bodies that begin with "ant-", spelled
    # out character by character: every other body must still reach the detector.
    text = f"{before}sk-{body}{'Q' * 20} done"
    results = {masker.scan_text(text) for masker in ENGINES}
    assert len(results) == 1, results


@needs_hyperscan
def test_an_anthropic_key_does_not_ask_the_openai_detector() -> None:
    names = [d.name for d in FAST.detectors]
    openai = names.index("openai_api_key")
    text = "sk-ant-" + "a1B2" * 8
    located = FAST.gate.locate([text], text, range(len(names)))
    assert openai not in located
    assert names.index("anthropic_api_key") in located


# --- what an expression's parsed form tells -----------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "separable"),
    [
        (r"CUS-(?<![A-Za-z0-9_]CUS-)[0-9]{8}+(?![0-9])", True),
        (r"\bfoo\b", True),
        (r"(?P<sep>[ \-])[0-9]{4}(?P=sep)", True),
        (r"[\s\w\d]+", True),
        (r"a.b", False),  # "." takes NUL
        (r"[^a]", False),
        (r"\D", False),
        (r"[\x00-\x1f]", False),
        (r"^abc", False),  # anchors: NUL does not stand in for the start or end of a text
        (r"abc$", False),
        (r"\Aabc", False),
    ],
)
def test_which_expressions_scan_joined_strings_alike(expression: str, separable: bool) -> None:
    assert shape_of(re.compile(expression)).separable is separable


@pytest.mark.parametrize(
    ("expression", "holds"),
    [
        (r"[0-9]", True),
        (r"ab1", True),
        (r"(?:^|[^0-9A-Za-z_])[2-6][0-9]{11,18}", True),
        (r"1|2", True),
        (r"(?:a1|2b)", True),
        (r"x[0-9]+", True),
        (r"[0-9]?", False),  # may match nothing
        (r"[0-9]{0,3}x", False),
        (r"a|1", False),  # one branch holds none
        (r"[0-9a]", False),  # a class of more than digits
        (r"[^0-9]", False),
        (r"\d", False),  # Unicode digits to Python: not known to be ASCII ones
        (r"(?=1)a", False),  # a lookahead consumes nothing
        (r"a{,3}1{,3}", False),
        (r"[", False),  # not an expression at all: not known
    ],
)
def test_which_expressions_hold_a_digit_in_every_match(expression: str, holds: bool) -> None:
    assert holds_digit(expression) is holds


def test_the_number_prefilters_are_those_that_hold_a_digit() -> None:
    # The payload gate compiles these without SINGLEMATCH (see HyperscanGate).
    holding = {d.name for d in BUILTIN_DETECTORS if (p := hints_of(d).prefilter) is not None and holds_digit(p)}
    assert holding == {"payment_card", "iban", "us_ssn", "phone", "ipv4"}


def test_every_builtin_detector_but_private_keys_scans_joined_strings() -> None:
    joined = {d.name for d in BUILTIN_DETECTORS if hints_of(d).separable}
    assert joined == {d.name for d in BUILTIN_DETECTORS} - {"private_key"}


EXTENT_FRAGMENTS = st.sampled_from(["1", "12", "123", "-", "45", "ab", "a", "b:", " ", ".", "7", "\x00"])


@settings(max_examples=500, deadline=None)
@given(st.lists(EXTENT_FRAGMENTS, max_size=12).map("".join), st.integers(0, 6))
@example("123-45-7", 0)  # the lookahead reads two characters past the widest match
@example("ab:12", 0)
def test_an_attempt_reads_no_further_than_the_extent(text: str, at: int) -> None:
    # A match attempt at ``at`` against the text cut at ``at + extent`` finds what it
    # finds against the whole text: so a window may end there without a second look.
    for expression in (r"[0-9]{3}-[0-9]{2}(?![0-9]|-[0-9])", r"a(?:b:|b)(?=[0-9]{2})", r"(?:ab|a)[ .]?[0-9]{1,4}\b"):
        regex = re.compile(expression, re.ASCII)
        extent = shape_of(regex).extent
        assert extent is not None
        at = min(at, len(text))
        whole = regex.match(text, at)
        cut = regex.match(text, at, at + extent)
        assert (whole and whole.span()) == (cut and cut.span())


# --- built-in detectors written for speed find what their plain forms found ---------------------


def _ipv6_by_hints(text: str) -> list[tuple[int, int]]:
    """IPv6 addresses found the plain way: from each "::"-like hint, grow the run of hex
    digits, ":" and "." both ways, and keep whole runs that are addresses."""
    found = []
    pos = 0
    while (hint := re.compile(r":[0-9A-Fa-f]{0,4}:").search(text, pos)) is not None:
        colon = hint.start()
        start = colon
        while start > max(pos, colon - 5) and text[start - 1] in string.hexdigits:
            start -= 1
        end = colon
        while end < len(text) and text[end] in string.hexdigits + ":.":
            end += 1
        pos = end
        wordish = string.ascii_letters + string.digits + "_"
        if colon - start > 4 or (start > 0 and text[start - 1] in wordish + ":."):
            continue
        if (end < len(text) and text[end] in wordish) or end - start > 47:
            continue
        candidate = text[start:end]
        for _ in range(3):
            if ipv6_ok(candidate):
                found.append((start, start + len(candidate)))
                break
            if not candidate or candidate[-1] not in ".:":
                break
            candidate = candidate[:-1]
    return found


IPV6_FRAGMENTS = st.sampled_from(
    ["1", "a", "F", "0", "db8", "2001", "ffff", ":", "::", ".", "1.2.3.4", " ", "g", "_", "é", "12345", "ff02::1"]
)
IPV6 = next(d for d in BUILTIN_DETECTORS if d.name == "ipv6")


@settings(max_examples=400, deadline=None)
@given(st.lists(IPV6_FRAGMENTS, max_size=25).map("".join))
def test_the_ipv6_expression_finds_what_growing_runs_from_hints_finds(text: str) -> None:
    assert list(IPV6(text)) == _ipv6_by_hints(text)


@pytest.mark.parametrize("masker", ENGINES, ids=lambda m: m.gate.name)
@pytest.mark.parametrize(
    ("text", "name"),
    [("eyJhbGci.eyJzdWIi.", "jwt"), ("-----BEGIN PRIVATE KEY-----", "private_key")],
)
def test_the_shortest_findings_are_masked_alone_and_among_other_strings(masker: Masker, text: str, name: str) -> None:
    assert masker.scan_text(text) == (f"<{name}>", (name,))
    assert masker.mask("tool", "t", [text, "plain words here"]).value == [f"<{name}>", "plain words here"]


# --- remembered tokens ------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dense_messages())
def test_a_masker_that_remembers_tokens_masks_like_a_fresh_one(messages: list[str]) -> None:
    warm = Masker(MaskingConfig(engine="python", key="project-key"))
    for _ in range(2):
        result: Any = warm.mask("model", "m", messages)
    fresh = Masker(MaskingConfig(engine="python", key="project-key")).mask("model", "m", messages)
    assert result == fresh


# --- what a detector of one's own is asked by: characters its expressions start with -------------

STARTS = [
    (r"TCK-[0-9]{8}+", ("T",)),
    (r"(?:ab|cd)x", ("a", "c")),
    (r"[a-c]++@corp", ("a", "b", "c")),
    (r"^REF-[0-9]{4}", ("R",)),
    (r"(?<![a-z])q[0-9]", ("q",)),
    (r"(z)\1", ("z",)),
    (r"x?y", ()),  # may start with either: not known
    (r"[^a]b", ()),
    (r"(?i)abc", ()),
    (r'"quoted"', ()),  # a JSON writer escapes the quote: not found as it is in a payload
    (r"\dz", ()),
]


@pytest.mark.parametrize(("expression", "first"), STARTS)
def test_the_characters_an_expression_starts_with_are_read_from_it(expression: str, first: tuple[str, ...]) -> None:
    assert first_characters(re.compile(expression, re.ASCII)) == first


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([e for e, _ in STARTS]), st.text(alphabet='abcdqxyzRTEFCK-0123@orp"\n', max_size=30))
def test_every_match_starts_with_one_of_the_characters_read(expression: str, text: str) -> None:
    regex = re.compile(expression, re.ASCII)
    first = first_characters(regex)
    for match in regex.finditer(text):
        assert not first or text[match.start()] in first


@pytest.mark.parametrize("engine", ["python", "hyperscan"])
def test_a_detector_as_a_user_writes_it_is_found_wherever_it_matches(engine: Literal["python", "hyperscan"]) -> None:
    if engine == "hyperscan" and FAST is PYTHON:
        pytest.skip("the hyperscan package is not installed")
    own = [RegexDetector("ticket", r"TCK-[0-9]{4}"), RegexDetector("any_word", r"[a-z]{3}(?=!)")]
    masker = Masker(MaskingConfig(engine=engine, detectors=own, field_names=(), key=""))
    payload = {"a": "TCK-1234", "b": ["x", "say hey!"], "TCK-9999": "\x00TCK-0000\x00"}
    assert masker.mask("tool", "t", payload).value == {
        "a": "<ticket>",
        "b": ["x", "say <any_word>!"],
        "<ticket>": "\x00<ticket>\x00",
    }

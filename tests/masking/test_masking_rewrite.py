"""Findings resolved and replaced, held to a plain reference (helpers/masking_reference.py).

The scanner resolves the findings of all of a payload's strings in one pass over
them, sorted: it tells the strings apart by where each starts, skips findings
that overlap one before them, leaves placeholders alone and masks a string
again when a finding touched its neighbour. The reference does the same
the plain way, one string at a time: each detector asked about the string
itself, the findings sorted by (start, detector, end), the rules applied in a
loop. Payloads of many strings, dense with secrets of several kinds that touch,
overlap and repeat, must come out exactly as the reference masks each string.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers.masking_engines import FAST, PYTHON
from helpers.masking_reference import MASKERS, busy_text, reference
from spanreplay.masking import Masker, MaskingConfig, Pattern, RegexDetector, format_path
from spanreplay.masking._hinted import hinted, hinted_detector
from spanreplay.masking._joined import join, starts_of

Span = tuple[int, int]


class Bars:
    """A detector class of one's own that answers out of order and repeats itself:
    each run of "|" is found twice, and its first character once more."""

    name: str = "bars"
    pseudonymize: bool = True

    def __call__(self, text: str) -> Iterable[Span]:
        spans: list[Span] = []
        for match in re.finditer(r"\|+", text):
            spans += [match.span(), (match.start(), match.start() + 1), match.span()]
        return reversed(spans)

    def normalize(self, found: str) -> str:
        return found


# Detectors in front of the built-in ones: two patterns of one detector that find
# different lengths at the same start, a second detector named "email" (the names
# that fired are told apart by name), both with prefilters as the built-in ones
# have (the hyperscan gate locates them); the same two as a user writes them (no
# hints: both gates ask them through the literals derived from their expressions);
# and the class above.
OWN = [
    hinted_detector(
        "digits",
        [
            hinted(r"7[0-9]", prefilter=r"7[0-9]", reach=2, literals=("7",)),
            hinted(r"7[0-9]{3}", prefilter=r"7[0-9]{3}", reach=4, literals=("7",)),
        ],
        min_length=2,
    ),
    hinted_detector(
        "email", hinted(r"[a-z]+@corp\b", literals=("@corp",), prefilter=r"[a-z]@corp", reach=30), min_length=6
    ),
    RegexDetector("digits", [Pattern(r"7[0-9]"), Pattern(r"7[0-9]{3}")]),
    RegexDetector("email", r"[a-z]+@corp\b"),
    Bars(),
]

OWN_MASKERS = [
    Masker(MaskingConfig(engine=engine, key=key, extra_detectors=OWN, field_names=()))
    for engine in (["python", "hyperscan"] if FAST is not PYTHON else ["python"])
    for key in ("project-key", "")
]


# Strings repeat in payloads (a tool result quoted back): some are drawn twice.
BUSY_TEXTS = st.lists(busy_text(), min_size=1, max_size=12).flatmap(
    lambda texts: st.lists(st.sampled_from(texts), min_size=len(texts), max_size=len(texts) + 4)
)


def expected(masker: Masker, texts: list[str]) -> tuple[list[str], tuple[tuple[str, str], ...]]:
    masked = [reference(masker, text) for text in texts]
    fired = tuple((f"[{k}]", name) for k, (_, names) in enumerate(masked) for name in names)
    return [text for text, _ in masked], fired


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BUSY_TEXTS)
@example(["10.0.0.1sk-ant-" + "a" * 30, "x"])  # a placeholder that reveals a key
@example(["+44 20 7946 0958+44 20 7946 0958", "4111 1111 1111 1111+1 415 555 0132"])
@example(["<email>jane@example.com", "jane@example.com<email>"])
@example(["a7123b|||c", "7123 7123", "x@corp ab@corp"])
# Texts masked again together, some of them more than once, among texts that are not.
@example(["plain", "10.0.0.1sk-ant-" + "a" * 30, "none", "jane@example.com, bob@example.com.", "7123|x", "|7123"])
def test_many_strings_are_masked_as_the_reference_masks_each(texts: list[str]) -> None:
    for masker in (*MASKERS, *OWN_MASKERS):
        result = masker.mask("tool", "t", texts)
        value, fired = expected(masker, texts)
        assert result.value == value
        assert result.fired == fired
        assert [masker.scan_text(text) for text in texts] == [reference(masker, text) for text in texts]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(busy_text(), busy_text())
@example("jane@example.com", "jane@example.com, 10.0.0.1")  # the key's rule fires again under it
def test_object_keys_are_masked_as_the_reference_masks_them(key: str, value: str) -> None:
    for masker in (*MASKERS, *OWN_MASKERS):
        result = masker.mask("tool", "t", {key: value})
        masked_key, key_names = reference(masker, key)
        masked_value, value_names = reference(masker, value)
        assert result.value == {masked_key: masked_value}
        # Each (path, rule) once, where it first fired: the key's, then the value's.
        path = format_path((masked_key,))
        assert result.fired == tuple(dict.fromkeys([(path, name) for name in (*key_names, *value_names)]))


def test_touching_findings_are_masked_again_until_nothing_changes() -> None:
    # The address's placeholder, written against the key, no longer bounds it.
    text = "10.0.0.1sk-ant-" + "a" * 30
    masked, names = PYTHON.scan_text(text)
    assert names == ("ipv4", "anthropic_api_key")
    assert masked.endswith("><anthropic_api_key>")
    assert (masked, names) == reference(PYTHON, text)


@pytest.mark.parametrize("masker", [*MASKERS, *OWN_MASKERS], ids=lambda m: repr(m))
def test_a_string_alone_and_the_same_string_among_many_agree(masker: Masker) -> None:
    texts = ["x", "7123|a", "||", "jane@example.com, 10.0.0.1", "ab@corp 7999", "jane@example.com, 10.0.0.1"]
    value, fired = expected(masker, texts)
    result = masker.mask("tool", "t", texts)
    assert (result.value, result.fired) == (value, fired)
    assert masker.mask("tool", "t", value).fired == ()  # masking is idempotent


def test_the_reference_sees_what_the_scanner_must_handle() -> None:
    # The detectors of one's own do what the tests rely on: findings out of order,
    # repeated, and two lengths at one start.
    bars = Bars()
    assert list(bars("a||b")) == [(1, 3), (1, 2), (1, 3)]
    digits = OWN[0]
    assert sorted(digits("7123")) == [(0, 2), (0, 4)]


@given(st.lists(st.text(max_size=8), min_size=1, max_size=20))
def test_where_each_text_starts_among_texts_joined(texts: list[str]) -> None:
    joined = join(texts)
    starts = starts_of(texts)
    assert len(starts) == len(texts) + 1
    assert starts[-1] == len(joined) + 1
    for k, text in enumerate(texts):
        assert joined[starts[k] : starts[k + 1] - 1] == text

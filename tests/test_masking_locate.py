"""Where the hyperscan gate looks: prefilter matches found in the payload's strings, joined."""

from __future__ import annotations

import pytest

from spanreplay.masking import Masker, MaskingConfig, Pattern, RegexDetector
from test_masking_pipeline import needs_hyperscan

# --- matches where the strings end ----------------------------------------------------------------

# Hyperscan misses a match of "c[0-9]+" that ends where its data ends, 15 characters
# or more in, and one of "c[0-9]{1,5}" compiled without SOM_LEFTMOST; the gate puts a
# NUL after the last string, as between the others, so that none ends there.
AT_THE_END = RegexDetector(
    "at_the_end",
    [
        Pattern(r"[a-z]{1,12}+-c[0-9]++", prefilter=r"c[0-9]+", reach=13),
        Pattern(r"[a-z]{1,12}+-b[0-9]{1,5}+(?![0-9])", prefilter=r"b[0-9]{1,5}", reach=13),
        Pattern(r"tok_[0-9]++", prefilter=r"tok_[0-9]+"),
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

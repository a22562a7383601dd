"""The maskers the masking tests hold to each other, and text made to trip their detectors.

``FAST`` is the hyperscan gate where the package is installed and the Python
gate otherwise, so a test that compares ``FAST`` with ``PYTHON`` still runs
(trivially) without it; the tests that only mean something with both gates
carry ``needs_hyperscan``.
"""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from helpers.masking_samples import planted
from spanreplay.masking import Masker, MaskingConfig, hyperscan_available

needs_hyperscan = pytest.mark.skipif(not hyperscan_available(), reason="the hyperscan package is not installed")

PYTHON = Masker(MaskingConfig(engine="python", key="project-key"))
FAST = Masker(MaskingConfig(engine="hyperscan", key="project-key")) if hyperscan_available() else PYTHON
PLAIN = Masker(MaskingConfig(engine="python", key=""))

# Text made of the characters detectors care about, in runs: digits, separators,
# "@", ".", ":", hex letters, "<" and ">", "+", and fragments of real secrets.
FRAGMENTS = st.sampled_from(
    [
        "0", "1", "4", "9", "12", "555", "0132", "4111", " ", "-", ".", "(", ")", "+", "@", ":", "::", "/", "_",
        "a", "f", "x", "Z", "AK", "DE89", "GB82 WEST", "sk-", "ant-", "proj-", "eyJ", "gh", "p_", "xoxb-",
        "Bearer ", "earer", "xapp-1-", "://", "u:p@", "secret=", "AKIAIOSFODNN7EXAMPLE,",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "<", ">", "<email>", "<phone:0123abcd>", "-----BEGIN ",
        "PRIVATE KEY-----", "\n",
        "é", "😀", "\x00",
    ]
)  # fmt: skip
TEXTS = st.lists(FRAGMENTS | planted().map(lambda p: p[0]), max_size=40).map("".join)

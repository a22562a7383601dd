"""Where the tests' data and the checkout's other directories are, whatever folder a test sits in."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent
FIXTURES = TESTS / "fixtures"
# Trace files written by other projects, kept as they wrote them.
THIRD_PARTY = FIXTURES / "third_party"

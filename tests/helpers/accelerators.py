"""Marks for the tests that check a speed shortcut itself (``spanreplay._accelerators``).

Run with ``SPANREPLAY_ACCELERATE=0`` the whole suite takes the public paths; a
test that asserts an accelerator was taken then has nothing to check, and skips.
"""

from __future__ import annotations

import pytest

from spanreplay._accelerators import accelerate


def needs_accelerator(name: str) -> pytest.MarkDecorator:
    """Skip when accelerators are off: the test checks the ``name`` accelerator itself."""
    return pytest.mark.skipif(
        not accelerate(),
        reason=f"SPANREPLAY_ACCELERATE is off, so the {name} accelerator this test checks is not used",
    )

"""The public surface: everything exported is listed, and everything listed exists."""

from __future__ import annotations

import types

import spanreplay
import spanreplay.errors


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in vars(spanreplay).items()
        if not name.startswith("_") and name != "annotations" and not isinstance(value, types.ModuleType)
    }
    assert spanreplay.__all__ == sorted(spanreplay.__all__)
    assert public <= set(spanreplay.__all__)
    for name in spanreplay.__all__:
        assert hasattr(spanreplay, name), name


def test_every_error_derives_from_the_one_root() -> None:
    for name in spanreplay.errors.__all__:
        cls = getattr(spanreplay.errors, name)
        assert issubclass(cls, spanreplay.SpanReplayError), name
    assert issubclass(spanreplay.TraceFormatError, ValueError)
    assert issubclass(spanreplay.RunNotFoundError, LookupError)

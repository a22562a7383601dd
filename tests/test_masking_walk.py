"""The walk over a payload: what fired, where, in document order, each (path, rule) once."""

from __future__ import annotations

from spanreplay.masking import Masker, MaskingConfig, drop, mask


def test_a_path_rule_fires_in_document_order_after_a_string_before_it() -> None:
    masker = Masker(MaskingConfig(engine="python", key="k", rules=[mask("b"), drop("d")]))
    result = masker.mask("model", "x", {"a": "jane@example.com", "b": "secret", "c": "+44 20 7946 0958", "d": 1})
    assert result.fired == (("a", "email"), ("b", "mask:b"), ("c", "phone"), ("d", "drop:d"))
    # A short string between them changes nothing.
    result = masker.mask("model", "x", {"a": "jane@example.com", "z": "x", "b": "secret"})
    assert result.fired == (("a", "email"), ("b", "mask:b"))

"""The salted places of a masked input: found alike from a rescan of the strings that fired
(what recording does) and from masking the whole payload again (what replay does)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.masking_samples import emails, payloads_with_secrets, phones
from spanreplay.masking import Masker, MaskingConfig, mask
from spanreplay.masking._place_checks import CHECK_HEX, changed_place, checks_of, path_segments, places

BASE = Masker(MaskingConfig())
TWIN = BASE.salted(b"s" * 32)
RULED = Masker(MaskingConfig(rules=[mask("payload.note")]))


def _both(masker: Masker, value: Any) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    fired = masker.mask("tool", "t", value).fired
    twin = masker.salted(b"s" * 32)
    return places(twin.session(), "tool", "t", value, fired), places(twin.session(), "tool", "t", value)


@settings(max_examples=150, deadline=None)
@given(payloads_with_secrets())
def test_a_rescan_of_the_fired_strings_finds_what_masking_the_whole_payload_again_finds(
    sample: tuple[Any, list[str]],
) -> None:
    payload, _ = sample
    for masker in (BASE, RULED):
        rescanned, whole = _both(masker, payload)
        assert rescanned == whole


@given(st.lists(st.one_of(emails(), phones()), min_size=1, max_size=4, unique=True))
def test_equal_values_give_equal_checks_and_others_differ(values: list[str]) -> None:
    value = {"to": " and ".join(values)}
    found = places(TWIN.session(), "tool", "t", value)
    checks = checks_of(b"s" * 32, "tool:t#0", found)
    assert all(len(c) == CHECK_HEX for c in checks.get("to", []))
    assert changed_place(b"s" * 32, "tool:t#0", checks, found) is None
    # Another call id, another check: one value in two steps is not linked by the trace.
    if found:
        assert changed_place(b"s" * 32, "tool:t#1", checks, found) is not None


def test_paths_read_back_as_format_path_writes_them() -> None:
    assert path_segments('orders[0].customer["e-mail"]') == ("orders", 0, "customer", "e-mail")
    assert path_segments("$") == ()

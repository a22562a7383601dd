"""The walk over a payload: what fired, where, in document order, each (path, rule) once."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers.masking_reference import MASKERS, busy_text, reference_walk
from spanreplay.masking import Masker, MaskingConfig, drop, mask


def test_a_path_rule_fires_in_document_order_after_a_string_before_it() -> None:
    masker = Masker(MaskingConfig(engine="python", key="k", rules=[mask("b"), drop("d")]))
    result = masker.mask("model", "x", {"a": "jane@example.com", "b": "secret", "c": "+44 20 7946 0958", "d": 1})
    assert result.fired == (("a", "email"), ("b", "mask:b"), ("c", "phone"), ("d", "drop:d"))
    # A short string between them changes nothing.
    result = masker.mask("model", "x", {"a": "jane@example.com", "z": "x", "b": "secret"})
    assert result.fired == (("a", "email"), ("b", "mask:b"))


# --- the walk held to a plain reference -------------------------------------------------------


KEYS = (
    st.sampled_from(["a", "id", "note", "content", "password", "api_key", "e-mail", "jane@example.com"]) | busy_text()
)
SCALARS = (
    busy_text()
    | st.integers(-1000, 1000)
    | st.sampled_from([4111111111111111, 14155550132, -4111111111111111, 10**11])
    | st.none()
    | st.booleans()
)
PAYLOADS = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=25,
)
WALKERS = [
    *MASKERS,
    *(Masker(MaskingConfig(engine=m.gate.name, key="", field_names=("password", "token"))) for m in MASKERS),
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PAYLOADS)
@example({"jane@example.com": "jane@example.com, 10.0.0.1", "password": "x", "b": ["+44 20 7946 0958"]})
@example({"jane@example.com": 1, "JANE@example.com": {"bob@example.com": "bob@example.com"}})
@example([{"a": "jane@example.com"}, "jane@example.com", {"jane@example.com": ["jane@example.com"]}])
@example(["x@example.com", {"b": "10.0.0.1", "c": "x@example.com"}, "10.0.0.1", "x@example.com"])  # repeats
@example(["a@b.co", {"k": "a@b.co"}])  # the shortest string a detector finds something in
def test_payloads_are_walked_as_the_reference_walks_them(payload: Any) -> None:
    for masker in WALKERS:
        value, fired = reference_walk(masker, payload)
        result = masker.mask("tool", "t", payload)
        assert (result.value, result.fired) == (value, fired)
        # A session gives the same, the first time and when it remembers the strings.
        session = masker.session()
        for _ in range(2):
            remembered = session.mask("tool", "t", payload)
            assert (remembered.value, remembered.fired) == (value, fired)


def test_a_masked_key_and_its_value_fire_once_at_their_place() -> None:
    masker = Masker(MaskingConfig(engine="python", key=""))
    payload = {"jane@example.com": "jane@example.com", "bob@example.com": ["bob@example.com"], "c": "x"}
    result = masker.mask("tool", "t", payload)
    assert result.value == {"<email>": "<email>", "<email>#2": ["<email>"]} | {"c": "x"}
    assert result.fired == (('["<email>"]', "email"), ('["<email>#2"]', "email"), ('["<email>#2"][0]', "email"))


def test_keys_met_again_are_treated_as_the_first_time() -> None:
    # The walk remembers keys that nothing acts on; a key a rule or a detector acts on
    # must not be among them, whichever payload met it first.
    masker = Masker(MaskingConfig(engine="python", key="", field_names=("password",)))
    payloads = [{"note": "x", "password": "hunter2"}, {"jane@example.com": "a"}, {"note": "jane@example.com"}]
    first = [masker.mask("tool", "t", payload) for payload in payloads]
    again = [masker.mask("tool", "t", payload) for payload in payloads]
    assert [(r.value, r.fired) for r in again] == [(r.value, r.fired) for r in first]
    assert first[0].fired == (("password", "field:password"),)
    assert first[1].value == {"<email>": "a"}
    assert first[2].value == {"note": "<email>"}

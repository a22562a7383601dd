"""Masking keeps JSON types: a number stays a number, a bool a bool, null stays null.

The detectors read strings only, so an order id that happens to pass the Luhn
check is recorded as the number it is. A path rule or a field-name rule masks a
number into a number: ``0`` (``0.0``) without a key, a keyed pseudonym of the
same shape with one. Replay hands back values of the types the code had.
"""

from __future__ import annotations

import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay import semconv as sc
from spanreplay.masking import FieldNames, Masker, MaskingConfig, hyperscan_available, mask
from spanreplay.masking._checks import card_ok, luhn_ok

ENGINES = ["python", "hyperscan"] if hyperscan_available() else ["python"]
ORDER_ID = 3841810598748511232  # passes Luhn


def with_luhn(number: int) -> int:
    """``number`` with its last digit changed so that it passes the Luhn check."""
    base = number - number % 10
    return next(base + d for d in range(10) if luhn_ok(str(base + d)))


def shape(value: Any) -> Any:
    """The JSON types of ``value``, with its containers' structure."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return type(value).__name__


def test_the_luhn_valid_order_id_is_a_luhn_valid_number() -> None:
    # The case this file is about: without this, the tests below would test nothing.
    assert luhn_ok(str(ORDER_ID))
    assert luhn_ok("4111111111111111")
    assert card_ok("4111111111111111")


# --- the order id through the public API ------------------------------------------------------


@spanreplay.tool
def create_order(item: str) -> dict[str, Any]:
    return {"order_id": ORDER_ID, "item": item, "paid": True, "coupon": None}


@spanreplay.tool
def order_status(order_id: int) -> str:
    return "shipped" if order_id == ORDER_ID else "unknown"


def order_agent() -> tuple[Any, str]:
    order = create_order("lamp")
    return order, order_status(order["order_id"])


@pytest.mark.parametrize("key", [None, "project-key"], ids=["placeholders", "keyed"])
def test_a_luhn_valid_order_id_is_recorded_and_replayed_as_the_int_it_is(
    tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, key: str | None
) -> None:
    monkeypatch.delenv("SPANREPLAY_MASK_KEY", raising=False)
    directory = tmp_path / "traces"
    spanreplay.configure(
        trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=MaskingConfig(key=key)
    )
    with spanreplay.record(agent="orders") as run:
        recorded = order_agent()
    log = spanreplay.load(directory, run.run_id)
    assert log.events[0].output == {"order_id": ORDER_ID, "item": "lamp", "paid": True, "coupon": None}
    assert not any(name.endswith(sc.MASKED_SUFFIX) for event in log for name in event.attributes)

    with spanreplay.replay(directory, run.run_id) as replaying:
        order, status = order_agent()
    assert replaying.outcome == "completed"
    assert type(order["order_id"]) is int
    assert order["order_id"] == ORDER_ID
    assert (
        (order, status) == recorded == ({"order_id": ORDER_ID, "item": "lamp", "paid": True, "coupon": None}, "shipped")
    )


def test_a_number_in_a_text_is_still_scanned() -> None:
    # Strings are scanned as before: the card in a text is masked, the number beside it is not.
    result = Masker(MaskingConfig(engine="python")).mask(
        "tool", "t", {"note": "card 4111111111111111", "n": 4111111111111111}
    )
    assert result.value == {"note": "card <payment_card>", "n": 4111111111111111}
    assert result.fired == (("note", "payment_card"),)


# --- rules mask numbers into numbers ----------------------------------------------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_without_a_key_a_masked_number_becomes_zero_of_its_type(engine: str) -> None:
    masker = Masker(MaskingConfig(engine=engine, rules=[mask("**.account"), mask("flag")]))
    value = {"account": 4111111111111111, "x": [{"account": -12.5}], "token": 981234, "flag": True, "pin": None}
    result = masker.mask("tool", "t", value)
    assert result.value == {"account": 0, "x": [{"account": 0.0}], "token": 0, "flag": True, "pin": None}
    assert shape(result.value) == shape(value)
    # The record names each masked number's path and rule; the bool was left as it is.
    assert result.fired == (
        ("account", "mask:**.account"),
        ("x[0].account", "mask:**.account"),
        ("token", "field:token"),
    )
    assert masker.mask("tool", "t", result.value).value == result.value


@pytest.mark.parametrize("engine", ENGINES)
def test_with_a_key_a_masked_integer_is_a_pseudonym_of_the_same_shape(engine: str) -> None:
    masker = Masker(MaskingConfig(engine=engine, key="k", rules=[mask("**.account")]))
    values = [ORDER_ID, -ORDER_ID, 4111111111111111, 7, 42, 2**63 - 1, -(2**63) + 1, 10**18, 0, 18446744073709551615]
    masked = [masker.mask("tool", "t", {"account": v}).value["account"] for v in values]
    for value, pseudonym in zip(values, masked, strict=True):
        assert type(pseudonym) is int
        assert pseudonym != value
        assert len(str(abs(pseudonym))) == len(str(abs(value)))
        assert (pseudonym < 0) == (value < 0)
        assert not luhn_ok(str(abs(pseudonym)))  # never taken for a card in a text
        assert abs(pseudonym) <= (2**63 - 1 if abs(value) <= 2**63 - 1 else 2**64 - 1)
        # Idempotent: a pseudonym masks to itself.
        assert masker.mask("tool", "t", {"account": pseudonym}).value["account"] == pseudonym
    # Equal values give equal pseudonyms, different values of more than a few digits
    # different ones (a one-digit number has one pseudonym per key: 7 and 0 share it).
    assert masker.mask("tool", "u", {"account": ORDER_ID}).value["account"] == masked[0]
    long = [p for v, p in zip(values, masked, strict=True) if abs(v) >= 1000]
    assert len(set(long)) == len(long)
    assert masked[values.index(7)] == masked[values.index(0)]
    # The key decides the pseudonym.
    other = Masker(MaskingConfig(engine=engine, key="other", rules=[mask("**.account")]))
    assert other.mask("tool", "t", {"account": ORDER_ID}).value["account"] != masked[0]


@pytest.mark.parametrize("engine", ENGINES)
def test_with_a_key_a_masked_float_keeps_its_sign_magnitude_and_digits(engine: str) -> None:
    masker = Masker(MaskingConfig(engine=engine, key="k", rules=[mask("price")]))
    for value in (12.5, -0.000123, 1234.5678, 6.02e23, 0.1 + 0.2, 0.0, 5e-324, 1.7e308):
        masked = masker.mask("tool", "t", {"price": value}).value["price"]
        assert type(masked) is float
        assert math.isfinite(masked)
        assert masked != value
        assert math.copysign(1, masked) == math.copysign(1, value)
        if 1e-300 < abs(value) < 1e300:
            assert math.floor(math.log10(abs(masked))) == math.floor(math.log10(abs(value)))
            digits = repr(abs(value)).split("e")[0].replace(".", "").strip("0")
            assert len(repr(abs(masked)).split("e")[0].replace(".", "").strip("0")) == min(len(digits), 15)
        assert masker.mask("tool", "t", {"price": masked}).value["price"] == masked


def test_a_pseudonym_made_under_one_rule_is_left_alone_by_another() -> None:
    # A masked number that one tool's output hands to another tool's input, where
    # another rule (another label) applies, must mask to itself there too.
    masker = Masker(
        MaskingConfig(key="k", rules=[mask("account", part="output"), FieldNames(["acct_no"], pseudonymize=True)])
    )
    out = masker.mask("tool", "find", {"account": ORDER_ID}, part="output").value["account"]
    assert masker.mask("tool", "pay", {"acct_no": out}, part="input").value == {"acct_no": out}


def test_credentials_never_get_a_keyed_number() -> None:
    masker = Masker(MaskingConfig(key="k"))
    assert masker.mask("tool", "t", {"api_key": 123456789, "pin_token": 1.5}).value == {"api_key": 0, "pin_token": 0.0}


# --- random JSON, recorded and replayed --------------------------------------------------------

luhn_ints = st.one_of(
    st.integers(10**11, 10**18).map(with_luhn),
    st.integers(4 * 10**15, 5 * 10**15 - 1).map(with_luhn),  # 16-digit, Visa-like: a card to the detector
    st.integers(-(10**18), -(10**11)).map(lambda n: -with_luhn(-n)),
)
leaves = st.one_of(
    luhn_ints,
    st.integers(-(2**63) + 1, 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.none(),
    st.sampled_from(["lamp", "ORD-17", ""]),
)
# Keys a rule below masks (amount, flag), a credential name (token), and plain ones.
# A rule's key holds a scalar: an object or array a rule masks whole becomes one
# placeholder string, by design (test_a_rule_on_the_whole_payload).
keys = st.sampled_from(["order_id", "amount", "token", "flag", "items", "n"])
plain_keys = st.sampled_from(["order_id", "items", "n"])


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    entries = st.tuples(keys, leaves) | st.tuples(plain_keys, inner)
    return st.lists(inner, max_size=4) | st.lists(entries, max_size=4).map(dict)


documents = st.recursive(leaves, containers, max_leaves=12)


def _rules() -> list[Any]:
    return [mask("**.amount"), mask("**.flag")]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.sampled_from([None, "k"]))
def test_masking_random_json_keeps_every_type_and_both_engines_agree(document: Any, key: str | None) -> None:
    results = [Masker(MaskingConfig(engine=e, key=key, rules=_rules())).mask("tool", "t", document) for e in ENGINES]
    assert all(r == results[0] for r in results)
    assert shape(results[0].value) == shape(document)
    # Masking is idempotent: the masked form masks to itself, with nothing fired.
    again = Masker(MaskingConfig(engine=ENGINES[0], key=key, rules=_rules())).mask("tool", "t", results[0].value)
    assert again.value == results[0].value
    assert not again.fired


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.sampled_from([None, "k"]))
def test_random_json_with_luhn_valid_numbers_records_and_replays_without_divergence(
    document: Any, key: str | None
) -> None:
    def agent() -> Any:
        # The output of one tool is the input of the next: replay compares that input
        # in masked form, so every masked number must mask to itself.
        found = spanreplay.boundary("tool", "fetch", {}, lambda: document)
        spanreplay.boundary("tool", "store", {"doc": found}, lambda: "ok")
        return found

    with tempfile.TemporaryDirectory() as tmp:
        provider = TracerProvider()
        directory = Path(tmp) / "traces"
        config = MaskingConfig(key=key, rules=_rules())
        spanreplay.configure(trace_dir=directory, tracer_provider=provider, masking=config, raise_internal_errors=True)
        try:
            with spanreplay.record(agent="types") as run:
                agent()
            log = spanreplay.load(directory, run.run_id)
            with spanreplay.replay(log) as replaying:
                replayed = agent()
        finally:
            provider.shutdown()
    assert replaying.outcome == "completed"
    assert shape(replayed) == shape(document)
    assert replayed == log.events[0].output


def test_spanreplay_show_lists_a_masked_number(tmp_path: Path, provider: TracerProvider) -> None:
    directory = tmp_path / "traces"
    config = MaskingConfig(rules=[mask("balance", kind="tool")])
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=config)
    with spanreplay.record(agent="bank") as run:
        spanreplay.boundary("tool", "account", {"id": 7}, lambda: {"balance": 1520.75, "id": 7})
    event = spanreplay.load(directory, run.run_id).events[0]
    assert event.output == {"balance": 0.0, "id": 7}
    show = [sys.executable, "-m", "spanreplay.cli", "show", str(directory), run.run_id, "--seq", "1", "--json"]
    shown = subprocess.run(show, capture_output=True, text=True, check=True, timeout=60)
    assert orjson.loads(shown.stdout)["masked"] == {"output": [{"path": "balance", "rule": "mask:balance"}]}

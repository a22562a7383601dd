"""The masking pipeline: rules, field names, pseudonyms, idempotence, engines that agree."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.masking_engines import FAST, PLAIN, PYTHON, TEXTS, needs_hyperscan
from helpers.masking_samples import emails, payloads_with_secrets
from spanreplay.errors import ConfigurationError
from spanreplay.masking import (
    FieldNames,
    Masker,
    MaskingConfig,
    Pattern,
    RegexDetector,
    drop,
    format_path,
    hyperscan_available,
    is_placeholder,
    keep,
    mask,
    transform,
)

ENGINE_NAMES = ["python", "hyperscan"] if hyperscan_available() else ["python"]


def dumped(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


# --- no secret survives; the engines agree; masking is idempotent ----------------------------


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads_with_secrets())
def test_no_planted_secret_survives_masking(sample: tuple[Any, list[str]]) -> None:
    payload, secrets = sample
    for masker in {PYTHON, FAST}:
        data = dumped(masker.mask("tool", "lookup", payload).value)
        for secret in secrets:
            assert secret.encode() not in data, (masker.gate.name, secret)


@needs_hyperscan
@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_both_engines_mask_any_text_alike(text: str) -> None:
    assert FAST.scan_text(text) == PYTHON.scan_text(text)


@needs_hyperscan
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads_with_secrets())
def test_both_engines_mask_any_payload_alike(sample: tuple[Any, list[str]]) -> None:
    payload, _ = sample
    assert FAST.mask("tool", "x", payload) == PYTHON.mask("tool", "x", payload)


@needs_hyperscan
@settings(max_examples=100, deadline=None)
@given(st.lists(TEXTS, max_size=12))
def test_both_engines_agree_on_many_strings_scanned_together(texts: list[str]) -> None:
    # The hyperscan engine joins a payload's strings for one scan; hits must not
    # leak from one string into its neighbour.
    assert FAST.mask("tool", "x", texts) == PYTHON.mask("tool", "x", texts)


@settings(max_examples=200, deadline=None)
@given(TEXTS)
def test_masking_text_twice_changes_nothing_more(text: str) -> None:
    for masker in (PYTHON, PLAIN):
        once, _ = masker.scan_text(text)
        assert masker.scan_text(once) == (once, ())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads_with_secrets())
def test_masking_a_masked_payload_changes_nothing(sample: tuple[Any, list[str]]) -> None:
    payload, _ = sample
    for masker in (FAST, PLAIN):
        once = masker.mask("tool", "x", payload).value
        again = masker.mask("tool", "x", once)
        assert again.value == once
        assert again.fired == ()


# --- pseudonyms ----------------------------------------------------------------------------------


def test_the_same_value_under_the_same_key_gets_the_same_token() -> None:
    one = Masker(MaskingConfig(key="k1")).scan_text("a jane@example.com b")[0]
    two = Masker(MaskingConfig(key="k1")).scan_text("x JANE@example.com")[0]
    assert re.fullmatch(r"a <email:[0-9a-f]{16}> b", one)
    assert one.split()[1] == two.split()[1]  # emails compare case-insensitively


def test_forgetting_what_was_masked_keeps_every_token_the_same() -> None:
    masker = Masker(MaskingConfig(key="k1"))
    payload = {"to": "jane@example.com", "card": "4111 1111 1111 1111", "note": "call +44 20 7946 0958"}
    first = masker.mask("tool", "send", payload)
    masker.forget()
    again = masker.mask("tool", "send", payload)
    assert again.value == first.value
    assert again.value != payload
    assert again.fired == first.fired


def test_a_different_key_gives_a_different_token() -> None:
    one = Masker(MaskingConfig(key="k1")).scan_text("jane@example.com")[0]
    two = Masker(MaskingConfig(key="k2")).scan_text("jane@example.com")[0]
    assert one != two
    assert is_placeholder(one)
    assert is_placeholder(two)


def test_different_values_get_different_tokens_and_equal_ones_equal_tokens() -> None:
    masked, _ = PYTHON.scan_text("from a@example.com to b@example.com cc a@example.com")
    tokens = re.findall(r"<email:[0-9a-f]{16}>", masked)
    assert len(tokens) == 3
    assert tokens[0] == tokens[2] != tokens[1]


def test_the_same_digits_as_different_kinds_get_unrelated_tokens() -> None:
    masked, _ = PYTHON.scan_text("card 4111 1111 1111 1111, ssn 123-45-6789")
    card, ssn = re.findall(r"<\w+:([0-9a-f]{16})>", masked)
    assert card != ssn


def test_card_numbers_written_differently_share_a_token() -> None:
    masked, _ = PYTHON.scan_text("4111 1111 1111 1111 and 4111-1111-1111-1111 and 4111111111111111")
    assert len(set(re.findall(r"<payment_card:[0-9a-f]{16}>", masked))) == 1


def test_without_a_key_values_become_typed_placeholders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPANREPLAY_MASK_KEY", raising=False)
    masker = Masker(MaskingConfig())
    assert not masker.keyed
    assert masker.scan_text("jane@example.com +44 20 7946 0958") == ("<email> <phone>", ("email", "phone"))


def test_the_key_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPANREPLAY_MASK_KEY", "from-env")
    from_env = Masker(MaskingConfig()).scan_text("jane@example.com")[0]
    explicit = Masker(MaskingConfig(key="from-env")).scan_text("jane@example.com")[0]
    assert from_env == explicit != "<email>"


def test_credentials_never_become_keyed_tokens() -> None:
    masked, _ = PYTHON.scan_text("key AKIAIOSFODNN7EXAMPLE")
    assert masked == "key <aws_access_key_id>"


def test_the_key_appears_in_no_repr() -> None:
    config = MaskingConfig(key="very-secret-project-key")
    masker = Masker(config)
    for text in (repr(config), repr(masker), repr(masker.session()), str(config)):
        assert "very-secret-project-key" not in text


# --- rules ---------------------------------------------------------------------------------------

ORDERS = {
    "orders": [
        {"id": "ORD-1", "status": "open", "customer": {"name": "Jane Roe", "email": "jane@example.com"}},
        {"id": "ORD-2", "status": "paid", "customer": {"name": "John Doe", "email": "john@example.com"}},
    ],
    "note": "call +44 20 7946 0958",
}


def test_a_path_rule_masks_every_match_of_its_wildcard() -> None:
    masker = Masker(MaskingConfig(key="k", rules=[mask("orders[*].customer.name")]))
    result = masker.mask("tool", "orders", ORDERS)
    names = [o["customer"]["name"] for o in result.value["orders"]]
    assert all(re.fullmatch(r"<name:[0-9a-f]{16}>", n) for n in names)
    assert names[0] != names[1]
    assert ("orders[0].customer.name", "mask:orders[*].customer.name") in result.fired
    assert ("orders[1].customer.email", "email") in result.fired
    assert ORDERS["orders"][0]["customer"]["name"] == "Jane Roe"  # the input is not changed in place


def test_a_keep_rule_leaves_a_branch_deciding_field_readable() -> None:
    masker = Masker(MaskingConfig(rules=[keep("orders[*].customer.email", kind="tool", key="orders")]))
    kept = masker.mask("tool", "orders", ORDERS).value
    assert kept["orders"][1]["customer"]["email"] == "john@example.com"
    assert kept["note"] == "call <phone>"
    # The rule names its boundary: elsewhere the field is masked.
    assert masker.mask("tool", "other", ORDERS).value["orders"][1]["customer"]["email"] == "<email>"


def test_keep_protects_a_field_from_field_name_rules_too() -> None:
    masker = Masker(MaskingConfig(rules=[keep("pagination.next_token")]))
    value = {"pagination": {"next_token": "abc"}, "token": "abc"}
    assert masker.mask("tool", "list", value).value == {"pagination": {"next_token": "abc"}, "token": "<token>"}


def test_drop_removes_the_field_and_says_so() -> None:
    masker = Masker(MaskingConfig(rules=[drop("orders[*].customer")]))
    result = masker.mask("tool", "orders", ORDERS)
    assert result.value["orders"] == [{"id": "ORD-1", "status": "open"}, {"id": "ORD-2", "status": "paid"}]
    assert ("orders[0].customer", "drop:orders[*].customer") in result.fired


def test_transform_replaces_the_value_with_the_callbacks_result() -> None:
    def domain_only(email: str) -> str:
        return email.rsplit("@", 1)[-1]

    masker = Masker(MaskingConfig(rules=[transform("**.email", domain_only, name="email_domain")]))
    result = masker.mask("tool", "orders", ORDERS)
    assert [o["customer"]["email"] for o in result.value["orders"]] == ["example.com", "example.com"]
    assert ("orders[0].customer.email", "email_domain") in result.fired


def test_double_star_matches_at_any_depth_including_none() -> None:
    masker = Masker(MaskingConfig(key="k", rules=[mask("**.id")]))
    value = {"id": "a", "x": {"y": [{"id": "b"}]}}
    masked = masker.mask("tool", "t", value).value
    assert is_placeholder(masked["id"])
    assert is_placeholder(masked["x"]["y"][0]["id"])


def test_rules_apply_to_their_part_only() -> None:
    masker = Masker(MaskingConfig(rules=[drop("secret_plan", part="output")]))
    value = {"secret_plan": "world domination"}
    assert masker.mask("tool", "t", value, part="input").value == value
    assert masker.mask("tool", "t", value, part="output").value == {}


def test_the_first_matching_rule_decides() -> None:
    masker = Masker(MaskingConfig(rules=[keep("a.b"), drop("a.*")]))
    assert masker.mask("tool", "t", {"a": {"b": 1, "c": 2}}).value == {"a": {"b": 1}}


def test_a_rule_on_the_whole_payload() -> None:
    masker = Masker(MaskingConfig(rules=[mask("$", kind="tool", key="read_file")]))
    result = masker.mask("tool", "read_file", {"anything": [1, 2]})
    assert result.value == "<value>"
    assert result.fired == (("$", "mask:$"),)


def test_field_names_match_case_and_separator_variants_but_not_lookalikes() -> None:
    value = {
        "password": "a",
        "X-Api-Key": "b",
        "apiKey": "c",
        "refreshToken": "d",
        "AUTHORIZATION": "Basic Zm9vOmJhcg==",
        "client_secret": "e",
        "set-cookie": "f",
        "max_tokens": 1024,
        "token_count": 5,
        "input_tokens": 3,
        "secretary": "Ann",
        "pwd": "g",
        "passcode": "h",
        "db_pass": "i",
        "dbPass": "j",
        "passwordHash": "k",
        "bypass": "yes",
        "compass": "north",
    }
    masked = PYTHON.mask("tool", "t", value).value
    assert masked == {
        "password": "<password>",
        "X-Api-Key": "<api_key>",
        "apiKey": "<api_key>",
        "refreshToken": "<token>",
        "AUTHORIZATION": "<authorization>",
        "client_secret": "<secret>",
        "set-cookie": "<cookie>",
        "max_tokens": 1024,
        "token_count": 5,
        "input_tokens": 3,
        "secretary": "Ann",
        "pwd": "<pwd>",
        "passcode": "<passcode>",
        "db_pass": "<pass>",
        "dbPass": "<pass>",
        "passwordHash": "<password_hash>",
        "bypass": "yes",
        "compass": "north",
    }


def test_field_name_rules_of_your_own() -> None:
    masker = Masker(MaskingConfig(key="k", rules=[FieldNames(["date_of_birth"], pseudonymize=True)]))
    masked = masker.mask("tool", "t", {"dateOfBirth": "1990-01-01", "password": "x"}).value
    assert re.fullmatch(r"<date_of_birth:[0-9a-f]{16}>", masked["dateOfBirth"])
    assert masked["password"] == "<password>"


def test_empty_and_null_credentials_are_left_as_they_are() -> None:
    value = {"password": None, "token": "", "api_key": False}
    assert PYTHON.mask("tool", "t", value).value == value


# --- what the result records -------------------------------------------------------------------


def test_fired_paths_name_the_place_and_rule_never_the_value() -> None:
    value = {"messages": [{"content": [{"text": "mail jane@example.com"}]}], "weird key": "ssn 123-45-6789"}
    result = PYTHON.mask("model", "claude", value)
    assert result.fired == (("messages[0].content[0].text", "email"), ('["weird key"]', "us_ssn"))
    assert "jane" not in repr(result.fired)
    assert "6789" not in repr(result.fired)
    assert result.fired_records()[0] == {"path": "messages[0].content[0].text", "rule": "email"}


def test_format_path() -> None:
    assert format_path(()) == "$"
    assert format_path(("a", 0, "b c", "d")) == 'a[0]["b c"].d'
    assert format_path((3,)) == "[3]"


def test_keys_that_mask_alike_stay_apart() -> None:
    result = PLAIN.mask("tool", "t", {"a@example.com": 1, "b@example.com": 2})
    assert result.value == {"<email>": 1, "<email>#2": 2}
    assert ('["<email>"]', "email") in result.fired


def test_the_detectors_leave_numbers_as_they_are() -> None:
    # Ids are numbers far more often than card numbers are, and a masked value keeps
    # its JSON type: a number is masked only by a rule that names it (test_masking_types).
    payload = {"card": 4111111111111111, "order": 1234567890123456, "n": 7, "ratio": 4111111111111111.5}
    result = PLAIN.mask("tool", "t", payload)
    assert result.value == payload
    assert not result.fired


def test_a_whole_float_of_card_length_is_masked_as_a_float() -> None:
    # No id is a float: a card number read into one (a spreadsheet, a JSON document) is masked.
    result = PLAIN.mask("tool", "t", {"card": 4111111111111111.0, "order": 1234567890123456.0, "price": 12.0})
    assert result.value == {"card": 0.0, "order": 1234567890123456.0, "price": 12.0}
    assert result.fired == (("card", "payment_card"),)
    keyed = Masker(MaskingConfig(key="k1")).mask("tool", "t", [4111111111111111.0]).value
    assert type(keyed[0]) is float
    assert keyed[0] != 4111111111111111.0
    assert Masker(MaskingConfig(key="k1")).mask("tool", "t", keyed).value == keyed  # idempotent


def test_objects_are_masked_in_the_form_the_codec_writes() -> None:
    class Color(enum.Enum):
        RED = "red"

    @dataclasses.dataclass
    class Customer:
        email: str
        since: datetime.date
        color: Color

    result = PLAIN.mask("tool", "t", {"c": Customer("jane@example.com", datetime.date(2024, 1, 2), Color.RED)})
    assert result.value == {"c": {"email": "<email>", "since": "2024-01-02", "color": "red"}}


def test_a_disabled_masker_returns_payloads_as_they_are() -> None:
    payload = {"email": "jane@example.com"}
    assert Masker(MaskingConfig(enabled=False)).mask("tool", "t", payload).value is payload


def test_a_clean_payload_comes_back_uncopied() -> None:
    payload = {"messages": [{"role": "user", "content": "what is the weather in Oslo on 2024-03-05?"}]}
    assert FAST.mask("model", "m", payload).value is payload


# --- the session cache ---------------------------------------------------------------------------


@settings(max_examples=25, deadline=None)
@given(st.lists(emails(), min_size=1, max_size=5))
def test_a_session_masks_a_growing_conversation_like_a_fresh_masker(addresses: list[str]) -> None:
    session = FAST.session()
    messages: list[dict[str, str]] = []
    for turn, address in enumerate(addresses):
        messages.append({"role": "user", "content": f"turn {turn}: write to {address} " + "padding " * 10})
        with_session = session.mask("model", "m", {"messages": messages})
        assert with_session == FAST.mask("model", "m", {"messages": messages})
    assert session.cached_strings >= len(addresses)


class Counting:
    """A detector that finds nothing and notes every text it is asked about."""

    name = "counted"
    pseudonymize = True

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, text: str) -> list[tuple[int, int]]:
        self.asked.append(text)
        return []

    def normalize(self, found: str) -> str:
        return found


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_a_session_does_not_mask_a_remembered_message_again(engine: str) -> None:
    counting = Counting()
    session = Masker(MaskingConfig(engine=engine, extra_detectors=[counting])).session()
    long_text = "mail jane@example.com " + "about the order " * 10
    session.mask("model", "m", {"messages": [long_text]})
    assert long_text in counting.asked
    counting.asked.clear()
    second = session.mask("model", "m", {"messages": [long_text, "and call +44 20 7946 0958 please"]})
    assert counting.asked == ["and call +44 20 7946 0958 please"]
    assert second.fired == (("messages[0]", "email"), ("messages[1]", "phone"))


# --- configuration errors ------------------------------------------------------------------------


def test_bad_configuration_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="use 'auto', 'hyperscan' or 'python'"):
        MaskingConfig(engine="fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="extra_detectors"):
        MaskingConfig(rules=[object()])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="part is 'body'"):
        mask("a", part="body")
    with pytest.raises(ConfigurationError, match="needs fn="):
        transform("a", None)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="cannot be read"):
        mask("a[")


# --- engine hints of old: accepted, ignored, and never a reason to skip -----------------------------


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_old_engine_hints_are_ignored_with_a_warning_and_skip_nothing(engine: str) -> None:
    # Each hint is wrong: a prefilter hyperscan cannot compile, one that never matches,
    # literals that never occur, a reach of nothing, a shortest text too long.
    with pytest.warns(DeprecationWarning, match=r"RegexDetector\('x'\) was given prefilter=: engine hints are"):
        uncompilable = RegexDetector("x", r"a", prefilter=r"(?<=b)a")
    with pytest.warns(DeprecationWarning, match="min_length=, prefilter=, reach=, literals=: .*remove the argument"):
        wrong = RegexDetector("ticket", r"TCK-[0-9]{4}", min_length=40, prefilter="zzz", reach=1, literals=["q"])
    with pytest.warns(DeprecationWarning, match=re.escape("Pattern('T[0-9]') was given prefilter=, reach=")):
        pattern = Pattern(r"T[0-9]", prefilter="zzz", reach=3)
    masker = Masker(MaskingConfig(engine=engine, extra_detectors=[uncompilable, wrong, RegexDetector("t", pattern)]))
    assert masker.scan_text("ba TCK-1234") == ("b<x> <ticket>", ("x", "ticket"))
    assert masker.mask("tool", "t", {"k": "see TCK-1234", "n": "T1 ok"}).value == {"k": "see <ticket>", "n": "<t> ok"}


class OldStyle:
    """A detector class of one's own written when detectors carried engine hints."""

    name = "old"
    pseudonymize = False
    min_length = 50
    literals = ("never",)
    prefilter = "never"
    separable = True

    def __call__(self, text: str) -> list[tuple[int, int]]:
        at = text.find("OLD")
        return [] if at < 0 else [(at, at + 3)]

    def normalize(self, found: str) -> str:
        return found


@pytest.mark.parametrize("engine", ENGINE_NAMES)
def test_a_detector_class_with_old_hints_is_warned_about_and_asked_everywhere(engine: str) -> None:
    with pytest.warns(DeprecationWarning, match="Detector 'old' has min_length, literals, prefilter, separable"):
        masker = Masker(MaskingConfig(engine=engine, extra_detectors=[OldStyle()]))
    result = masker.mask("tool", "t", {"a": "an OLD one", "b": ["OLD"]})
    assert result.value == {"a": "an <old> one", "b": ["<old>"]}


def test_findings_that_hide_each_other_are_masked_until_none_is_left() -> None:
    # "ab" counts only after a non-letter: each masked "ab" reveals the next one.
    chained = RegexDetector("x", r"a(?<![a-z]a)b")
    masker = Masker(MaskingConfig(detectors=[chained], field_names=()))
    assert masker.scan_text("ab" * 3) == ("<x>" * 3, ("x",))
    # A longer chain would cost a pass per link: the text is withheld instead.
    assert masker.scan_text("ab" * 6) == ("<masked>", ("x",))
    assert masker.scan_text("<masked>") == ("<masked>", ())

"""The secrets the masking tests plant are what they claim to be.

A card passes Luhn, an IBAN its checksum: a test that finds them masked is not
passing on malformed data. The samples are in helpers/masking_samples.py.
"""

from __future__ import annotations

from hypothesis import given, settings

from helpers.masking_samples import cards, ibans, ipv4s, ipv6s, ssns
from spanreplay.masking._checks import card_ok, iban_ok, ipv4_ok, ipv6_ok, ssn_ok


@settings(max_examples=50)
@given(cards())
def test_sample_cards_pass_luhn_and_network(card: str) -> None:
    assert card_ok(card.replace(" ", "").replace("-", ""))


@settings(max_examples=50)
@given(ibans())
def test_sample_ibans_pass_their_checksum(iban: str) -> None:
    assert iban_ok(iban.replace(" ", ""))


@settings(max_examples=50)
@given(ssns(), ipv4s(), ipv6s())
def test_sample_numbers_pass_their_checks(ssn: str, ipv4: str, ipv6: str) -> None:
    assert ssn_ok(ssn)
    assert ipv4_ok(ipv4)
    assert ipv6_ok(ipv6)

"""Built-in detectors: what each one masks, and the look-alikes it must leave alone."""

from __future__ import annotations

import pytest

from spanreplay.masking import Masker, MaskingConfig, RegexDetector
from spanreplay.masking._checks import card_ok, iban_ok, ipv4_ok, ipv6_ok, luhn_ok, ssn_ok

ENGINES = ["python", "hyperscan"]


@pytest.fixture(scope="module", params=ENGINES)
def masker(request: pytest.FixtureRequest) -> Masker:
    if request.param == "hyperscan":
        pytest.importorskip("hyperscan")
    return Masker(MaskingConfig(engine=request.param))


AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

# (detector name, text holding one finding, the finding)
FINDINGS = [
    ("email", "write to jane.doe+billing@mail.example.co.uk today", "jane.doe+billing@mail.example.co.uk"),
    ("email", "end of sentence: ops@example.com.", "ops@example.com"),
    ("email", "<a href='mailto:x.y@corp-mail.io'>", "x.y@corp-mail.io"),
    ("phone", "call +1 (415) 555-0132 now", "+1 (415) 555-0132"),
    ("phone", "UK office +44 20 7946 0958.", "+44 20 7946 0958"),
    ("phone", "intl +33 1 23 45 67 89 ok", "+33 1 23 45 67 89"),
    ("phone", "desk (415) 555-0132", "(415) 555-0132"),
    ("phone", "desk 415-555-0132, ext 4", "415-555-0132"),
    ("phone", "desk 415.555.0132", "415.555.0132"),
    ("phone", "London 020 7946 0958", "020 7946 0958"),
    ("phone", "mobile 07700 900123", "07700 900123"),
    ("phone", "Paris 01 23 45 67 89", "01 23 45 67 89"),
    ("phone", "Berlin 030 12345678", "030 12345678"),
    ("payment_card", "card 4111 1111 1111 1111 exp 12/29", "4111 1111 1111 1111"),
    ("payment_card", "card 4111-1111-1111-1111", "4111-1111-1111-1111"),
    ("payment_card", "card 5555555555554444", "5555555555554444"),
    ("payment_card", "amex 3782 822463 10005", "3782 822463 10005"),
    ("payment_card", "amex 378282246310005.", "378282246310005"),
    ("iban", "pay DE89 3704 0044 0532 0130 00 please", "DE89 3704 0044 0532 0130 00"),
    ("iban", "pay GB82WEST12345698765432", "GB82WEST12345698765432"),
    ("iban", "FR1420041010050500013M02606 is mine", "FR1420041010050500013M02606"),
    ("us_ssn", "ssn 123-45-6789 on file", "123-45-6789"),
    ("ipv4", "from 203.0.113.7 via", "203.0.113.7"),
    ("ipv4", "host 10.1.2.3:8080", "10.1.2.3"),
    ("ipv6", "from 2001:db8:85a3::8a2e:370:7334 via", "2001:db8:85a3::8a2e:370:7334"),
    ("ipv6", "peer [2001:0db8:0000:0000:0000:ff00:0042:8329]:443", "2001:0db8:0000:0000:0000:ff00:0042:8329"),
    ("ipv6", "mapped ::ffff:192.0.2.128 here", "::ffff:192.0.2.128"),
    ("anthropic_api_key", "key=sk-ant-api03-" + "Ab1_" * 20 + " end", "sk-ant-api03-" + "Ab1_" * 20),
    ("openai_api_key", "OPENAI_API_KEY=sk-proj-" + "x9Y" * 16, "sk-proj-" + "x9Y" * 16),
    ("openai_api_key", "legacy sk-" + "a1B2" * 12, "sk-" + "a1B2" * 12),
    ("aws_access_key_id", "aws AKIAIOSFODNN7EXAMPLE key", "AKIAIOSFODNN7EXAMPLE"),
    ("github_token", "token ghp_" + "a" * 36 + " x", "ghp_" + "a" * 36),
    (
        "github_token",
        "pat github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    ),
    ("slack_token", "slack xoxb-123456789012-abcdefABCDEF", "xoxb-123456789012-abcdefABCDEF"),
    ("bearer_token", "Authorization: Bearer 9f8e7d6c5b4a3f2e1d0c", "9f8e7d6c5b4a3f2e1d0c"),
    ("bearer_token", "header BEARER abc.def-123_456~xyz", "abc.def-123_456~xyz"),
    (
        "jwt",
        "t=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U;",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    # Forms the detectors once let through.
    ("email", "write to info@bücher.de today", "info@bücher.de"),
    ("email", "contact ops@例え.テスト now", "ops@例え.テスト"),
    ("email", "q=" + "%20".join(["lorem"] * 20) + "%20jane@example.com&x=1", "jane@example.com"),
    ("phone", "ligue (11) 91234-5678 hoje", "(11) 91234-5678"),
    ("phone", "fixo (21) 2345-6789.", "(21) 2345-6789"),
    ("phone", "звоните 8 (495) 123-45-67", "8 (495) 123-45-67"),
    ("phone", "моб. 8 912 345-67-89", "8 912 345-67-89"),
    ("phone", "手机 138 0013 8000", "138 0013 8000"),
    ("phone", "call 0044 20 7946 0958 now", "0044 20 7946 0958"),
    ("phone", "US 001 (415) 555-0132", "001 (415) 555-0132"),
    ("payment_card", "card 4111.1111.1111.1111 ok", "4111.1111.1111.1111"),
    ("payment_card", "card 4111\u00a01111\u00a01111\u00a01111 ok", "4111\u00a01111\u00a01111\u00a01111"),
    ("payment_card", "carte 4111\u202f1111\u202f1111\u202f1111", "4111\u202f1111\u202f1111\u202f1111"),
    ("payment_card", "card 4111 1111-1111.1111 ok", "4111 1111-1111.1111"),
    ("us_ssn", "ssn 123 45 6789 on file", "123 45 6789"),
    ("us_ssn", "SSN: 123456789 on file", "123456789"),
    ("us_ssn", "Social Security Number 123456789", "123456789"),
    ("bearer_token", "Authorization: Bearer AbCdEfGhIjKlMnOpQr", "AbCdEfGhIjKlMnOpQr"),
    ("bearer_token", "Authorization: Bearer qwertzuiopasdfghjklyx", "qwertzuiopasdfghjklyx"),
    ("anthropic_api_key", "key sk-ant-api03-Ab1_\u200b" + "Ab1_" * 8 + " end", "sk-ant-api03-Ab1_\u200b" + "Ab1_" * 8),
    ("openai_api_key", "k=sk-proj-x9Yx9\u200b" + "x9Y" * 8, "sk-proj-x9Yx9\u200b" + "x9Y" * 8),
    ("github_token", "token ghp_" + "a" * 20 + "\u200b" + "a" * 16 + " x", "ghp_" + "a" * 20 + "\u200b" + "a" * 16),
    # Forms found once spanreplay's own spans were masked whoever set them (issue 25).
    ("aws_secret_access_key", f"aws_secret_access_key = {AWS_SECRET}\n", AWS_SECRET),
    ("aws_secret_access_key", f'{{"SecretAccessKey": "{AWS_SECRET}"}}', AWS_SECRET),
    ("aws_secret_access_key", f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET}", AWS_SECRET),
    ("aws_secret_access_key", f"password: '{AWS_SECRET}'", AWS_SECRET),
    (
        "slack_token",
        "app xapp-1-A0123456789-1234567890123-abcdef0123456789 ok",
        "xapp-1-A0123456789-1234567890123-abcdef0123456789",
    ),
    ("url_password", "DATABASE_URL=postgres://app:s3cr3t!@localhost:5432/db", "s3cr3t!"),
    ("url_password", "redis://:hunter2@cache:6379/0", "hunter2"),
    ("url_password", "see https://bob:p%40ss:w0rd@git.internal/repo.git", "p%40ss:w0rd"),
    (
        "private_key",
        "k:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----\nnext",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----",
    ),
]


@pytest.mark.parametrize(("name", "text", "secret"), FINDINGS, ids=[f"{f[0]}-{i}" for i, f in enumerate(FINDINGS)])
def test_each_detector_replaces_exactly_its_finding(masker: Masker, name: str, text: str, secret: str) -> None:
    masked, fired = masker.scan_text(text)
    assert fired == (name,)
    assert masked == text.replace(secret, f"<{name}>")


# Things that look like personal data and are not; each must come through untouched.
LOOK_ALIKES = [
    "order 1234567890123456 shipped",  # 16 digits, no card network starts with 1
    "order ORD-2024-000123 and invoice INV-778812",
    "ids 7700123456789012 and 9000000000000000",
    "4111111111111112",  # a card number that fails Luhn
    "2024-03-05T12:30:45.123Z",
    "1700000000000 ms since the epoch, 1712345678 s",
    "at 12:30:45, 09:30 and 23:59:59",
    "05.03.2024 10:30 and 05/03/2024",
    "version 3.11.7, v2.10.0, 1.2.3-rc.1, 10.0.19045",
    "uuid 123e4567-e89b-12d3-a456-426614174000",
    "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "price $1,299.99, EUR 45.50, 0.99 and 19.99",
    "qty 3, 42 items, 7 days, 120 minutes",
    "call me at lunch, ext. 1234",
    "ratio 1::2 in a slice, std::vector, a[1::2]",
    "loopback 127.0.0.1 and ::1 and 0.0.0.0",
    "netmask 255.255.255.0",
    "mac 00:1a:2b:3c:4d:5e",
    "ISO 8601 and RFC 5321 and PEP 8",
    "the bearer of bad news",
    "Bearer token",
    "risk-management-framework-for-enterprise-2024",
    "user@localhost",
    "@mention and #tag and a @ sign",
    "123-45-678 and 000-12-3456 and 666-12-3456",
    "+1 to that, C++11, +100.00",
    "pages 100-120, 2019-2024",
    "Bearer authentication, BEARER AUTHORIZATION",
    "order 123456789 and ref 0012345678",
    "8 items, 12 (13) 14",
    "see https://example.com/a:b and http://host:8080/path, mail x@y.z",
    "secret: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b",  # a hex digest, not a key
    "password: ThisIsJustAVeryLongPassphraseWithoutDig",  # no digit, "/" or "+"
    "xapplication-settings and xapp-short",
]


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alikes_stay_untouched(masker: Masker, text: str) -> None:
    assert masker.scan_text(text) == (text, ())


def test_a_payload_of_look_alikes_is_returned_as_it_is(masker: Masker) -> None:
    payload = {"notes": LOOK_ALIKES, "count": 12345678901234, "price": 19.99}
    result = masker.mask("tool", "search", payload)
    assert result.value is payload
    assert result.fired == ()


def test_a_number_followed_by_an_address_masks_both_and_masking_again_changes_nothing(masker: Masker) -> None:
    text = "from +44 20 7946 0958 10.20.30.40"
    masked, fired = masker.scan_text(text)
    assert set(fired) == {"phone", "ipv4"}
    assert "7946" not in masked
    assert "10.20" not in masked
    assert masker.scan_text(masked) == (masked, ())


def test_luhn_and_network_checks() -> None:
    assert luhn_ok("4111111111111111")
    assert not luhn_ok("4111111111111121")
    assert card_ok("378282246310005")
    assert not card_ok("1234567812345670")  # passes Luhn, no network starts with 1
    assert not card_ok("37828224631000")  # Amex numbers have 15 digits


def test_iban_checksum_and_country_length() -> None:
    assert iban_ok("DE89370400440532013000")
    assert not iban_ok("DE89370400440532013001")
    assert not iban_ok("DE8937040044053201300")  # one digit short for Germany
    assert not iban_ok("ZZ89370400440532013000")  # no such country


def test_ssn_and_ip_checks() -> None:
    assert ssn_ok("123-45-6789")
    assert not ssn_ok("900-45-6789")
    assert not ssn_ok("123-00-6789")
    assert ipv4_ok("8.8.8.8")
    assert not ipv4_ok("256.1.1.1")
    assert not ipv4_ok("01.2.3.4")
    assert ipv6_ok("2001:db8::1")
    assert not ipv6_ok("fe80::1:2:3")
    assert not ipv6_ok("2001:db8::1::2")


def test_ip_addresses_can_be_left_unmasked() -> None:
    masker = Masker(MaskingConfig(ip_addresses=False))
    text = "from 203.0.113.7 and 2001:db8::1"
    assert masker.scan_text(text) == (text, ())


def test_a_detector_can_be_disabled_by_name() -> None:
    masker = Masker(MaskingConfig(disable={"email"}))
    assert masker.scan_text("jane@example.com 123-45-6789") == ("jane@example.com <us_ssn>", ("us_ssn",))


def test_a_private_key_without_its_end_line_is_masked_to_the_end() -> None:
    masker = Masker(MaskingConfig())
    text = "log: -----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n(cut)"
    assert masker.scan_text(text) == ("log: <private_key>", ("private_key",))


def test_overlapping_findings_go_to_the_earliest_then_the_first_detector() -> None:
    masker = Masker(MaskingConfig())
    # A JWT after "Bearer": both the bearer and the JWT detectors find it; the JWT
    # detector comes first in priority.
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
    assert masker.scan_text(f"Bearer {jwt}") == ("Bearer <jwt>", ("jwt",))


def test_a_custom_regex_detector_masks_its_pattern() -> None:
    ticket = RegexDetector("ticket_id", r"TCK-[0-9]{8}+")
    for engine in ENGINES:
        if engine == "hyperscan":
            pytest.importorskip("hyperscan")
        masker = Masker(MaskingConfig(extra_detectors=[ticket], key="k", engine=engine))
        masked, fired = masker.scan_text("see TCK-12345678 and TCK-12345678")
        assert fired == ("ticket_id",)
        token = masked.split()[1]
        assert token.startswith("<ticket_id:")
        assert masked == f"see {token} and {token}"


# 40 KB runs that make textbook patterns backtrack (a hex run takes a textbook email
# pattern most of a second) or call back per position. Their speed is measured in
# benchmarks/bench_masking.py; here, that each engine masks them alike and leaves
# these (which hold nothing) untouched.
ADVERSARIAL = {
    "hex run": "0123456789abcdef" * 2500,
    "digit run": "4" * 40_000,
    "'@.' repeated": "@." * 20_000,
    "'a@' repeated": "a@" * 20_000,
    "'a.' repeated": "a." * 20_000,
    "'::' repeated": "::" * 20_000,
    "'1:2:' repeated": "1:2:" * 10_000,
    "spaced digits": "7 " * 20_000,
    "'+1 ' repeated": "+1 " * 13_000,
    "'eyJ' repeated": "eyJa." * 8_000,
    "BEGIN without END": "-----BEGIN" * 4_000,
}


@pytest.mark.parametrize("text", list(ADVERSARIAL.values()), ids=list(ADVERSARIAL))
def test_adversarial_runs_are_left_alone_by_both_engines(masker: Masker, text: str) -> None:
    assert masker.scan_text(text) == (text, ())

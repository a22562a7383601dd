"""Secrets of every kind the built-in detectors know, as hypothesis strategies.

The masking tests plant these in payloads; tests/masking/test_masking_samples.py
checks the samples themselves are what they claim to be (a card passes Luhn, an
IBAN its checksum), so a test that finds them masked is not passing on malformed data.
"""

from __future__ import annotations

import string
from typing import Any

from hypothesis import strategies as st

from spanreplay.masking._checks import card_ok, iban_ok

ALNUM = string.ascii_letters + string.digits
TOKEN = ALNUM + "_-"


def _digits(n: int) -> st.SearchStrategy[str]:
    return st.text(string.digits, min_size=n, max_size=n)


@st.composite
def emails(draw: st.DrawFn) -> str:
    first = draw(st.text(string.ascii_lowercase, min_size=2, max_size=10))
    rest = draw(st.text(string.ascii_lowercase + string.digits + "._+-", max_size=12))
    last = draw(st.sampled_from(string.ascii_lowercase + string.digits))
    domain = draw(
        st.lists(st.text(string.ascii_lowercase + string.digits, min_size=2, max_size=12), min_size=1, max_size=3)
    )
    tld = draw(st.sampled_from(["com", "org", "io", "co.uk", "de", "example"]))
    local = (first + rest).replace("..", ".") + last
    return f"{local}@{'.'.join(domain)}.{tld}"


@st.composite
def phones(draw: st.DrawFn) -> str:
    form = draw(st.integers(0, 4))
    if form == 0:
        return f"+1 ({draw(st.integers(200, 999))}) {draw(_digits(3))}-{draw(_digits(4))}"
    if form == 1:
        return f"+44 20 {draw(_digits(4))} {draw(_digits(4))}"
    if form == 2:
        return f"{draw(st.integers(200, 999))}-{draw(st.integers(200, 999))}-{draw(_digits(4))}"
    if form == 3:
        return f"020 {draw(_digits(4))} {draw(_digits(4))}"
    return "0" + str(draw(st.integers(1, 9))) + "".join(f" {draw(_digits(2))}" for _ in range(4))


def luhn_complete(prefix: str) -> str:
    for last in string.digits:
        if card_ok(prefix + last):
            return prefix + last
    raise AssertionError(f"no Luhn digit completes {prefix}")


@st.composite
def cards(draw: st.DrawFn) -> str:
    network = draw(st.sampled_from(["4", "51", "55", "2221", "6011"]))
    number = luhn_complete(network + draw(_digits(15 - len(network))))
    if draw(st.booleans()):
        sep = draw(st.sampled_from([" ", "-"]))
        return sep.join(number[i : i + 4] for i in range(0, 16, 4))
    return number


@st.composite
def ibans(draw: st.DrawFn) -> str:
    country, length = draw(st.sampled_from([("DE", 22), ("GB", 22), ("NL", 18), ("FR", 27)]))
    if country in ("GB", "NL"):
        bban = draw(st.text(string.ascii_uppercase, min_size=4, max_size=4)) + draw(_digits(length - 8))
    else:
        bban = draw(_digits(length - 4))
    for check in range(2, 99):
        candidate = f"{country}{check:02d}{bban}"
        if iban_ok(candidate):
            break
    else:
        raise AssertionError("no IBAN check digits")
    if draw(st.booleans()):
        return " ".join(candidate[i : i + 4] for i in range(0, len(candidate), 4))
    return candidate


@st.composite
def ssns(draw: st.DrawFn) -> str:
    area = draw(st.integers(1, 899).filter(lambda a: a != 666))
    return f"{area:03d}-{draw(st.integers(1, 99)):02d}-{draw(st.integers(1, 9999)):04d}"


@st.composite
def ipv4s(draw: st.DrawFn) -> str:
    first = draw(st.integers(11, 223).filter(lambda o: o != 127))
    return f"{first}.{draw(st.integers(100, 255))}.{draw(st.integers(100, 255))}.{draw(st.integers(100, 254))}"


@st.composite
def ipv6s(draw: st.DrawFn) -> str:
    groups = draw(st.lists(st.integers(0x1000, 0xFFFF), min_size=6, max_size=6))
    return "2001:db8:" + ":".join(f"{g:x}" for g in groups)


def _token(n: int) -> st.SearchStrategy[str]:
    return st.text(ALNUM, min_size=n, max_size=n + 20)


@st.composite
def api_keys(draw: st.DrawFn) -> str:
    kind = draw(st.integers(0, 7))
    if kind == 0:
        return "sk-ant-api03-" + draw(_token(40))
    if kind == 1:
        return "sk-proj-" + draw(_token(30))
    if kind == 2:
        return "AKIA" + draw(st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16))
    if kind == 3:
        return "ghp_" + draw(st.text(ALNUM, min_size=36, max_size=40))
    if kind == 4:
        return "github_pat_" + draw(st.text(ALNUM + "_", min_size=22, max_size=60))
    if kind == 5:
        return f"xoxb-{draw(_digits(12))}-{draw(_token(24))}"
    if kind == 7:
        tail = draw(st.text("0123456789abcdef", min_size=64, max_size=64))
        return f"xapp-1-A{draw(_digits(10))}-{draw(_digits(13))}-{tail}"
    header = draw(_token(12))
    return f"eyJ{header}.eyJ{draw(_token(20))}.{draw(st.text(TOKEN, min_size=0, max_size=43))}"


@st.composite
def bearer_tokens(draw: st.DrawFn) -> str:
    """Only the token is secret; the caller plants ``Bearer {token}``."""
    return draw(_token(14)) + draw(_digits(2))


@st.composite
def aws_secret_keys(draw: st.DrawFn) -> str:
    """Forty base64 characters with both cases and a digit; the caller plants them under a name."""
    body = draw(st.text(ALNUM + "/+", min_size=37, max_size=37))
    return "aB" + body[:19] + "7" + body[19:]


@st.composite
def url_passwords(draw: st.DrawFn) -> str:
    """Only the password is secret; the caller plants ``scheme://user:{password}@host``."""
    # Its own marker first, so that the secret is found in no other part of a planted text.
    return "Pw" + draw(st.text(ALNUM + "-._~%!$&'()*+,;=:", min_size=6, max_size=24))


@st.composite
def private_keys(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["RSA ", "EC ", "OPENSSH ", ""]))
    body = "\n".join(draw(st.lists(st.text(ALNUM + "+/", min_size=40, max_size=64), min_size=1, max_size=4)))
    return f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"


# Every kind, as (strategy, how the secret is written into text).
KINDS: dict[str, st.SearchStrategy[str]] = {
    "email": emails(),
    "phone": phones(),
    "payment_card": cards(),
    "iban": ibans(),
    "us_ssn": ssns(),
    "ipv4": ipv4s(),
    "ipv6": ipv6s(),
    "api_key": api_keys(),
    "bearer_token": bearer_tokens(),
    "private_key": private_keys(),
    "aws_secret_access_key": aws_secret_keys(),
    "url_password": url_passwords(),
}


def written(kind: str, secret: str) -> str:
    """How a secret of ``kind`` is written into text: some are found only beside a name."""
    if kind == "bearer_token":
        return f"Bearer {secret}"
    if kind == "aws_secret_access_key":
        return f"aws_secret_access_key={secret}"
    if kind == "url_password":
        return f"postgres://app:{secret}@db.internal:5432/orders"
    return secret


FILLER = st.sampled_from(
    [
        "the",
        "order",
        "shipped",
        "to",
        "customer",
        "on",
        "Monday",
        "see",
        "ticket",
        "ORD-2024-00017",
        "at",
        "12:30",
        "v1.4.2",
    ]
)


@st.composite
def planted(draw: st.DrawFn) -> tuple[str, str]:
    """A sentence with one secret in it, and the secret."""
    kind = draw(st.sampled_from(sorted(KINDS)))
    secret = draw(KINDS[kind])
    text = written(kind, secret)
    before = " ".join(draw(st.lists(FILLER, max_size=4)))
    after = " ".join(draw(st.lists(FILLER, max_size=4)))
    return f"{before} {text} {after}".strip(), secret


@st.composite
def payloads_with_secrets(draw: st.DrawFn) -> tuple[Any, list[str]]:
    """A nested JSON payload with secrets planted in strings, keys and credential fields."""
    secrets: list[str] = []

    def leaf() -> Any:
        choice = draw(st.integers(0, 3))
        if choice == 0:
            text, secret = draw(planted())
            secrets.append(secret)
            return text
        if choice == 1:
            return draw(FILLER)
        if choice == 2:
            return draw(st.integers(-1000, 10**6))
        return draw(st.none() | st.booleans() | st.floats(allow_nan=False, allow_infinity=False))

    def node(depth: int) -> Any:
        shape = draw(st.integers(0, 3 if depth < 4 else 0))
        if shape == 0:
            return leaf()
        if shape == 1:
            return [node(depth + 1) for _ in range(draw(st.integers(0, 4)))]
        out: dict[str, Any] = {}
        for _ in range(draw(st.integers(0, 4))):
            key_kind = draw(st.integers(0, 5))
            if key_kind == 0:
                password = "pw-" + draw(st.text(ALNUM, min_size=12, max_size=20))
                secrets.append(password)
                out[
                    draw(st.sampled_from(["password", "api_key", "Authorization", "refreshToken", "client_secret"]))
                ] = password
            elif key_kind == 1:
                email = draw(emails())
                secrets.append(email)
                out[email] = node(depth + 1)
            else:
                out[draw(st.sampled_from(["id", "note", "items", "status", "customer", "max_tokens"]))] = node(
                    depth + 1
                )
        return out

    value = node(0)
    text, secret = draw(planted())
    secrets.append(secret)
    return {"payload": value, "message": text}, secrets

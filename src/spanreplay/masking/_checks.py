"""Checksums and plausibility checks that turn a pattern hit into a detection.

A regular expression finds things shaped like a card number or an IBAN; these
checks decide whether the thing is one, so order ids, timestamps and version
strings are left alone.
"""

from __future__ import annotations

import socket
from typing import Final

# Per digit byte, the digit sum of twice the digit (Luhn's doubled positions);
# a bytes.translate table, so a whole number is doubled and summed in C.
_DOUBLED: Final = bytes(
    (2 * (b - 48) if (b - 48) < 5 else 2 * (b - 48) - 9) if 48 <= b <= 57 else 0 for b in range(256)
)


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod 10) check every payment card number passes. ``digits``: ASCII digits only."""
    data = digits.encode("ascii")
    # From the last digit leftwards: every other digit counts as it is (its byte
    # less 48, the code of "0"), the ones between doubled.
    kept = data[-1::-2]
    return (sum(kept) - 48 * len(kept) + sum(data[-2::-2].translate(_DOUBLED))) % 10 == 0


# Issuer prefixes and the lengths each network issues. A digit run that passes
# Luhn but starts like no card network (order ids often start with 1, 7, 8, 9)
# is not a card: one in ten random numbers passes Luhn on its own.
def _network_lengths(head: str) -> range | tuple[int, ...]:
    """The lengths a card network issues numbers starting with the 4 digits ``head``."""
    head2 = int(head[:2])
    head3 = int(head[:3])
    head4 = int(head)
    if head[0] == "4":  # Visa
        return (13, 16, 19)
    if 51 <= head2 <= 55 or 2221 <= head4 <= 2720:  # Mastercard
        return (16,)
    if head2 in (34, 37):  # American Express
        return (15,)
    if head2 in (36, 38, 39) or 300 <= head3 <= 305:  # Diners Club
        return range(14, 20)
    if head == "6011" or head2 == 65 or 644 <= head3 <= 649:  # Discover
        return range(16, 20)
    if head2 == 62:  # UnionPay
        return range(16, 20)
    if 3528 <= head4 <= 3589:  # JCB
        return range(16, 20)
    if head2 in (50, 56, 57, 58, 67, 63):  # Maestro
        return range(12, 20)
    return ()


# The first four digits decide the network: per 4-digit head, a bit per length
# issued, filled in as heads are met (there are at most 10,000).
_LENGTH_BITS: dict[str, int] = {}


def card_network_ok(digits: str) -> bool:
    """True when ``digits`` starts like a card network's numbers and has one of its lengths."""
    return bool(_length_bits(digits[:4]) >> len(digits) & 1)


def _length_bits(head: str) -> int:
    bits = _LENGTH_BITS.get(head)
    if bits is None:
        if len(head) < 4 or not (head.isascii() and head.isdigit()):
            return 0
        bits = _LENGTH_BITS[head] = sum(1 << n for n in _network_lengths(head))
    return bits


def card_ok(digits: str) -> bool:
    """A payment card number: a network's prefix and length, and the Luhn check.
    ``digits``: ASCII digits only. Runs once per candidate, so written out in full."""
    n = len(digits)
    if n < 12 or n > 19 or not _length_bits(digits[:4]) >> n & 1:
        return False
    data = digits.encode("ascii")
    kept = data[-1::-2]
    return (sum(kept) - 48 * len(kept) + sum(data[-2::-2].translate(_DOUBLED))) % 10 == 0


# ISO 13616 lengths by country (the SWIFT IBAN registry).
IBAN_LENGTHS: Final[dict[str, int]] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
    "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip


_IBAN_LETTERS: Final = {ord(ch): str(10 + i) for i, ch in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")}


def iban_ok(compact: str) -> bool:
    """``compact``: an IBAN without spaces, upper case. Country length and mod-97 check."""
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    # The country and check digits move to the end; letters count as 10..35. Most
    # account numbers are digits only and need no translation.
    account = compact[4:]
    if not account.isdigit():
        account = account.translate(_IBAN_LETTERS)
    number = account + compact[:4].translate(_IBAN_LETTERS)
    return number.isdigit() and int(number) % 97 == 1


def ssn_ok(text: str) -> bool:
    """``ddd-dd-dddd`` with the area, group and serial numbers the SSA has issued."""
    area, group, serial = text[0:3], text[4:6], text[7:11]
    return area != "000" and area != "666" and area[0] != "9" and group != "00" and serial != "0000"


def digit_count_between(text: str, low: int, high: int) -> bool:
    """True when ``text`` holds from ``low`` to ``high`` ASCII digits."""
    # Counted on the UTF-8 bytes, where deleting the digits is one C call (an ASCII
    # digit is one byte there and no other character's bytes include one).
    data = text.encode("utf-8", "surrogatepass")
    return low <= len(data) - len(data.translate(None, b"0123456789")) <= high


def ipv4_ok(text: str) -> bool:
    """A dotted quad that names a host: not loopback, unspecified, multicast or a netmask."""
    parts = text.split(".")
    if len(parts) != 4:
        return False
    a, b, c, d = parts
    if (
        (len(a) > 1 and a[0] == "0")
        or (len(b) > 1 and b[0] == "0")
        or (len(c) > 1 and c[0] == "0")
        or (len(d) > 1 and d[0] == "0")
    ):
        return False
    first, second, third, fourth = int(a), int(b), int(c), int(d)
    if second > 255 or third > 255 or fourth > 255 or first in (0, 127) or first >= 224:
        return False
    # 255.255.255.0 and friends are netmasks, not hosts.
    return first < 128 or not (
        first in _MASK_OCTETS and second in _MASK_OCTETS and third in _MASK_OCTETS and fourth in _MASK_OCTETS
    )


_MASK_OCTETS: Final = frozenset((0, 128, 192, 224, 240, 248, 252, 254, 255))


def ipv6_packed(text: str) -> bytes | None:
    """The 16 bytes of a valid IPv6 address (inet_pton: C, and strict), or None."""
    try:
        return socket.inet_pton(socket.AF_INET6, text)
    except (OSError, ValueError):
        return None


def ipv6_ok(text: str) -> bool:
    """A valid IPv6 address that names a host, written with at least three groups or a full first group."""
    packed = ipv6_packed(text)
    if packed is None or "%" in text:
        return False
    # Loopback ::1, unspecified ::, multicast ff00::/8, link-local fe80::/10.
    if packed[0] == 0xFF or (packed[0] == 0xFE and packed[1] & 0xC0 == 0x80) or packed[:15] == bytes(15):
        return False
    groups = [g for g in text.split(":") if g]
    # "1::2" is valid IPv6 but reads like a slice in code; real addresses written in
    # compressed form still carry a 4-digit prefix (2001::1) or three groups.
    return len(groups) >= 3 or len(groups[0]) == 4

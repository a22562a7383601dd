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
# Per number length, 48 (the code of "0") times the number of digits Luhn keeps as they are.
_KEPT_ZEROS: Final = tuple(48 * ((n + 1) // 2) for n in range(20))


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
    ``digits``: ASCII digits only. (The detector's hits go through ``card_text_ok``.)"""
    n = len(digits)
    return 12 <= n <= 19 and bool(_length_bits(digits[:4]) >> n & 1) and luhn_ok(digits)


# The card checks of the detector, per 4-digit head as bytes: the same bits as
# ``_LENGTH_BITS``, looked up without turning the bytes back into text.
_HEAD_BITS: dict[bytes, int] = {}


def card_text_ok(text: str) -> bool:
    """``card_ok`` of ``text`` without its separators (spaces, no-break spaces, hyphens,
    dots): a card pattern's hit. One function, not two: it runs once per candidate on
    every payload."""
    # The separators go in the same C call that makes the bytes Luhn sums over.
    try:
        data = text.encode("ascii").translate(None, b" -.")
    except UnicodeEncodeError:  # a no-break space between the groups
        data = text.replace("\u00a0", "").replace("\u202f", "").encode("ascii").translate(None, b" -.")
    n = len(data)
    if n < 12 or n > 19:
        return False
    head = data[:4]
    bits = _HEAD_BITS.get(head)
    if bits is None:
        if not head.isdigit():  # ASCII digits only, as for bytes
            return False
        bits = _HEAD_BITS[head] = _length_bits(head.decode("ascii"))
    if not bits >> n & 1:
        return False
    return (sum(data[-1::-2]) - _KEPT_ZEROS[n] + sum(data[-2::-2].translate(_DOUBLED))) % 10 == 0


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


# A str.translate table: each letter to the number it counts as in the mod-97 check.
IBAN_LETTERS: Final = {ord(ch): str(10 + i) for i, ch in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ")}
# Per country: its IBAN's length, and the four digits its two letters become.
IBAN_COUNTRIES: Final[dict[str, tuple[int, str]]] = {
    country: (length, country.translate(IBAN_LETTERS)) for country, length in IBAN_LENGTHS.items()
}


def iban_ok(compact: str) -> bool:
    """``compact``: an IBAN without spaces, upper case. Country length and mod-97 check."""
    country = IBAN_COUNTRIES.get(compact[:2])
    if country is None or country[0] != len(compact):
        return False
    # The country and check digits move to the end; letters count as 10..35. Most
    # account numbers are digits only and need no translation.
    account = compact[4:]
    if not account.isdigit():
        account = account.translate(IBAN_LETTERS)
    check = compact[2:4]
    if not check.isdigit():
        check = check.translate(IBAN_LETTERS)
    number = account + country[1] + check
    return number.isdigit() and int(number) % 97 == 1


def ssn_ok(text: str) -> bool:
    """``ddd-dd-dddd`` (or ``ddd dd dddd``, or ``ddddddddd``) with the area, group and
    serial numbers the SSA has issued."""
    if len(text) == 9:
        area, group, serial = text[0:3], text[3:5], text[5:9]
    else:
        area, group, serial = text[0:3], text[4:6], text[7:11]
    return area != "000" and area != "666" and area[0] != "9" and group != "00" and serial != "0000"


def digit_count(text: str) -> int:
    """How many ASCII digits ``text`` holds."""
    # Counted on the UTF-8 bytes, where deleting the digits is one C call (an ASCII
    # digit is one byte there and no other character's bytes include one).
    data = text.encode("utf-8", "surrogatepass")
    return len(data) - len(data.translate(None, b"0123456789"))


def ipv4_ok(text: str) -> bool:
    """A dotted quad that names a host: not loopback, unspecified, multicast or a netmask."""
    parts = text.split(".")
    if len(parts) != 4:
        return False
    a, b, c, d = parts
    # Nearly every hit is four octets written as "0" to "255" (no leading zero) with
    # a first octet a host can have: set lookups decide it, with no int() and no test
    # of leading zeros. Anything else ("127", "300", "01") takes the rules in full below.
    if a in _HOST_FIRST_OCTETS and b in _OCTETS and c in _OCTETS and d in _OCTETS:
        # Of these first octets, only 128 and 192 start a netmask (255.255.255.0 and friends).
        return not (b in _MASK_TEXT and c in _MASK_TEXT and d in _MASK_TEXT and (a == "128" or a == "192"))
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
_MASK_TEXT: Final = frozenset(str(n) for n in _MASK_OCTETS)
# Each octet as written without leading zeros, and the first octets a host can have
# (not 0, 127, or multicast and up).
_OCTETS: Final = frozenset(str(n) for n in range(256))
_HOST_FIRST_OCTETS: Final = frozenset(str(n) for n in range(1, 224) if n != 127)

_AF_INET6: Final = socket.AF_INET6
_inet_pton: Final = socket.inet_pton
# A valid address names a host when it lies in [_HOSTS_FROM, _LINK_LOCAL) or in
# [_SITE_LOCAL, _MULTICAST): that leaves out ::/120 (loopback ::1 and unspecified ::
# among them), link-local fe80::/10 and multicast ff00::/8. Compared as bytes,
# which order as the addresses do.
_HOSTS_FROM: Final = bytes(14) + b"\x01\x00"
_LINK_LOCAL: Final = b"\xfe\x80" + bytes(14)
_SITE_LOCAL: Final = b"\xfe\xc0" + bytes(14)
_MULTICAST: Final = b"\xff" + bytes(15)


def ipv6_packed(text: str) -> bytes | None:
    """The 16 bytes of a valid IPv6 address (inet_pton: C, and strict), or None."""
    try:
        return _inet_pton(_AF_INET6, text)
    except (OSError, ValueError):
        return None


def ipv6_ok(text: str) -> bool:
    """A valid IPv6 address that names a host, written with at least three groups or a full first group."""
    packed = ipv6_packed(text)
    if packed is None or "%" in text or not (_HOSTS_FROM <= packed < _LINK_LOCAL or _SITE_LOCAL <= packed < _MULTICAST):
        return False
    # "1::2" is valid IPv6 but reads like a slice in code; real addresses written in
    # compressed form still carry a 4-digit prefix (2001::1) or three groups.
    parts = text.split(":")
    if len(parts) - parts.count("") >= 3:
        return True
    # A host address has a group that is not empty: the first such one decides.
    return len(text.lstrip(":").partition(":")[0]) == 4

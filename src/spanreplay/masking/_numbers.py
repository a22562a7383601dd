"""Masked numbers: a number at a masked place becomes a number.

Masking keeps JSON types, so replay hands the code an ``int`` where it had one.
Without a key (and for credentials, which never get a keyed token) a number
becomes ``0``, or ``0.0`` for a float: no real value is ever written, and every
masked number at a place compares equal, as ``<label>`` does for strings.

With a key, a number becomes a keyed pseudonym of the same shape: the same
sign, an ``int`` stays an ``int`` with as many digits, a ``float`` keeps its
power of ten and its count of significant digits (up to 15, so that the digits
survive the round trip through a double). The digits are in two parts:

- the leading ones, a keyed hash of the rule's label and the value, so equal
  values give equal pseudonyms and different values (almost always) different
  ones;
- the trailing half, a keyed check of the leading ones, ending in a digit that
  fails the Luhn check, so no pseudonym is ever taken for a card number when the
  code writes it into a text.

A number whose trailing digits already are the check of its leading ones is a
pseudonym and is left as it is: masking stays idempotent, which replay needs
(a masked number that one step's replayed output hands to the next step's input
masks to itself, and matches the recorded input). A real value of that form,
about one in 10**(digits // 2), is recorded as it is; without the key it cannot
be told from a pseudonym.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Final

from ._checks import luhn_ok

__all__ = ["keyed_number", "plain_number"]

# Significant digits a double holds for any decimal of that length.
_FLOAT_DIGITS: Final = 15
# Floats beyond these powers of ten are pseudonymized as if they were between 1 and
# 10: near the ends of the double's range, other digits may not fit in the same decade.
_FLOAT_LOW: Final = 1e-300
_FLOAT_HIGH: Final = 1e300
# A masked integer fits where the value fitted: int64, else uint64 (orjson's range,
# and what a database column or another language holds).
_INT64: Final = 2**63 - 1
_UINT64: Final = 2**64 - 1

# A keyed hash of text, as a non-negative integer.
Digest = Callable[[str], int]


def plain_number(value: int | float) -> int | float:
    """The placeholder of a number: ``0``, or ``0.0`` for a float."""
    return 0.0 if isinstance(value, float) else 0


def keyed_number(value: int | float, value_hash: Digest, check_hash: Digest) -> int | float:
    """The keyed pseudonym of ``value`` (see the module docstring); ``value`` itself when it is one.

    ``value_hash`` hashes the value (keyed, and salted with the rule's label);
    ``check_hash`` makes the check digits, keyed but the same for every label, so a
    pseudonym made under one rule is one under any other.
    """
    if isinstance(value, float):
        return _keyed_float(value, value_hash, check_hash)
    digits = str(abs(value))
    if _is_pseudonym(digits, check_hash):
        return value
    magnitude = abs(value)
    limit = _INT64 if magnitude <= _INT64 else _UINT64 if magnitude <= _UINT64 else None
    masked = int(_pseudonym_digits(len(digits), value_hash(str(value)), check_hash, limit))
    return -masked if value < 0 else masked


def _keyed_float(value: float, value_hash: Digest, check_hash: Digest) -> float:
    if not math.isfinite(value):
        return value  # JSON has no such number: the codec writes null, which holds nothing
    magnitude = abs(value)
    digits, exponent = _significant(magnitude) if magnitude else ("0", 1)
    if not _FLOAT_LOW <= magnitude < _FLOAT_HIGH:
        exponent = 1  # zero, or near the ends of the range
    elif len(digits) <= _FLOAT_DIGITS and _is_pseudonym(digits, check_hash):
        return value
    count = min(len(digits), _FLOAT_DIGITS)
    masked = _pseudonym_digits(count, value_hash(repr(value)), check_hash, None)
    result = float(f"0.{masked}e{exponent}")
    return -result if math.copysign(1.0, value) < 0 else result


def _significant(magnitude: float) -> tuple[str, int]:
    """``(digits, exponent)`` with ``magnitude == 0.digits * 10**exponent``, as ``repr`` writes it;
    ``digits`` has no leading or trailing zeros."""
    mantissa, _, power = repr(magnitude).partition("e")
    whole, _, fraction = mantissa.partition(".")
    every = whole + fraction
    stripped = every.lstrip("0")
    exponent = len(whole) + int(power or 0) - (len(every) - len(stripped))
    return stripped.rstrip("0"), exponent


def _check_length(count: int) -> int:
    """How many of ``count`` digits are the check."""
    return max(1, count // 2)


def _check(lead: str, count: int, check_hash: Digest) -> str:
    """The check digits of a ``count``-digit pseudonym that begins with ``lead``.

    The last digit is never 0 (a float's digits end in a non-zero digit) and never
    the one that would pass Luhn.
    """
    size = count - len(lead)
    h = check_hash(f"{count}:{lead}")
    scale: int = 10 ** (size - 1)
    middle = f"{h % scale:0{size - 1}d}" if size > 1 else ""
    passing = _luhn_digit(lead + middle)
    allowed = [d for d in "123456789" if d != passing]
    return middle + allowed[(h // scale) % len(allowed)]


def _luhn_digit(digits: str) -> str:
    """The last digit that would make ``digits`` + it pass the Luhn check."""
    for d in "0123456789":
        if luhn_ok(digits + d):
            return d
    raise AssertionError("unreachable: one digit in ten passes Luhn")


def _is_pseudonym(digits: str, check_hash: Digest) -> bool:
    count = len(digits)
    lead = count - _check_length(count)
    return digits[lead:] == _check(digits[:lead], count, check_hash)


def _pseudonym_digits(count: int, h: int, check_hash: Digest, limit: int | None) -> str:
    """``count`` digits, the first never 0: the leading ones from ``h``, then their check.
    With ``limit``, the number they spell is at most ``limit``."""
    size = count - _check_length(count)
    if size == 0:
        return _check("", count, check_hash)
    low, high = 10 ** (size - 1), 10**size
    if limit is not None:
        # The largest value with these leading digits ends in all nines.
        high = min(high, (limit + 1) // 10 ** (count - size))
    lead = str(low + h % (high - low))
    return lead + _check(lead, count, check_hash)

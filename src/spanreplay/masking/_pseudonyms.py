"""Pseudonyms and placeholders: what a masked value becomes.

With a project key, a value becomes a typed, keyed token, ``<email:3f9a2c1b07d4e85a>``:
the same value under the same key always gives the same token, so code that
compares two masked values still takes the branch it took when recording. The
token is a keyed BLAKE2b hash: without the key, nobody can test a guess against
it. Without a key, every value becomes its plain placeholder, ``<email>``.

A token holds 64 bits of the hash (16 hex digits). Among N distinct values under
one label, two share a token with a chance of about N² / 2⁶⁵ (the birthday
bound): one in 37 million for a million values, one in 3,700 for a hundred
million (a busy year of runs). The 32-bit tokens written before (8 hex digits)
had an even chance of one by 77,000 values; runs recorded with them still
replay, with ``Pseudonyms(key, token_hex=LEGACY_TOKEN_HEX)``.

The key itself is held here and nowhere else; it is never written to a span.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from typing import Final

from ._numbers import keyed_number, plain_number

__all__ = ["PLACEHOLDER", "Pseudonyms", "is_placeholder", "label_of"]

TOKEN_HEX: Final = 16
# The length of the tokens written before 64-bit ones; replay of such a run writes them.
LEGACY_TOKEN_HEX: Final = 8

# Every placeholder or pseudonym this module writes, and nothing a detector finds:
# masking leaves these alone, which makes it idempotent.
# Tokens of both lengths: a recorded legacy token that the code passes on is one too.
PLACEHOLDER: Final = re.compile(r"<[a-z][a-z0-9_]{0,40}(?::[0-9a-f]{8}(?:[0-9a-f]{8})?)?>", re.ASCII)
_LABEL: Final = re.compile(r"[^a-z0-9_]+")


def is_placeholder(text: str) -> bool:
    """True when ``text`` is exactly one placeholder or pseudonym."""
    return PLACEHOLDER.fullmatch(text) is not None


def label_of(name: str) -> str:
    """A placeholder label from any rule name: lower case, ``[a-z0-9_]``, starting with a letter."""
    label = _LABEL.sub("_", name.lower()).strip("_")[:40]
    if not label or not label[0].isalpha():
        label = ("v_" + label)[:40].rstrip("_") or "value"
    return label


class Pseudonyms:
    """Turns a found value into its token, remembering the tokens it has made.

    Args:
        key: the project key. None gives plain placeholders.
        token_hex: the hex digits of a token, ``TOKEN_HEX``; ``LEGACY_TOKEN_HEX`` for a
            run recorded with the shorter tokens.
    """

    __slots__ = ("_cache", "_check", "_hashers", "_key", "_number_hashers", "keyed", "token_hex")

    def __init__(self, key: bytes | None, *, token_hex: int = TOKEN_HEX) -> None:
        if token_hex not in (TOKEN_HEX, LEGACY_TOKEN_HEX):
            raise ValueError(f"token_hex is {token_hex}; tokens are {TOKEN_HEX} or {LEGACY_TOKEN_HEX} hex digits")
        self.token_hex = token_hex
        if key is not None and len(key) > 64:
            # BLAKE2b takes keys of up to 64 bytes; a longer one is hashed down first.
            key = hashlib.sha256(key).digest()
        self._key = key
        self.keyed = key is not None
        self._cache: dict[tuple[str, str], str] = {}
        # Per label, a hash already keyed: copying it is cheaper than keying a new hash
        # (the key block is compressed once, here).
        self._hashers: dict[str, hashlib.blake2b] = {}
        self._number_hashers: dict[str, hashlib.blake2b] = {}
        self._check = None if key is None else hashlib.blake2b(digest_size=8, key=key, person=b"spanreplay-check")

    def forget(self) -> None:
        """Drop every pseudonym computed so far (they are recomputed, equal, when asked again)."""
        self._cache.clear()

    def __repr__(self) -> str:  # never shows the key
        return f"<Pseudonyms keyed={self.keyed}>"

    @property
    def key_id(self) -> str | None:
        """A short keyed hash of a constant: tells keys apart without revealing one."""
        if self._key is None:
            return None
        return hashlib.blake2b(b"spanreplay mask key id", key=self._key, digest_size=4).hexdigest()

    def token(self, label: str, canonical: str, *, pseudonymize: bool = True) -> str:
        """``<label:hash>`` of ``canonical`` with a key (and ``pseudonymize``), else ``<label>``."""
        if self._key is None or not pseudonymize:
            return f"<{label}>"
        cached = self._cache.get((label, canonical))
        if cached is not None:
            return cached
        hasher = self._hashers.get(label)
        if hasher is None:
            # The label is hashed in: the same digits as a phone number and as a card
            # number give unrelated tokens.
            hasher = hashlib.blake2b(
                digest_size=self.token_hex // 2, key=self._key, person=b"spanreplay-mask", salt=label.encode()[:16]
            )
            if len(self._hashers) < 1024:
                self._hashers[label] = hasher
        digest = hasher.copy()
        digest.update(canonical.encode("utf-8", "surrogatepass"))
        token = f"<{label}:{digest.hexdigest()}>"
        if len(self._cache) >= 65536:
            self._cache.clear()
        self._cache[(label, canonical)] = token
        return token

    def number(self, label: str, value: int | float, *, pseudonymize: bool = True) -> int | float:
        """A number's masked form, a number: a keyed pseudonym of the same shape with a key
        (and ``pseudonymize``), else ``0`` (``0.0`` for a float). See ``_numbers``."""
        if self._key is None or not pseudonymize:
            return plain_number(value)
        # A subclass (an IntEnum, numpy's float64) may print otherwise: its plain value.
        value = float(value) if isinstance(value, float) else int(value)
        hasher = self._number_hashers.get(label)
        if hasher is None:
            hasher = hashlib.blake2b(digest_size=16, key=self._key, person=b"spanreplay-num", salt=label.encode()[:16])
            if len(self._number_hashers) < 1024:
                self._number_hashers[label] = hasher
        return keyed_number(value, _digest(hasher), _digest(self._check))


def _digest(hasher: hashlib.blake2b | None) -> Callable[[str], int]:
    """A keyed hash of a text as an integer, from a hasher already keyed."""
    assert hasher is not None

    def digest(text: str) -> int:
        h = hasher.copy()
        h.update(text.encode("utf-8", "surrogatepass"))
        return int.from_bytes(h.digest(), "big")

    return digest

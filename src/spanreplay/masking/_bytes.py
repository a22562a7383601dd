"""Bytes masked as the text they hold, and given back as bytes of the same type.

A tool that returns ``bytes`` (a file read, an HTTP body) is recorded as base64
text, in which no detector finds anything. The bytes are read as UTF-8 instead,
with every byte that is not part of valid UTF-8 kept as a lone surrogate
(``surrogateescape``), masked as text, and written back the same way: what no
detector fired on comes back byte for byte, and a placeholder is ASCII.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

__all__ = ["masked_bytes"]

B = TypeVar("B", bytes, bytearray)


def masked_bytes(data: B, scan: Callable[[str], tuple[str, tuple[str, ...]]]) -> tuple[B, tuple[str, ...]]:
    """``data`` with what ``scan`` masks in its text masked, as the same type, and the
    names of the detectors that fired (``data`` itself when none did)."""
    text = bytes(data).decode("utf-8", "surrogateescape")
    masked, fired = scan(text)
    if not fired or masked == text:
        return data, ()
    encoded = masked.encode("utf-8", "surrogateescape")
    return (bytearray(encoded) if isinstance(data, bytearray) else encoded), fired

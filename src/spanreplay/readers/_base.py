"""The contract every format reader keeps, and the checked JSON accessors they share.

A reader is a function from one parsed JSON document to ``SpanRecord``s. It
never trusts the document: every access goes through the helpers below, which
raise ``MalformedTrace`` (with what was expected and what was found) instead of
``KeyError``, ``TypeError`` or ``ValueError``. ``_sources`` adds the file and
line and turns it into the public ``TraceFormatError``.
"""

from __future__ import annotations

import base64
import binascii
import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class SpanReplayWarning(UserWarning):
    """Something in a source that spanreplay read past (a torn last line, say)."""


def warn(message: str) -> None:
    """Warn, pointing at the first caller outside spanreplay (past its generator frames)."""
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, SpanReplayWarning, stacklevel=level)


class MalformedTrace(Exception):
    """A document that is JSON but not a trace this reader can decode."""


class Incomplete(MalformedTrace):
    """A trace the backend says it cut short; the message is the whole sentence, with the setting to raise."""


class NotATrace(MalformedTrace):
    """A JSON document of some other kind altogether (no trace structure at its top)."""


def obj(value: Any, what: str = "a JSON object") -> Mapping[str, Any]:
    if type(value) is dict:  # what orjson gives: skip the slower abstract-class check
        return value
    if not isinstance(value, Mapping):
        raise MalformedTrace(f"expected {what}, found {_shown(value)}")
    return value


def array(value: Any, what: str = "a JSON array") -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise MalformedTrace(f"expected {what}, found {_shown(value)}")
    return value


def text(value: Any, what: str = "a string") -> str:
    if not isinstance(value, str):
        raise MalformedTrace(f"expected {what}, found {_shown(value)}")
    return value


def integer(value: Any, what: str = "an integer") -> int:
    # proto3 JSON writes 64-bit integers as strings; some producers write numbers.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:  # also the interpreter's cap on very long digit strings
            pass
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise MalformedTrace(f"expected {what}, found {_shown(value)}")


def count(value: Any, what: str) -> int:
    """A non-negative count such as ``droppedAttributesCount``; absent means 0."""
    number = integer(0 if value is None else value, what)
    if number < 0:
        raise MalformedTrace(f"expected {what} (zero or more), found {number}")
    return number


def timestamp(value: Any, what: str) -> int:
    """A time in Unix nanoseconds (or microseconds): an integer, zero (not set) or more.

    A negative time is no time at all: kept, it would date the span before 1970
    and order it before every other.
    """
    number = integer(value, what)
    if number < 0:
        raise MalformedTrace(f"expected {what} (zero or more), found {number}")
    return number


_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def number(value: Any, what: str = "a number") -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:  # an integer too large for a double
            pass
    elif isinstance(value, str):
        if value in _NON_FINITE:  # proto3 JSON spells the non-finite doubles as strings
            return _NON_FINITE[value]
        try:
            return float(value)
        except ValueError:
            pass
    raise MalformedTrace(f"expected {what}, found {_shown(value)}")


def base64_bytes(value: Any, what: str) -> bytes:
    try:
        return base64.b64decode(text(value, what), validate=True)
    except (binascii.Error, ValueError):
        raise MalformedTrace(f"expected {what} in base64, found {_shown(value)}") from None


def _shown(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (Mapping, list)):
        return "an object" if isinstance(value, Mapping) else "an array"
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."

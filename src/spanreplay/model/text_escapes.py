"""Text that UTF-8 cannot hold, written as escapes a person can read and replay can undo.

A Python ``str`` may hold lone surrogates (U+D800 to U+DFFF): ``os.listdir()``
gives them for file names that are not UTF-8 (``'caf\\udce9.txt'``, by
``surrogateescape``), and so do ``sys.argv``, ``os.environ`` and any text
decoded with ``surrogateescape`` or ``surrogatepass``. JSON written as UTF-8
(orjson, the OTLP files, Postgres JSONB) cannot hold them, and refusing the value
used to cost the whole step.

Such a string is written with each surrogate as the six characters ``\\udce9``
and each backslash doubled, so the text stays readable in Jaeger and the
masking detectors still see it, and ``unescape`` gives back the identical
``str``. Only strings that hold a surrogate are written this way; whatever
reads them back must be told (a type tag in outputs, see ``_typed``).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Final

__all__ = ["escape", "escaped_values", "readable", "readable_values", "unescape", "unescaped_values", "utf8_ok"]

_SPECIAL: Final = re.compile(r"[\\\ud800-\udfff]")
# What escape() writes: a doubled backslash, or \u and a surrogate's four hex digits;
# any other backslash means the text was not written by escape().
_ESCAPES: Final = re.compile(r"\\(?:(\\)|u(d[89a-f][0-9a-f]{2}))|\\")


def utf8_ok(text: str) -> bool:
    """Whether UTF-8 can hold ``text`` (it has no lone surrogate)."""
    if text.isascii():
        return True
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _escape_one(match: re.Match[str]) -> str:
    found = match.group()
    return "\\\\" if found == "\\" else f"\\u{ord(found):04x}"


def escape(text: str) -> str:
    """``text`` with each lone surrogate written ``\\uXXXX`` and each backslash doubled."""
    return _SPECIAL.sub(_escape_one, text)


def _unescape_one(match: re.Match[str]) -> str:
    backslash, surrogate = match.groups()
    if backslash is not None:
        return "\\"
    if surrogate is not None:
        return chr(int(surrogate, 16))
    raise ValueError(f"a backslash at character {match.start()} starts no escape that spanreplay writes")


def unescape(text: str) -> str:
    """The ``str`` that ``escape`` wrote as ``text``; ValueError when ``text`` is not such text."""
    if not isinstance(text, str):
        raise ValueError(f"{type(text).__name__} is not escaped text")
    return _ESCAPES.sub(_unescape_one, text)


def readable(text: str) -> str:
    """``text`` with each lone surrogate written as a Python escape: valid UTF-8, not reversible."""
    return text if utf8_ok(text) else text.encode("utf-8", "backslashreplace").decode()


def readable_values(value: Any) -> Any:
    """Decoded-JSON-like ``value`` with every string (values and keys) made ``readable``."""
    if isinstance(value, str):
        return readable(value)
    if isinstance(value, dict):
        return {readable(key) if isinstance(key, str) else key: readable_values(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [readable_values(item) for item in value]
    return value


def escaped_values(value: Any, *, every: bool = False) -> Any:
    """``value`` with every string UTF-8 cannot hold (values and keys) replaced by its escape.

    For inputs, which are compared, not rebuilt: the result is deterministic, so a
    replayed input escapes to the bytes recorded. ``every``: escape every string, so
    that ``unescaped_values`` gives the value back (error records). Dicts, lists,
    tuples, sets, dataclasses and pydantic models are walked; anything else is left
    for the JSON encoder.
    """
    if isinstance(value, str):
        return escape(value) if every or not utf8_ok(value) else value
    if isinstance(value, dict):
        return {
            escaped_values(key, every=every) if isinstance(key, str) else key: escaped_values(item, every=every)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [escaped_values(item, every=every) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((escaped_values(item, every=every) for item in value), key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: escaped_values(getattr(value, field.name), every=every) for field in dataclasses.fields(value)
        }
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return escaped_values(dump(mode="json"), every=every)
    return value


def unescaped_values(value: Any) -> Any:
    """The inverse of ``escaped_values(every=True)`` on decoded JSON; ValueError on text it did not write."""
    if isinstance(value, str):
        return unescape(value)
    if isinstance(value, dict):
        return {unescape(key): unescaped_values(item) for key, item in value.items()}
    if isinstance(value, list):
        return [unescaped_values(item) for item in value]
    return value

"""The body of an Anthropic status error, read back from its message (recordings made before the body was kept).

Older releases of the SDK word a status error as ``"Error code: {status} - {body!r}"``,
the body a Python ``repr`` of the decoded JSON. Recordings made before spanreplay
kept the body in the error's fields have only that text. It is read here by a
small parser of the ``repr`` of JSON-like values (strings, numbers, ``True``,
``False``, ``None``, lists, tuples, dicts), a strict subset of what
``ast.literal_eval`` reads and read the same way, one token at a time and without
recursion, so its cost grows with the length of the text and nothing else; never
``ast.literal_eval``, whose cost and memory grow much faster than the text.

Bounded: text longer than ``MAX_BODY_CHARS`` or nested deeper than ``MAX_DEPTH`` is
not parsed, and the body comes back as the text it was recorded as (what the SDK
itself gives for a body that is not JSON), with one warning.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final

__all__ = ["MAX_BODY_CHARS", "MAX_DEPTH", "body_from_message", "parse_repr"]

logger = logging.getLogger(__name__)

# A body this long is a recording made before the body was kept, of an error that is
# not a plain API error (the API's own error bodies are a few hundred bytes).
MAX_BODY_CHARS: Final = 16 * 1024 * 1024
# JSON decoders refuse deeper nesting long before this (the SDK's json.loads at ~1000).
MAX_DEPTH: Final = 1000

# One token, after optional whitespace (the ASCII whitespace Python's tokenizer skips
# between tokens; a no-break space is not). A string holds no raw line break, NUL or
# lone surrogate, which Python refuses in source and repr() escapes. Strings use the unrolled form of
# "(?:[^'\\]|\\.)*", which the regex engine matches in one linear pass. Integers
# are written as Python writes them: "01" is not one.
_TOKEN: Final = re.compile(
    r"""[ \t\n\r]*(?:
        (?P<str>'[^'\\\n\r\x00\ud800-\udfff]*(?:\\.[^'\\\n\r\x00\ud800-\udfff]*)*'
               |"[^"\\\n\r\x00\ud800-\udfff]*(?:\\.[^"\\\n\r\x00\ud800-\udfff]*)*")
      | (?P<num>-?(?:(?:\d+\.\d*|\.\d+)(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|0+(?!\d)|[1-9]\d*))
      | (?P<word>(?:True|False|None)\b)
      | (?P<punct>[\[\](){},:])
    )""",
    re.VERBOSE | re.DOTALL | re.ASCII,
)
_ESCAPE: Final = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-7]{1,3})|(.))", re.DOTALL)
_SIMPLE_ESCAPES: Final = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "\n": "",
}
_WORDS: Final[dict[str, Any]] = {"True": True, "False": False, "None": None}
_CLOSERS: Final = {"[": "]", "(": ")", "{": "}"}

# What a container expects next.
_VALUE_OR_CLOSE, _VALUE, _SEPARATOR, _COLON = range(4)
# What a token that completes no value (a separator, an opening bracket) gives.
_NO_VALUE: Final = object()


class _Frame:
    __slots__ = ("commas", "expect", "items", "key", "opener")

    def __init__(self, opener: str) -> None:
        self.opener = opener
        self.items: list[Any] | dict[Any, Any] = {} if opener == "{" else []
        self.key: Any = None
        self.expect = _VALUE_OR_CLOSE
        self.commas = 0

    def add(self, value: Any, pos: int) -> None:
        """Put a complete value (at ``pos`` in the text) in the container: an item, a key, or a key's value."""
        items = self.items
        if isinstance(items, list):
            items.append(value)
            self.expect = _SEPARATOR
        elif self.expect == _VALUE_OR_CLOSE:
            try:
                hash(value)
            except TypeError:
                raise ValueError(f"a {type(value).__name__} as a dict key, at position {pos}") from None
            self.key = value
            self.expect = _COLON
        else:
            items[self.key] = value
            self.expect = _SEPARATOR

    def value(self) -> Any:
        if self.opener != "(":
            return self.items
        if len(self.items) == 1 and not self.commas:
            return self.items[0]  # "(1)" is 1, as Python reads it; "(1,)" is a tuple
        return tuple(self.items)


def _unescape(match: re.Match[str]) -> str:
    hex2, hex4, hex8, octal, other = match.groups()
    code = hex2 or hex4 or hex8
    if code is not None:
        return chr(int(code, 16))  # ValueError beyond U+10FFFF: the text is not a repr
    if octal is not None and int(octal, 8) <= 0o377:
        return chr(int(octal, 8))
    if other is not None and other in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[other]
    # repr() writes none of these: an unknown escape, a wide octal one, \N{...}. What Python
    # would make of them (a warning, or an error in later releases) is left to it.
    raise ValueError(f"the escape {match.group()!r}, which repr() does not write")


def _string(token: str) -> str:
    body = token[1:-1]
    return _ESCAPE.sub(_unescape, body) if "\\" in body else body


def _scalar(kind: str, token: str) -> Any:
    if kind == "str":
        return _string(token)
    if kind == "word":
        return _WORDS[token]
    if "." in token or "e" in token or "E" in token:
        return float(token)
    return int(token)  # ValueError beyond sys.get_int_max_str_digits(): bounded by Python itself


def parse_repr(text: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """The value whose Python ``repr`` is ``text``, for JSON-like values; ValueError otherwise.

    Work and memory grow linearly with ``len(text)``: one regex match per token and
    an explicit stack for the nesting (at most ``max_depth`` deep).
    """
    stack: list[_Frame] = []
    result: Any = None
    done = False
    pos = 0
    while True:
        match = _TOKEN.match(text, pos)
        if match is None:
            if done and not stack and not text[pos:].strip(" \t\n\r"):
                return result
            raise ValueError(f"unexpected text at position {pos}")
        pos = match.end()
        kind = match.lastgroup or ""
        token = match.group(kind)
        if done and not stack:
            raise ValueError(f"text after the value at position {match.start(kind)}")
        if stack:
            value = _in_container(stack, kind, token, pos, max_depth)
        elif kind == "punct":
            if token not in _CLOSERS:
                raise ValueError(f"{token!r} where a value belongs, at position {pos}")
            stack.append(_Frame(token))
            continue
        else:
            value = _scalar(kind, token)
        if value is _NO_VALUE:
            continue
        # A complete value: it goes into the enclosing container, or it is the result.
        if not stack:
            result, done = value, True
            continue
        stack[-1].add(value, pos)


def _in_container(stack: list[_Frame], kind: str, token: str, pos: int, max_depth: int) -> Any:
    """What ``token`` does inside the innermost container: the value it completes (a scalar, or the
    container it closes), or ``_NO_VALUE`` for a separator or a container it opens."""
    frame = stack[-1]
    if frame.expect == _SEPARATOR or (frame.expect == _VALUE_OR_CLOSE and token == _CLOSERS[frame.opener]):
        if token == "," and frame.expect == _SEPARATOR:
            frame.expect = _VALUE_OR_CLOSE
            frame.commas += 1
            return _NO_VALUE
        if token != _CLOSERS[frame.opener]:
            raise ValueError(f"{token!r} where ',' or {_CLOSERS[frame.opener]!r} belongs, at {pos}")
        stack.pop()
        return frame.value()
    if frame.expect == _COLON:
        if token != ":":
            raise ValueError(f"{token!r} where ':' belongs, at position {pos}")
        frame.expect = _VALUE
        return _NO_VALUE
    if kind == "punct":
        if token not in _CLOSERS:
            raise ValueError(f"{token!r} where a value belongs, at position {pos}")
        if len(stack) >= max_depth:
            raise ValueError(f"nested deeper than {max_depth}")
        stack.append(_Frame(token))
        return _NO_VALUE
    return _scalar(kind, token)


def body_from_message(message: str, status: int) -> Any:
    """The body in a status error's message worded ``"Error code: {status} - {body!r}"``.

    None when the message is not worded so (the SDK's newer wording keeps the body
    out of the message); the text after the prefix when it is not the ``repr`` of a
    JSON-like value, or is beyond the bounds above (with a warning).
    """
    prefix = f"Error code: {status} - "
    if not message.startswith(prefix):
        return None
    text = message[len(prefix) :]
    if len(text) > MAX_BODY_CHARS:
        logger.warning(
            "spanreplay: the recorded body of a %s error is %d characters, beyond the %d that replay reads back "
            "from an error message; the rebuilt error's body is that text. Record the run again to keep the body "
            "as JSON.",
            status,
            len(text),
            MAX_BODY_CHARS,
        )
        return text
    try:
        return parse_repr(text)
    except (ValueError, OverflowError):
        return text

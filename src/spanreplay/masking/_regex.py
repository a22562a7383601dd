"""What a compiled expression's parsed form tells about how it can match.

``re`` does not say how wide a match can be or what an expression can match, so
these read the parse tree ``re.compile`` builds (the private ``re._parser``).
Every answer errs on the safe side: anything unknown makes an expression "not
separable" and its width unbounded, which only costs speed.
"""

from __future__ import annotations

import importlib
import re
import warnings
from typing import Any, Final

__all__ = ["Shape", "first_characters", "holds_digit", "shape_of", "widest"]

_parser: Any
try:
    _parser = importlib.import_module("re._parser")
except ImportError:  # pragma: no cover - every supported Python has it
    _parser = None

# Wider than any text worth bounding: treated as no bound at all.
_UNBOUNDED: Final = 1 << 30

_SAFE_CATEGORIES: Final = frozenset(
    (
        "CATEGORY_DIGIT",
        "CATEGORY_SPACE",
        "CATEGORY_WORD",
        "CATEGORY_UNI_DIGIT",
        "CATEGORY_UNI_SPACE",
        "CATEGORY_UNI_WORD",
        "CATEGORY_LINEBREAK",
        "CATEGORY_UNI_LINEBREAK",
    )
)
_SAFE_ANCHORS: Final = frozenset(("AT_BOUNDARY", "AT_NON_BOUNDARY", "AT_UNI_BOUNDARY", "AT_UNI_NON_BOUNDARY"))
_NESTING: Final = frozenset(
    ("SUBPATTERN", "MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT", "ATOMIC_GROUP", "BRANCH", "GROUPREF_EXISTS")
)


class Shape:
    """What is known of one expression.

    Attributes:
        separable: nothing in it can match a NUL, and it has no anchor but ``\\b``
            and ``\\B``: in texts joined with NUL it finds what it finds in each
            text alone (see ``_joined``).
        min_width: no match is shorter.
        extent: a match attempt at a position reads no character at or past that
            position plus ``extent`` (the widest match, every lookahead, and the one
            character a run reads to find its end); None when unbounded.
    """

    __slots__ = ("extent", "min_width", "separable")

    def __init__(self, *, separable: bool, min_width: int, extent: int | None) -> None:
        self.separable = separable
        self.min_width = min_width
        self.extent = extent


_UNKNOWN: Final = Shape(separable=False, min_width=0, extent=None)

# Characters a JSON writer escapes: a literal of these is not found as it is in
# a serialized payload, which the payload gate reads.
_ESCAPED_IN_JSON: Final = frozenset([*range(0x20), ord('"'), ord("\\")])
# More possible first characters than this make a literal test too weak to be worth it.
_FIRST_MAX: Final = 32


def shape_of(regex: re.Pattern[str]) -> Shape:
    if _parser is None or not isinstance(regex.pattern, str):
        return _UNKNOWN
    try:
        parsed = _parser.parse(regex.pattern, regex.flags)
        low, high = parsed.getwidth()
        ahead = _lookahead_width(parsed)
    except Exception:  # an expression re.compile took; anything odd is simply unknown
        return _UNKNOWN
    extent = high + ahead + 1
    return Shape(separable=_nodes_ok(parsed), min_width=low, extent=extent if extent < _UNBOUNDED else None)


def _lookahead_width(nodes: Any) -> int:
    """The widths of all lookaheads in ``nodes``, added up (one may sit inside another)."""
    total = 0
    for op, av in nodes:
        name = str(op)
        if name in ("ASSERT", "ASSERT_NOT"):
            if av[0] > 0:
                total += av[1].getwidth()[1]
            total += _lookahead_width(av[1])
        for child in _children(name, av):
            total += _lookahead_width(child)
    return total


def _children(name: str, av: Any) -> list[Any]:
    if name == "SUBPATTERN":
        return [av[3]]
    if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return [av[2]]
    if name == "ATOMIC_GROUP":
        return [av]
    if name == "BRANCH":
        return list(av[1])
    if name == "GROUPREF_EXISTS":
        return [branch for branch in av[1:] if branch is not None]
    return []


def _nodes_ok(nodes: Any) -> bool:
    return all(_node_ok(str(op), av) for op, av in nodes)


def _node_ok(name: str, av: Any) -> bool:
    if name == "LITERAL":
        return bool(av != 0)
    if name == "IN":
        return _class_ok(av)
    if name == "AT":
        return str(av) in _SAFE_ANCHORS
    if name in ("ASSERT", "ASSERT_NOT"):
        return _nodes_ok(av[1])
    if name in _NESTING:
        return all(_nodes_ok(child) for child in _children(name, av))
    # A back-reference repeats a group, which holds no NUL; ANY, NOT_LITERAL and
    # whatever else may match a NUL.
    return name == "GROUPREF"


def _class_ok(items: Any) -> bool:
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            if av == 0:
                return False
        elif name == "RANGE":
            if av[0] == 0:
                return False
        elif name == "CATEGORY":
            if str(av) not in _SAFE_CATEGORIES:
                return False
        else:  # NEGATE and anything unknown
            return False
    return True


def widest(expression: str) -> int | None:
    """The most characters a match of ``expression``, read as Python reads it, spans;
    None when that is unbounded or not known."""
    if _parser is None:
        return None
    try:
        with warnings.catch_warnings():
            # Python reads a POSIX class ("[[:digit:]]") as a set and a "]", with a
            # FutureWarning; the caller checks the width against the other reading.
            warnings.simplefilter("ignore")
            _, high = _parser.parse(expression).getwidth()
    except Exception:  # not Python syntax: unknown
        return None
    return high if isinstance(high, int) and high < _UNBOUNDED else None


def first_characters(regex: re.Pattern[str]) -> tuple[str, ...]:
    """Characters of which one begins every match of ``regex``: a literal test that
    any text it matches in passes. ``()`` when the expression does not say (a case-
    insensitive one, a class too wide, a character JSON escapes)."""
    if _parser is None or not isinstance(regex.pattern, str) or regex.flags & re.IGNORECASE:
        return ()
    try:
        parsed = _parser.parse(regex.pattern, regex.flags)
        found = _first(list(parsed))
    except Exception:  # anything odd is simply unknown
        return ()
    if not found or len(found) > _FIRST_MAX or found & _ESCAPED_IN_JSON:
        return ()
    return tuple(chr(c) for c in sorted(found))


def _first(nodes: list[Any]) -> set[int] | None:
    """The code points one of which the first character a sequence of nodes consumes is;
    None when not known (or when the sequence may consume nothing)."""
    for op, av in nodes:
        name = str(op)
        if name in ("AT", "ASSERT", "ASSERT_NOT"):
            continue  # zero width: the next node consumes the first character
        if name == "LITERAL":
            return {av}
        if name == "IN":
            return _class_members(av)
        if name == "SUBPATTERN":
            return _first(list(av[3]))
        if name == "ATOMIC_GROUP":
            return _first(list(av))
        if name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            return _first(list(av[2])) if av[0] >= 1 else None
        if name == "BRANCH":
            out: set[int] = set()
            for branch in av[1]:
                chars = _first(list(branch))
                if chars is None:
                    return None
                out |= chars
            return out
        return None
    return None


def _class_members(items: Any) -> set[int] | None:
    out: set[int] = set()
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            out.add(av)
        elif name == "RANGE" and av[1] - av[0] < _FIRST_MAX:
            out.update(range(av[0], av[1] + 1))
        else:  # NEGATE, a category, a wide range
            return None
    return out


def holds_digit(expression: str) -> bool:
    """Whether every match of ``expression`` (read as Python reads it) holds an ASCII
    digit. False when not known: the caller only chooses how to compile by it."""
    if _parser is None:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _holds_digit(list(_parser.parse(expression)))
    except Exception:  # not Python syntax: unknown
        return False


_DIGITS: Final = frozenset(range(ord("0"), ord("9") + 1))


def _holds_digit(nodes: list[Any]) -> bool:
    """Whether every match of a sequence of nodes consumes an ASCII digit."""
    for op, av in nodes:
        name = str(op)
        if name == "LITERAL":
            found = av in _DIGITS
        elif name == "IN":
            members = _class_members(av)
            found = members is not None and bool(members) and members <= _DIGITS
        elif name == "SUBPATTERN":
            found = _holds_digit(list(av[3]))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            found = av[0] >= 1 and _holds_digit(list(av[2]))
        elif name == "ATOMIC_GROUP":
            found = _holds_digit(list(av))
        elif name == "BRANCH":
            found = all(_holds_digit(list(branch)) for branch in av[1])
        else:  # an anchor, a lookaround, a category, anything else: consumes no digit for sure
            found = False
        if found:
            return True
    return False

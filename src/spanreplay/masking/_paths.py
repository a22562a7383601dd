"""JSON paths as a span records them: ``orders[0].customer["e-mail"]``.

While walking, a path is held as a chain of ``(parent, segment)`` cells: a step
down is one small tuple, and only the paths where something fired are written out.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

import orjson

__all__ = ["Cell", "Segment", "format_path", "path_text"]

Segment = str | int
# A path: the cell of its last segment, which holds the cell of its parent; None is the root.
Cell = tuple["Cell", Segment] | None
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def format_path(segments: Sequence[Segment]) -> str:
    """``("orders", 0, "customer", "e-mail")`` -> ``orders[0].customer["e-mail"]``; ``()`` -> ``$``."""
    if not segments:
        return "$"
    return _complete_path("".join([_segment_text(segment) for segment in segments]))


def _complete_path(text: str) -> str:
    """A path from its segments' texts: no dot before a first key; ``$`` for the payload itself."""
    if not text:
        return "$"
    return text[1:] if text[0] == "." else text


_SEGMENTS: dict[Segment, str] = {}


def _segment_text(segment: Segment) -> str:
    """``.name``, ``[3]`` or ``["odd key"]``; remembered, since the same keys recur."""
    kind = type(segment)
    # Only str and int keys are remembered: True == 1 == 1.0 share one dict slot.
    text = _SEGMENTS.get(segment) if kind is str or kind is int else None
    if text is None:
        if kind is int:
            text = f"[{segment}]"
        elif kind is str and _IDENTIFIER.fullmatch(str(segment)):
            text = f".{segment}"
        else:
            text = f"[{orjson.dumps(str(segment)).decode()}]"
        if (kind is int or (kind is str and len(str(segment)) <= 64)) and len(_SEGMENTS) < 8192:
            _SEGMENTS[segment] = text
    return text


def path_text(cell: Cell, parents: dict[int, str]) -> str:
    """The path ending at ``cell``, as ``format_path`` writes it; ``parents`` holds the
    texts of the parent cells written so far, by identity."""
    if cell is None:
        return "$"
    parent, segment = cell
    # _segment_text's lookup, written out: this runs once per place that fired.
    kind = type(segment)
    text = _SEGMENTS.get(segment) if kind is str or kind is int else None
    if text is None:
        text = _segment_text(segment)
    if parent is None:
        return text[1:] if text[0] == "." else text
    above = parents.get(id(parent))
    if above is None:
        above = parents[id(parent)] = path_text(parent, parents)
    return above + text

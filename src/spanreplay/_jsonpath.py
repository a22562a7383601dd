"""A small JSON path dialect: ``a.b``, ``items[*].name``, ``items[0]``, ``*``.

Used to leave fields out of the replay input comparison (and by masking rules).
"""

from __future__ import annotations

import re
from typing import Any

from .errors import ConfigurationError

_TOKEN = re.compile(r"([^.\[\]]+)|\[(\*|\d+)\]")


def parse(path: str) -> tuple[str | int, ...]:
    """``"a.b[*].c"`` -> ``("a", "b", "*", "c")``; ``[0]`` gives the int 0."""
    parts: list[str | int] = []
    pos = 0
    text = path[1:] if path.startswith("$.") or path == "$" else path
    text = "" if text == "$" else text
    while pos < len(text):
        if text[pos] == ".":
            pos += 1
            continue
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ConfigurationError(
                f"JSON path {path!r} cannot be read at position {pos}; write paths like "
                "'messages[*].content' or 'customer.email'."
            )
        name, index = match.groups()
        if name is not None:
            parts.append(name)
        elif index == "*":
            parts.append("*")
        else:
            parts.append(int(index))
        pos = match.end()
    return tuple(parts)


def delete(value: Any, path: tuple[str | int, ...]) -> Any:
    """A copy of ``value`` without whatever ``path`` selects."""
    if not path:
        return None
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        if head == "*":
            keys = list(value)
        elif isinstance(head, str) and head in value:
            keys = [head]
        else:
            return value
        out = dict(value)
        for key in keys:
            if rest:
                out[key] = delete(out[key], rest)
            else:
                del out[key]
        return out
    if isinstance(value, list):
        if head == "*":
            indexes = range(len(value))
        elif isinstance(head, int) and head < len(value):
            indexes = range(head, head + 1)
        else:
            return value
        items = list(value)
        if not rest:
            return [v for i, v in enumerate(items) if i not in indexes]
        for i in indexes:
            items[i] = delete(items[i], rest)
        return items
    return value

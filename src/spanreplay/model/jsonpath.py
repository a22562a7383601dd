"""A small JSON path dialect: ``a.b``, ``items[*].name``, ``items[0]``, ``*``.

Used to leave fields out of the replay input comparison (and by masking rules).
"""

from __future__ import annotations

import re
from typing import Any

from spanreplay.errors import ConfigurationError

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


def matches(value: Any, path: tuple[str | int, ...]) -> bool:
    """Whether ``path`` selects anything in ``value``."""
    if not path:
        return True
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        if head == "*":
            return any(matches(v, rest) for v in value.values())
        return isinstance(head, str) and head in value and matches(value[head], rest)
    if isinstance(value, list):
        if head == "*":
            return any(matches(v, rest) for v in value)
        return isinstance(head, int) and head < len(value) and matches(value[head], rest)
    return False


def keys_where_unmatched(values: list[Any], path: tuple[str | int, ...]) -> tuple[str, list[str]]:
    """Where ``path`` stops matching in ``values``: the path matched so far and the keys found there."""
    level: list[Any] = values
    done: list[str | int] = []
    for part in path:
        following: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                following.extend(item.values() if part == "*" else [item[part]] if part in item else [])
            elif isinstance(item, list):
                if part == "*":
                    following.extend(item)
                elif isinstance(part, int) and part < len(item):
                    following.append(item[part])
        if not following:
            keys = sorted({str(k) for item in level if isinstance(item, dict) for k in item})
            return render(tuple(done)), keys
        done.append(part)
        level = following
    return render(tuple(done)), []


def paths_ending_with(values: list[Any], path: tuple[str | int, ...], *, limit: int = 5) -> list[str]:
    """Paths in ``values`` (list indexes as ``[*]``) that end with ``path``: ``system`` -> ``body.system``."""
    found: list[str] = []
    tail = tuple("*" if isinstance(part, int) else part for part in path)

    def walk(value: Any, at: tuple[str | int, ...], depth: int) -> None:
        if len(found) >= limit or depth > 8:
            return
        if len(at) > len(tail) and at[-len(tail) :] == tail:
            rendered = render(at)
            if rendered not in found:
                found.append(rendered)
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, (*at, key), depth + 1)
        elif isinstance(value, list):
            for item in value[:20]:
                walk(item, (*at, "*"), depth + 1)

    for value in values:
        walk(value, (), 0)
    return found


def render(path: tuple[str | int, ...]) -> str:
    """``("a", "*", "b")`` -> ``"a[*].b"``: the inverse of ``parse``."""
    text = ""
    for part in path:
        if part == "*" or isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "$"

"""What one masker keeps between payloads: the rules per boundary, and masked strings per session."""

from __future__ import annotations

from ._rules import FieldNames, PathRule
from ._scanner import Scanned

__all__ = ["Plan", "StringCache"]


class StringCache:
    """Masked forms of long strings, keyed by content, bounded by the characters held."""

    __slots__ = ("_chars", "_entries", "limit")

    def __init__(self, limit: int = 32 * 1024 * 1024) -> None:
        self._entries: dict[str, Scanned] = {}
        self._chars = 0
        self.limit = limit

    def get(self, text: str) -> Scanned | None:
        return self._entries.get(text)

    def put(self, text: str, entry: Scanned) -> None:
        if self._chars + len(text) > self.limit:
            self._entries.clear()
            self._chars = 0
        self._entries[text] = entry
        self._chars += len(text)

    def __len__(self) -> int:
        return len(self._entries)


class Plan:
    """The rules that apply to one (kind, key, part)."""

    __slots__ = ("field_rules", "fields", "has_fields", "path_rules", "plain_keys", "roots")

    def __init__(self, path_rules: tuple[PathRule, ...], fields: tuple[FieldNames, ...]) -> None:
        self.path_rules = path_rules
        self.fields = fields
        self.has_fields = bool(fields)
        self.roots: tuple[tuple[int, int], ...] = tuple((i, 0) for i in range(len(path_rules)))
        # Object keys met so far: the first field-name rule each matches, and the name.
        self.field_rules: dict[str, tuple[FieldNames, str] | None] = {}
        # Object keys met so far that no detector masks and no field-name rule matches:
        # the walk copies them, and the strings under them, without asking again.
        self.plain_keys: set[str] = set()

    def field_rule(self, key: str) -> tuple[FieldNames, str] | None:
        """The first field-name rule that object key ``key`` matches, and the name it matches."""
        found = None
        for rule in self.fields:
            name = rule.match(key)
            if name is not None:
                found = (rule, name)
                break
        if len(self.field_rules) < 4096:
            self.field_rules[key] = found
        return found

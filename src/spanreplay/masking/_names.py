"""Names written outside the payloads, masked where a detector fires.

A tool's key, an agent's name and an exception's class name stay readable on the
span (they name what happened), but whoever chose them may have put personal
data or a secret in them: a tool keyed by a customer's email, an agent named
after a ticket's caller. Each is scanned by the detectors and masked only where
one fires, so a plain name is written as it is.

The masked form depends on the name and the masker alone (its detectors and key),
never on what was masked before: replay masks a key the same way before it looks
the call up, and the masked call id it builds matches the recorded one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._pipeline import Masker

__all__ = ["NameMasker", "masked_keys"]

# Names remembered per run: a run calls the same few tools again and again.
_HELD: Final = 1024


class NameMasker:
    """Masks names by one masker's detectors, remembering the names it has seen.

    Args:
        masker: the masker in force; None or one switched off leaves names as they are.
    """

    __slots__ = ("_masker", "_seen")

    def __init__(self, masker: Masker | None) -> None:
        self._masker = masker if masker is not None and masker.enabled else None
        self._seen: dict[str, str] = {}

    def __call__(self, name: str) -> str:
        """``name`` with whatever a detector finds in it masked (itself when nothing fires)."""
        masker = self._masker
        if masker is None:
            return name
        masked = self._seen.get(name)
        if masked is None:
            masked = self.scan(name)
            if len(self._seen) < _HELD:
                self._seen[name] = masked
        return masked

    def fires(self, name: str) -> tuple[str, ...]:
        """The detectors that fire on ``name`` (none when masking is off)."""
        if self._masker is None or len(name) < self._masker.min_length:
            return ()
        return self._masker.scan_text(name)[1]

    def scan(self, name: str) -> str:
        masker = self._masker
        if masker is None or len(name) < masker.min_length:
            return name
        return masker.scan_text(name)[0]


def masked_keys(value: Any, names: NameMasker) -> Any:
    """``value`` with the object keys that are not plain ``str`` masked where a detector fires.

    An output whose dict has ``int`` keys (or ``str`` subclass keys) is recorded with
    its keys as they are, numbers included, so that replay gives back the same
    types; the detectors read strings only and would pass over a card number used
    as a key. Such a key is replaced here by its masked text (its type is lost, as
    any masked value's is). ``value`` itself when no key changes.
    """
    kind = type(value)
    if kind is dict:
        out: dict[Any, Any] | None = None
        for i, (key, item) in enumerate(value.items()):
            new_key = key
            if type(key) is not str:
                text = _key_text(key)
                if text is not None:
                    masked = names(text)
                    if masked != text:
                        new_key = masked
            new_item = masked_keys(item, names)
            if out is None and (new_key is not key or new_item is not item):
                out = dict(list(value.items())[:i])
            if out is not None:
                out[new_key] = new_item
        return value if out is None else out
    if kind is list or kind is tuple:
        items = [masked_keys(item, names) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return items if kind is list else tuple(items)
    return value


def _key_text(key: Any) -> str | None:
    if isinstance(key, str):
        return str.__str__(key)
    if isinstance(key, int) and not isinstance(key, bool):
        return str(int(key))
    return None

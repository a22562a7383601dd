"""One walk over one payload: the masked copy, the rules that fired, and where.

The walk copies the payload, applying path rules and field-name rules as it
goes, and notes every string a detector may change; the strings are then
scanned all at once and written into the copy. What fired is recorded as
``(JSON path, rule name)``, the form a span keeps.

A path is held as a chain of ``(parent, segment)`` cells while walking: a step
down is one small tuple, a string waiting for the detectors keeps the cell it
sits under, and only the paths where something fired are ever written out.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any, Final

import orjson

from ._paths import Cell, Segment, path_text
from ._plan import Plan, StringCache
from ._pseudonyms import Pseudonyms, label_of
from ._rules import DROP, FieldNames, PathRule
from ._scanner import Scanner

__all__ = ["CACHE_MIN", "SERIALIZE", "Walk"]

SERIALIZE: Final = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
# Strings at least this long are remembered per session; shorter ones cost less
# to mask again than to hold.
CACHE_MIN: Final = 64
_BY_ORDER: Final = operator.itemgetter(0)
_UNSEEN: Final[Any] = object()
# Plain object keys remembered per plan (see Plan.plain_keys), and the longest.
_PLAIN_KEYS_HELD: Final = 4096
_PLAIN_KEY_MAX: Final = 64
# Whole floats of 12 to 16 digits, the lengths of card numbers a float can hold:
# scanned as their digits. From 1e16 on a float prints with an exponent, so its
# digits are not in the encoded payload the gate reads (and a float no longer
# holds every digit of such a number anyway).
_WHOLE_LOW: Final = 1e11
_WHOLE_HIGH: Final = 1e16


class Holder:
    """Stands in for the container of a payload that is itself a string."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = None

    def __setitem__(self, key: object, value: Any) -> None:
        self.value = value


# A string waiting for the detectors: where it goes, its path and its walk order.
_Slot = tuple[Any, Segment, Cell, int]


class Walk:
    """One walk over one payload: the copy, what fired, the strings left to scan."""

    __slots__ = (
        "active",
        "cache",
        "convert",
        "direct",
        "field_rules",
        "fields",
        "fired",
        "keys_masked",
        "min_length",
        "order",
        "path",
        "pending",
        "plain_keys",
        "plan",
        "pseudonyms",
        "rules",
        "scan_key",
        "scanner",
    )

    def __init__(
        self,
        plan: Plan,
        scanner: Scanner,
        pseudonyms: Pseudonyms,
        convert: Callable[[Any], Any],
        active: tuple[int, ...],
        *,
        fields: bool,
        cache: StringCache | None,
    ) -> None:
        """``convert``: turns an object orjson cannot serialize into a JSON value."""
        self.plan = plan
        self.scanner = scanner
        self.pseudonyms = pseudonyms
        self.convert = convert
        self.rules = plan.path_rules
        self.active = active
        self.fields = plan.fields if fields else ()
        self.cache = cache
        self.fired: list[tuple[int, Cell, str]] = []
        # Whether an object key was masked: the one way a place can fire a rule twice
        # (the key, and the value under it).
        self.keys_masked = False
        self.path: Cell = None
        self.pending: dict[str, list[_Slot]] = {}
        self.order = 0
        # What mapping() and sequence() read on every call, one attribute each.
        self.min_length = scanner.min_length
        self.scan_key = scanner.scan_key
        self.field_rules = plan.field_rules if self.fields else None
        self.plain_keys = plan.plain_keys
        # Where a string waits for the detectors when no session may know it already:
        # mapping() and sequence() put it there themselves.
        self.direct = self.pending if cache is None else None

    def run(self, value: Any) -> Any:
        holder = Holder()
        states = self.plan.roots
        rule = self._complete(states) if states else None
        holder.value = self._apply(rule, value) if rule is not None else self.value(value, states, holder, "")
        if self.pending:
            self._scan_pending()
        return holder.value

    def fire(self, rule: str) -> None:
        """``rule`` changed the value at the current path."""
        self.fired.append((self.order, self.path, rule))

    def fired_paths(self) -> tuple[tuple[str, str], ...]:
        fired = self.fired
        fired.sort(key=_BY_ORDER)  # into walk order: each place that fired has its own order
        if self.keys_masked:  # each (path, rule) once, where it first fired
            first: dict[tuple[int, str], tuple[int, Cell, str]] = {}
            for entry in fired:
                first.setdefault((id(entry[1]), entry[2]), entry)
            fired = list(first.values())
        # The texts of the paths' parents, by cell: siblings share them. A place has one
        # cell, so a cell's identity stands for its place while ``fired`` holds it.
        parents: dict[int, str] = {}
        out: list[tuple[str, str]] = []
        append = out.append
        last: Any = _UNSEEN
        text = ""
        for _, path, rule in fired:
            if path is not last:  # the rules fired at one place come together
                text = path_text(path, parents)
                last = path
            append((text, rule))
        return tuple(out)

    # -- path rules --------------------------------------------------------------------

    def _advance(self, states: tuple[tuple[int, int], ...], key: Segment) -> tuple[tuple[int, int], ...]:
        out: list[tuple[int, int]] = []
        rules = self.rules
        for ri, si in states:
            segments = rules[ri].segments
            if si >= len(segments):
                continue
            segment = segments[si]
            if segment == "**":
                out.append((ri, si))
                if si + 1 < len(segments) and _segment_matches(segments[si + 1], key):
                    out.append((ri, si + 2))
            elif _segment_matches(segment, key):
                out.append((ri, si + 1))
        return tuple(out)

    def _complete(self, states: tuple[tuple[int, int], ...]) -> PathRule | None:
        best = None
        for ri, si in states:
            segments = self.rules[ri].segments
            if (si == len(segments) or all(s == "**" for s in segments[si:])) and (best is None or ri < best):
                best = ri
        return None if best is None else self.rules[best]

    def _apply(self, rule: PathRule, value: Any) -> Any:
        new = rule(value, self.pseudonyms)
        if rule.action != "keep" and (new is DROP or (new is not value and new != value)):
            # A place of its own in walk order: without it the rule would share the
            # order of the string before, and sort ahead of what fired in that string.
            self.order += 1
            self.fire(rule.name)
        return new

    # -- values ---------------------------------------------------------------------------

    def value(self, value: Any, states: tuple[tuple[int, int], ...], container: Any, slot: Segment) -> Any:
        kind = type(value)
        if kind is str:
            return self.string(value, container, slot)
        if kind is dict:
            return self.mapping(value, states)
        if kind is list or kind is tuple:
            return self.sequence(value, states)
        if kind is float and value.is_integer() and _WHOLE_LOW <= abs(value) < _WHOLE_HIGH:
            return self.whole_float(value)
        if kind is int or kind is float or kind is bool or value is None:
            # The detectors read strings only: a number stays the number it is, since
            # ids are numbers far more often than card numbers are, and a masked
            # value must keep its JSON type for replay to hand back what the code
            # had. A path rule or a field-name rule masks a number into a number.
            return value
        if isinstance(value, str):
            return self.string(str.__str__(value), container, slot)
        # Anything else (enums, dataclasses, datetimes, models, numpy): the JSON value
        # the span codec would write for it.
        converted = orjson.loads(orjson.dumps(value, default=self.convert, option=SERIALIZE))
        return self.value(converted, states, container, slot)

    def whole_float(self, value: float) -> float:
        """A float that holds a whole number of card length, masked as a number where the
        detectors find something in its digits.

        Ids are integers, so an ``int`` is left to the rules (see ``value``); a float of
        twelve digits or more with nothing after the point is no id nor a measure, and
        is what a card number read from a spreadsheet or a JSON document becomes.
        """
        names = self.scan_key(str(int(value)))[1]
        if not names:
            return value
        name = names[0]
        detector = next((d for d in self.scanner.detectors if d.name == name), None)
        self.order += 1
        self.fire(name)
        pseudonymize = detector is None or getattr(detector, "pseudonymize", True)
        return float(self.pseudonyms.number(label_of(name), value, pseudonymize=pseudonymize))

    def string(self, text: str, container: Any, slot: Segment, cell: Cell = None) -> str:
        """The string itself for now; a slot is noted where a detector may change it.
        ``cell``: its path, when not the current one."""
        self.order += 1
        if len(text) < self.min_length:
            return text
        cache = self.cache
        if cache is not None and len(text) >= CACHE_MIN:
            hit = cache.get(text)
            if hit is not None:
                masked, names = hit
                for name in names:
                    self.fired.append((self.order, self.path if cell is None else cell, name))
                return masked
        slots = self.pending.get(text)
        entry = (container, slot, self.path if cell is None else cell, self.order)
        if slots is None:
            self.pending[text] = [entry]
        else:
            slots.append(entry)
        return text

    def _scan_pending(self) -> None:
        pending = self.pending
        texts = list(pending)
        changed = self.scanner.changes(texts, self.active)
        cache = self.cache
        if cache is not None:
            for k, text in enumerate(texts):
                if len(text) >= CACHE_MIN:
                    cache.put(text, changed.get(k) or (text, ()))
        fired = self.fired
        append = fired.append
        places = list(pending.values())  # in the order of texts
        for k, (masked, names) in changed.items():
            if len(names) == 1:  # most strings: one rule fired, and no list of it to build
                (name,) = names
                for container, slot, path, order in places[k]:
                    container[slot] = masked
                    append((order, path, name))
            else:
                for container, slot, path, order in places[k]:
                    container[slot] = masked
                    fired += [(order, path, name) for name in names]

    def mapping(self, mapping: dict[Any, Any], states: tuple[tuple[int, int], ...]) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        parent = self.path
        if states:
            for key, item in mapping.items():
                if type(key) is not str:
                    key = self._key(key)
                self._entry(out, parent, key, item, states)
            self.path = parent
            return out
        # No path rule reaches below here: most objects. A key the detectors or a
        # field-name rule may act on takes the whole way, _entry(); the others are
        # copied here, and their strings wait for the detectors.
        min_length = self.min_length
        plain = self.plain_keys
        pending = self.direct
        for key, item in mapping.items():
            if type(key) is not str:
                key = self._key(key)
            if type(key) is str and key not in plain and self._acts_on(key):
                self._entry(out, parent, key, item, ())
                continue
            # One cell per place: what fires here is told apart from other places by it.
            cell = (parent, key)
            kind = type(item)
            if kind is str:
                if pending is None:
                    out[key] = self.string(item, out, key, cell)
                    continue
                # string(), written out for the commonest value. A string too short for
                # any detector needs no place in walk order: nothing fires there.
                if len(item) >= min_length:
                    self.order = order = self.order + 1
                    slots = pending.get(item)
                    if slots is None:
                        pending[item] = [(out, key, cell, order)]
                    else:
                        slots.append((out, key, cell, order))
                out[key] = item
                continue
            self.path = cell
            new = self.mapping(item, ()) if kind is dict else self.value(item, (), out, key)
            if new is not DROP:
                out[key] = new
        self.path = parent
        return out

    def _key(self, key: Any) -> Any:
        """An object key that is not a plain ``str``, as the walk reads it.

        The JSON written for the payload holds every key as text: a ``str`` subclass
        (a ``StrEnum``) as its text, an ``int`` (an ``IntEnum``) as its digits. A
        ``str`` subclass is read as the text it is; an integer key becomes its text
        only when a detector fires on it (a card or phone number as a key), and is
        masked as that text, the form the recording holds it in anyway.
        """
        if isinstance(key, str):
            return str.__str__(key)
        if isinstance(key, int) and not isinstance(key, bool):
            text = str(int(key))
            if len(text) >= self.min_length and self.scan_key(text)[1]:
                return text
        return key

    def _acts_on(self, key: str) -> bool:
        """Whether the detectors mask object key ``key`` or a field-name rule of this walk
        takes its value. A key that neither can touch under this plan is noted as plain."""
        masked = len(key) >= self.min_length and bool(self.scan_key(key)[1])
        plan = self.plan
        matched = plan.field_rules.get(key, _UNSEEN)
        if matched is _UNSEEN:
            matched = plan.field_rule(key)
        if not masked and matched is None:
            if len(key) <= _PLAIN_KEY_MAX and len(plan.plain_keys) < _PLAIN_KEYS_HELD:
                plan.plain_keys.add(key)
            return False
        return masked or (matched is not None and self.field_rules is not None)

    def _masked_key(self, out: dict[Any, Any], key: str) -> tuple[str, tuple[str, ...]]:
        """``key`` as it is written into ``out`` and the detectors that found something in it."""
        masked_key, names = self.scan_key(key)
        if not names:
            return key, names
        if masked_key in out:
            # Two keys that mask alike ("<email>" twice without a key) stay apart.
            n = 2
            while f"{masked_key}#{n}" in out:
                n += 1
            masked_key = f"{masked_key}#{n}"
        return masked_key, names

    def _field_rule(self, key: Any) -> tuple[FieldNames, str] | None:
        """The field-name rule that matches ``key``, or None."""
        field_rules = self.field_rules
        if field_rules is None or type(key) is not str:
            return None
        matched = field_rules.get(key, _UNSEEN)
        return self.plan.field_rule(key) if matched is _UNSEEN else matched

    def _entry(
        self, out: dict[Any, Any], parent: Cell, key: Any, item: Any, states: tuple[tuple[int, int], ...]
    ) -> None:
        """One key of an object and its value, copied into ``out`` with every rule applied."""
        new_key = key
        names: tuple[str, ...] = ()
        if type(key) is str and len(key) >= self.min_length:
            new_key, names = self._masked_key(out, key)
        cell = (parent, new_key)
        if names:
            self.path = cell
            self.keys_masked = True
            self.order += 1
            for name in names:
                self.fire(name)
        if states:
            self.path = cell
            child = self._advance(states, key)
            rule = self._complete(child) if child else None
            if rule is not None:
                new = self._apply(rule, item)
                if new is not DROP:
                    out[new_key] = new
                return
        else:
            child = ()
        matched = self._field_rule(key)
        if matched is not None:
            self.path = cell
            new = matched[0](item, matched[1], self.pseudonyms)
            if new is not item and new != item:
                self.order += 1
                self.fire(f"field:{matched[1]}")
        elif type(item) is str:
            new = self.string(item, out, new_key, cell)
        else:
            self.path = cell
            new = self.value(item, child, out, new_key)
        if new is not DROP:
            out[new_key] = new

    def sequence(self, items: Sequence[Any], states: tuple[tuple[int, int], ...]) -> list[Any]:
        out: list[Any] = []
        parent = self.path
        string = self.string
        min_length = self.min_length
        pending = self.direct
        for index, item in enumerate(items):
            cell = (parent, index)
            if states:
                self.path = cell
                child = self._advance(states, index)
                rule = self._complete(child) if child else None
                if rule is not None:
                    new = self._apply(rule, item)
                    if new is not DROP:
                        out.append(new)
                    continue
            else:
                child = ()
            # A string waiting for the detectors is written to its index, len(out), later.
            kind = type(item)
            if kind is str:
                if pending is None:
                    new = string(item, out, len(out), cell)
                else:
                    if len(item) >= min_length:  # string(), written out as in mapping()
                        self.order = order = self.order + 1
                        slots = pending.get(item)
                        if slots is None:
                            pending[item] = [(out, len(out), cell, order)]
                        else:
                            slots.append((out, len(out), cell, order))
                    out.append(item)
                    continue
            elif kind is dict:
                self.path = cell
                new = self.mapping(item, child)
            else:
                self.path = cell
                new = self.value(item, child, out, len(out))
            if new is not DROP:
                out.append(new)
        self.path = parent
        return out


def _segment_matches(segment: Segment, key: Segment) -> bool:
    if segment == "*":
        return True
    if isinstance(segment, int):
        return isinstance(key, int) and not isinstance(key, bool) and key == segment
    return segment == key

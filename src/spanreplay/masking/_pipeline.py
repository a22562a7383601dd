"""The masking pipeline: path rules, then field-name rules, then detectors.

``Masker.mask(kind, key, value)`` returns the masked value and the list of
``(JSON path, rule name)`` that fired; the values that were masked appear
nowhere in the result. It runs in three steps:

1. The payload is serialized once (orjson) and the gate reads the bytes: when no
   detector can match and no key can match a field-name rule, the payload is
   returned as it is, without walking it.
2. Otherwise the payload is copied in one walk. At each node the path rules that
   apply to the boundary are tried in order (the first that matches decides),
   then the field-name rules on object keys; the strings (and long integers) left
   are collected.
3. The gate locates the detectors' hits in all collected strings at once; each
   string's findings are resolved (earliest first, then detector order) and
   replaced with pseudonyms or placeholders. Placeholders already in the text
   are never touched, so masking is idempotent.

A ``MaskingSession`` (one per run) remembers the masked form of every long
string it has seen, so the conversation a model call resends each turn is
masked once, not once per turn.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from ..errors import ConfigurationError
from ._config import MaskingConfig
from ._detectors import Detector, RegexDetector
from ._engine import Gate, Located, PythonGate, make_gate
from ._pseudonyms import PLACEHOLDER, Pseudonyms
from ._rules import DROP, FieldNames, PathRule

__all__ = ["MaskResult", "Masker", "MaskingSession", "format_path", "masker_for"]

Segment = str | int
Path = tuple[Segment, ...]
_SERIALIZE: Final = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
# Strings at least this long are remembered per session; shorter ones cost less
# to mask again than to hold.
_CACHE_MIN: Final = 64
# Integers below this can hold no detectable number (a card number has 12+ digits).
_INT_LIMIT: Final = 10**11
_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,40}")
# Passes over a text after the first, when findings touch their neighbours; and
# what the text becomes when they keep revealing more.
_RESCANS: Final = 3
WITHHELD: Final = "<masked>"
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class MaskResult:
    """One masked payload.

    Attributes:
        value: the masked payload, JSON-ready (the payload itself when nothing fired).
        fired: ``(JSON path, rule name)`` for each place a rule or detector changed,
            in document order; never the value.
    """

    value: Any
    fired: tuple[tuple[str, str], ...] = ()

    @property
    def masked(self) -> bool:
        return bool(self.fired)

    def fired_records(self) -> list[dict[str, str]]:
        """``[{"path": ..., "rule": ...}, ...]``, the form recorded on the span."""
        return [{"path": path, "rule": rule} for path, rule in self.fired]


def format_path(segments: Sequence[Segment]) -> str:
    """``("orders", 0, "customer", "e-mail")`` -> ``orders[0].customer["e-mail"]``; ``()`` -> ``$``."""
    if not segments:
        return "$"
    parts = [_segment_text(segment) for segment in segments]
    first = parts[0]
    if first[0] == ".":
        parts[0] = first[1:]
    return "".join(parts)


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


Scanned = tuple[str, tuple[str, ...]]  # the masked text, the names of the detectors that fired


class _StringCache:
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


class _Plan:
    """The rules that apply to one (kind, key, part)."""

    __slots__ = ("fields", "path_rules", "roots")

    def __init__(self, path_rules: tuple[PathRule, ...], fields: tuple[FieldNames, ...]) -> None:
        self.path_rules = path_rules
        self.fields = fields
        self.roots: tuple[tuple[int, int], ...] = tuple((i, 0) for i in range(len(path_rules)))


def _default(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return repr(value)


class Masker:
    """Masks payloads by one ``MaskingConfig``. Thread-safe; build it once.

    Args:
        config: the configuration; ``MaskingConfig()`` (the defaults) when None.
        default: turns objects orjson cannot serialize into JSON values; give the
            one the span codec uses so masked and unmasked payloads agree.
    """

    def __init__(self, config: MaskingConfig | None = None, *, default: Callable[[Any], Any] | None = None) -> None:
        self.config = config = config if config is not None else MaskingConfig()
        self.detectors: tuple[Detector, ...] = config.resolved_detectors()
        for detector in self.detectors:
            if not isinstance(getattr(detector, "name", None), str) or not _NAME.fullmatch(detector.name):
                raise ConfigurationError(
                    f"Detector {detector!r} has the name {getattr(detector, 'name', None)!r}; a detector name "
                    "is its placeholder label: lower case letters, digits and '_', starting with a letter."
                )
        self._pseudonyms = Pseudonyms(config.resolved_key())
        self._path_rules = tuple(r for r in config.rules if isinstance(r, PathRule))
        fields = [r for r in config.rules if isinstance(r, FieldNames)]
        if config.field_names:
            fields.append(FieldNames(config.field_names))
        self._field_rules = tuple(fields)
        words = tuple(sorted({w for r in fields for w in r.last_words()}))
        patterns = tuple(p for r in fields for p in r.prefilter_patterns())
        self.gate: Gate = make_gate(config.engine, self.detectors, words, patterns)
        self._python_gate = PythonGate(self.detectors, words)
        self._all = tuple(range(len(self.detectors)))
        self.min_length = min((d.min_length for d in self.detectors), default=1 << 30)
        self._default = default or _default
        self._plans: dict[tuple[str, str, str], _Plan] = {}
        self._keys: dict[str, Scanned] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"<Masker enabled={self.config.enabled} engine={self.gate.name} keyed={self._pseudonyms.keyed} "
            f"detectors={len(self.detectors)} rules={len(self._path_rules) + len(self._field_rules)}>"
        )

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    @property
    def keyed(self) -> bool:
        """True when pseudonyms are keyed tokens, False when they are plain placeholders."""
        return self._pseudonyms.keyed

    @property
    def fingerprint(self) -> str:
        """How this masker writes tokens: ``off``, ``placeholders`` or ``keyed:{key id}``.

        Recorded on the run span, so replay can tell that it masks the current
        input the way the recording was masked.
        """
        if not self.config.enabled:
            return "off"
        key_id = self._pseudonyms.key_id
        return "placeholders" if key_id is None else f"keyed:{key_id}"

    def session(self) -> MaskingSession:
        """A session that remembers what it masked: one per run."""
        return MaskingSession(self)

    def mask(self, kind: str, key: str, value: Any, *, part: str = "input") -> MaskResult:
        """Mask one payload of boundary ``kind``/``key``; ``part`` is input, output or error."""
        return self._mask(kind, key, value, part, None)

    def scan_text(self, text: str) -> tuple[str, tuple[str, ...]]:
        """Run the detectors on one string: the masked string and the names that fired."""
        return self._detect([text], self._all)[0]

    # -- internals ------------------------------------------------------------------

    def _plan(self, kind: str, key: str, part: str) -> _Plan:
        plan = self._plans.get((kind, key, part))
        if plan is None:
            plan = _Plan(
                tuple(r for r in self._path_rules if r.selector.applies(kind, key, part)),
                tuple(r for r in self._field_rules if r.selector.applies(kind, key, part)),
            )
            with self._lock:
                if len(self._plans) > 4096:
                    self._plans.clear()
                self._plans[(kind, key, part)] = plan
        return plan

    def _mask(self, kind: str, key: str, value: Any, part: str, cache: _StringCache | None) -> MaskResult:
        if not self.config.enabled:
            return MaskResult(value)
        plan = self._plan(kind, key, part)
        active: Sequence[int] = self._all
        fields = bool(plan.fields)
        if not plan.path_rules:
            try:
                blob = orjson.dumps(value, default=self._default, option=_SERIALIZE)
            except TypeError:
                blob = None  # the walk converts what it can and raises what it cannot
            if blob is not None:
                active, fields_possible = self.gate.select_payload(blob)
                fields = fields and fields_possible
                if not active and not fields:
                    return MaskResult(value)
        walk = _Walk(self, plan, tuple(active), fields, cache)
        masked = walk.run(value)
        if not walk.fired:
            return MaskResult(value)  # every change fires, so this is the payload, uncopied
        return MaskResult(None if masked is DROP else masked, walk.fired_paths())

    def _detect(self, texts: Sequence[str], active: Sequence[int]) -> list[Scanned]:
        """Every text's masked form and the detectors that fired in it."""
        if not active:
            return [(text, ()) for text in texts]
        return [
            self._apply(text, located) for text, located in zip(texts, self.gate.locate(texts, active), strict=True)
        ]

    def _detect_key(self, key: str) -> Scanned:
        # Object keys repeat from payload to payload, and are short: remembered
        # here, and looked for with literal tests alone.
        hit = self._keys.get(key)
        if hit is None:
            hit = self._apply(key, self._python_gate.locate((key,), self._all)[0])
            if len(key) <= 256:
                if len(self._keys) >= 8192:
                    self._keys.clear()
                self._keys[key] = hit
        return hit

    def _apply(self, text: str, located: Located) -> Scanned:
        masked, names, glued = self._replace(text, located)
        rescans = 0
        while glued:
            # A finding written against its neighbour ("10.0.0.1sk-ant-...") was a
            # boundary for the detectors; its placeholder may not be ("<ipv4>sk-ant-..."
            # is a key). Masking again until nothing changes keeps masking idempotent.
            again, more, glued = self._replace(masked, self.gate.locate((masked,), self._all)[0])
            if not more:
                break
            names = (*names, *(name for name in more if name not in names))
            masked = again
            rescans += 1
            if glued and rescans == _RESCANS:
                # A chain of secrets each hiding the next (a phone number against a key
                # against a phone number...) would cost a pass each: past a few, the
                # whole text is withheld, which is final and costs nothing more.
                return WITHHELD, names
        return masked, names

    def _replace(self, text: str, located: Located) -> tuple[str, tuple[str, ...], bool]:
        """One pass: the text with each finding replaced, the detectors that found
        something, and whether a finding touched a neighbouring character."""
        if not located:
            return text, (), False
        detectors = self.detectors
        found: list[tuple[int, int, int]] = []
        for i, windows in located.items():
            detector = detectors[i]
            if windows is None:
                spans = detector(text)
            else:
                assert isinstance(detector, RegexDetector)
                spans = detector.locate(text, windows)
            for start, end in spans:
                found.append((start, i, end))
        if not found:
            return text, (), False
        if "<" in text:
            found = _outside_placeholders(text, found)
            if not found:
                return text, (), False
        if len(found) == 1:
            # The common case in records (a field holding one email, one phone number).
            start, i, end = found[0]
            detector = detectors[i]
            replacement = self._pseudonyms.token(
                detector.name, detector.normalize(text[start:end]), pseudonymize=detector.pseudonymize
            )
            glued = (start > 0 and not text[start - 1].isspace()) or (end < len(text) and not text[end].isspace())
            return text[:start] + replacement + text[end:], (detector.name,), glued
        found.sort()
        pieces: list[str] = []
        names: list[str] = []
        pos = 0
        token = self._pseudonyms.token
        glued = False
        n = len(text)
        for start, i, end in found:
            if start < pos:
                continue  # overlaps an earlier (or higher-priority) finding
            detector = detectors[i]
            pieces.append(text[pos:start])
            pieces.append(token(detector.name, detector.normalize(text[start:end]), pseudonymize=detector.pseudonymize))
            if detector.name not in names:
                names.append(detector.name)
            if not glued and ((start > 0 and not text[start - 1].isspace()) or (end < n and not text[end].isspace())):
                glued = True
            pos = end
        pieces.append(text[pos:])
        return "".join(pieces), tuple(names), glued


def _outside_placeholders(text: str, found: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """The findings that overlap no placeholder already in the text (one sweep, both sorted)."""
    taken = [m.span() for m in PLACEHOLDER.finditer(text)]
    if not taken:
        return found
    found.sort()
    kept: list[tuple[int, int, int]] = []
    j = 0
    for finding in found:
        start, _, end = finding
        # Placeholders are apart and sorted: skip those that end before this finding starts.
        while j < len(taken) and taken[j][1] <= start:
            j += 1
        if j < len(taken) and taken[j][0] < end:
            continue
        kept.append(finding)
    return kept


class MaskingSession:
    """A ``Masker`` with a memory: long strings it has masked are not masked again.

    A model call sends the whole conversation every turn; without this, masking
    a run would cost the square of its number of turns.
    """

    __slots__ = ("_cache", "masker")

    def __init__(self, masker: Masker) -> None:
        self.masker = masker
        self._cache = _StringCache()

    def mask(self, kind: str, key: str, value: Any, *, part: str = "input") -> MaskResult:
        """Mask one payload of boundary ``kind``/``key``; ``part`` is input, output or error."""
        return self.masker._mask(kind, key, value, part, self._cache)

    @property
    def cached_strings(self) -> int:
        return len(self._cache)


class _Holder:
    """Stands in for the container of a payload that is itself a string."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: Any = None

    def __setitem__(self, key: object, value: Any) -> None:
        self.value = value


# A string waiting for the detectors: where it goes, its path, its walk order, and
# whether it was an integer (left as one unless something is found in it).
_Slot = tuple[Any, Segment, Path, int, bool]


class _Walk:
    """One walk over one payload: the copy, what fired, the strings left to scan."""

    __slots__ = ("active", "cache", "fields", "fired", "masker", "order", "path", "pending", "plan", "rules")

    def __init__(
        self, masker: Masker, plan: _Plan, active: tuple[int, ...], fields: bool, cache: _StringCache | None
    ) -> None:
        self.masker = masker
        self.plan = plan
        self.rules = plan.path_rules
        self.active = active
        self.fields = plan.fields if fields else ()
        self.cache = cache
        self.fired: list[tuple[int, Path, str]] = []
        self.path: list[Segment] = []
        self.pending: dict[str, list[_Slot]] = {}
        self.order = 0

    def run(self, value: Any) -> Any:
        holder = _Holder()
        states = self.plan.roots
        rule = self._complete(states) if states else None
        holder.value = self._apply(rule, value) if rule is not None else self.value(value, states, holder, "")
        if self.pending:
            self._scan_pending()
        return holder.value

    def fire(self, rule: str, path: Sequence[Segment] | None = None, order: int | None = None) -> None:
        self.fired.append((self.order if order is None else order, tuple(self.path if path is None else path), rule))

    def fired_paths(self) -> tuple[tuple[str, str], ...]:
        seen: dict[tuple[Path, str], None] = {}
        for _, path, rule in sorted(self.fired, key=lambda f: f[0]):
            seen[(path, rule)] = None
        formatted: dict[Path, str] = {}
        out = []
        for path, rule in seen:
            text = formatted.get(path)
            if text is None:
                text = formatted[path] = format_path(path)
            out.append((text, rule))
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
        new = rule(value, self.masker._pseudonyms)
        if rule.action != "keep" and (new is DROP or (new is not value and new != value)):
            self.fire(rule.name)
        return new

    # -- values ---------------------------------------------------------------------------

    def value(self, value: Any, states: tuple[tuple[int, int], ...], container: Any, slot: Segment) -> Any:
        kind = type(value)
        if kind is str:
            return self.string(value, container, slot, False)
        if kind is dict:
            return self.mapping(value, states)
        if kind is list or kind is tuple:
            return self.sequence(value, states)
        if kind is int:
            if -_INT_LIMIT < value < _INT_LIMIT:
                return value
            return self.string(str(value), container, slot, True) or value
        if value is None or kind is bool or kind is float:
            return value
        if isinstance(value, str):
            return self.string(str.__str__(value), container, slot, False)
        # Anything else (enums, dataclasses, datetimes, models, numpy): the JSON value
        # the span codec would write for it.
        converted = orjson.loads(orjson.dumps(value, default=self.masker._default, option=_SERIALIZE))
        return self.value(converted, states, container, slot)

    def string(self, text: str, container: Any, slot: Segment, number: bool) -> Any:
        """The string itself for now; a slot is noted where a detector may change it."""
        self.order += 1
        if len(text) < self.masker.min_length:
            return None if number else text
        cache = self.cache
        if cache is not None and len(text) >= _CACHE_MIN:
            hit = cache.get(text)
            if hit is not None:
                masked, names = hit
                for name in names:
                    self.fire(name)
                return masked if names or not number else None
        self.pending.setdefault(text, []).append((container, slot, tuple(self.path), self.order, number))
        return None if number else text

    def _scan_pending(self) -> None:
        texts = list(self.pending)
        results = self.masker._detect(texts, self.active)
        cache = self.cache
        for text, (masked, names) in zip(texts, results, strict=True):
            if cache is not None and len(text) >= _CACHE_MIN:
                cache.put(text, (masked, names))
            if not names:
                continue
            for container, slot, path, order, _number in self.pending[text]:
                container[slot] = masked
                for name in names:
                    self.fire(name, path, order)

    def mapping(self, mapping: dict[Any, Any], states: tuple[tuple[int, int], ...]) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        path = self.path
        fields = self.fields
        min_length = self.masker.min_length
        for key, item in mapping.items():
            new_key = key
            if type(key) is str and len(key) >= min_length:
                masked_key, names = self.masker._detect_key(key)
                if names:
                    new_key = masked_key
                    if new_key in out:
                        # Two keys that mask alike ("<email>" twice without a key) stay apart.
                        n = 2
                        while f"{new_key}#{n}" in out:
                            n += 1
                        new_key = f"{new_key}#{n}"
                    self.order += 1
                    for name in names:
                        self.fire(name, [*path, new_key])
            path.append(new_key)
            child = self._advance(states, key) if states else ()
            rule = self._complete(child) if child else None
            if rule is not None:
                new = self._apply(rule, item)
            else:
                matched = None
                if fields and type(key) is str:
                    for field_rule in fields:
                        field_name = field_rule.match(key)
                        if field_name is not None:
                            matched = (field_rule, field_name)
                            break
                if matched is not None:
                    new = matched[0](item, matched[1], self.masker._pseudonyms)
                    if new is not item and new != item:
                        self.order += 1
                        self.fire(f"field:{matched[1]}")
                else:
                    new = self.value(item, child, out, new_key)
            path.pop()
            if new is not DROP:
                out[new_key] = new
        return out

    def sequence(self, items: Sequence[Any], states: tuple[tuple[int, int], ...]) -> list[Any]:
        out: list[Any] = []
        path = self.path
        for index, item in enumerate(items):
            path.append(index)
            child = self._advance(states, index) if states else ()
            rule = self._complete(child) if child else None
            # A string waiting for the detectors is written to its index, len(out), later.
            new = self._apply(rule, item) if rule is not None else self.value(item, child, out, len(out))
            path.pop()
            if new is not DROP:
                out.append(new)
        return out


def _segment_matches(segment: Segment, key: Segment) -> bool:
    if segment == "*":
        return True
    if isinstance(segment, int):
        return isinstance(key, int) and not isinstance(key, bool) and key == segment
    return segment == key


_MASKERS: dict[tuple[MaskingConfig, bytes | None, int], Masker] = {}
_MASKERS_LOCK = threading.Lock()


def masker_for(config: MaskingConfig, *, default: Callable[[Any], Any] | None = None) -> Masker:
    """The ``Masker`` for ``config``, built once and reused while the config (and key) stay the same.

    Compiling the hyperscan databases takes tens of milliseconds; ``configure()``
    may be called once per test.
    """
    try:
        cache_key = (config, config.resolved_key(), id(default))
        hash(cache_key)
    except TypeError:  # a config holding lists or sets: built anew each time
        return Masker(config, default=default)
    with _MASKERS_LOCK:
        masker = _MASKERS.get(cache_key)
        if masker is None:
            if len(_MASKERS) >= 16:
                _MASKERS.clear()
            masker = _MASKERS[cache_key] = Masker(config, default=default)
        return masker

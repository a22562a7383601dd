"""The masking pipeline: path rules, then field-name rules, then detectors.

``Masker.mask(kind, key, value)`` returns the masked value and the list of
``(JSON path, rule name)`` that fired; the values that were masked appear
nowhere in the result. It runs in three steps:

1. The gate reads the payload serialized (orjson; the caller's own encoding when
   it has one, see ``MaskingSession.mask_encoded``): when no detector can match
   and no key can match a field-name rule, the payload is returned as it is,
   without walking it.
2. Otherwise the payload is copied in one walk. At each node the path rules that
   apply to the boundary are tried in order (the first that matches decides),
   then the field-name rules on object keys; the strings left are collected
   (the detectors read strings only: a number, bool or null keeps its type).
3. The gate locates the detectors' hits in all collected strings at once; each
   string's findings are resolved (earliest first, then detector order) and
   replaced with pseudonyms or placeholders. Placeholders already in the text
   are never touched, so masking is idempotent.

A ``MaskingSession`` (one per run) remembers the masked form of every long
string it has seen, so the conversation a model call resends each turn is
masked once, not once per turn.
"""

from __future__ import annotations

import copy
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from spanreplay.errors import ConfigurationError

from ._bytes import B, masked_bytes
from ._config import MaskingConfig
from ._detector import Detector, warn_old_hints
from ._engine import Gate, PythonGate, make_gate
from ._hints import UNHINTED, hints_of
from ._plan import Plan, StringCache
from ._pseudonyms import LEGACY_TOKEN_HEX, TOKEN_HEX, Pseudonyms
from ._rules import DROP, FieldNames, PathRule
from ._scanner import Scanner
from ._walk import SERIALIZE, Walk

__all__ = ["MaskResult", "Masker", "MaskingSession", "masker_for"]

_NAME: Final = re.compile(r"[a-z][a-z0-9_]{0,40}")


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
        self._build(config, default, TOKEN_HEX)

    def _build(self, config: MaskingConfig | None, default: Callable[[Any], Any] | None, token_hex: int) -> None:
        self.config = config = config if config is not None else MaskingConfig()
        self.detectors: tuple[Detector, ...] = config.resolved_detectors()
        for detector in self.detectors:
            if not isinstance(getattr(detector, "name", None), str) or not _NAME.fullmatch(detector.name):
                raise ConfigurationError(
                    f"Detector {detector!r} has the name {getattr(detector, 'name', None)!r}; a detector name "
                    "is its placeholder label: lower case letters, digits and '_', starting with a letter."
                )
            if hints_of(detector) is UNHINTED:
                warn_old_hints(detector)
        self._pseudonyms = Pseudonyms(config.resolved_key(), token_hex=token_hex)
        self._path_rules = tuple(r for r in config.rules if isinstance(r, PathRule))
        # The rule names recorded for a detector's finding and for nothing else.
        self.detector_names = frozenset(d.name for d in self.detectors) - {r.name for r in self._path_rules}
        fields = [r for r in config.rules if isinstance(r, FieldNames)]
        if config.field_names:
            fields.append(FieldNames(config.field_names))
        self._field_rules = tuple(fields)
        words = tuple(sorted({w for r in fields for w in r.last_words()}))
        patterns = tuple(p for r in fields for p in r.prefilter_patterns())
        self.gate: Gate = make_gate(config.engine, self.detectors, words, patterns)
        self._scanner = Scanner(self.detectors, self.gate, PythonGate(self.detectors, words), self._pseudonyms)
        self._all = tuple(range(len(self.detectors)))
        # The shortest string any detector can find something in.
        self.min_length = self._scanner.min_length
        self._default = default or _default
        self._plans: dict[tuple[str, str, str], Plan] = {}
        self._lock = threading.Lock()
        self._legacy: Masker | None = None

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
        """How this masker writes tokens: ``off``, ``placeholders`` or ``keyed:{key id}:64``
        (64-bit tokens; ``keyed:{key id}`` alone was written for the 32-bit tokens before).

        Recorded on the run span, so replay can tell that it masks the current
        input the way the recording was masked.
        """
        if not self.config.enabled:
            return "off"
        key_id = self._pseudonyms.key_id
        if key_id is None:
            return "placeholders"
        if self._pseudonyms.token_hex == LEGACY_TOKEN_HEX:
            return f"keyed:{key_id}"
        return f"keyed:{key_id}:{self._pseudonyms.token_hex * 4}"

    def for_recording(self, fingerprint: str | None) -> Masker | None:
        """A masker that masks as a run recorded with ``fingerprint`` was masked: this one,
        or (same key, 32-bit tokens) its twin that writes the shorter tokens; None when
        neither does. ``fingerprint`` None (a run recorded before it was written): this one."""
        if fingerprint is None or fingerprint == self.fingerprint:
            return self
        if self._pseudonyms.keyed and fingerprint == f"keyed:{self._pseudonyms.key_id}":
            with self._lock:
                if self._legacy is None:
                    legacy = Masker.__new__(Masker)
                    legacy._build(self.config, self._default, LEGACY_TOKEN_HEX)
                    self._legacy = legacy
                return self._legacy
        return None

    def salted(self, salt: bytes) -> Masker:
        """A twin that finds what this masker finds and writes tokens keyed by ``salt``.

        It shares this masker's rules, detectors and gates (nothing is compiled again);
        only its pseudonyms and their memory are its own. Its masked payloads are never
        recorded: the exact checks of a run masked without a key are read from them
        (see ``_place_checks``).
        """
        twin = copy.copy(self)
        twin._pseudonyms = Pseudonyms(salt, token_hex=TOKEN_HEX)
        twin._scanner = self._scanner.with_pseudonyms(twin._pseudonyms)
        twin._legacy = None
        return twin

    def session(self) -> MaskingSession:
        """A session that remembers what it masked: one per run."""
        return MaskingSession(self)

    def mask(self, kind: str, key: str, value: Any, *, part: str = "input") -> MaskResult:
        """Mask one payload of boundary ``kind``/``key``; ``part`` is input, output or error."""
        return self.mask_payload(kind, key, value, part) or MaskResult(value)

    def scan_text(self, text: str) -> tuple[str, tuple[str, ...]]:
        """Run the detectors on one string: the masked string and the names that fired."""
        return self._scanner.changes([text], self._all).get(0) or (text, ())

    def mask_bytes(self, data: B) -> tuple[B, tuple[str, ...]]:
        """``data`` read as UTF-8 (bytes that are not kept as they are), the detectors run on
        it, and written back as the same type; the names that fired (``data`` itself when none did)."""
        if not self.config.enabled:
            return data, ()
        return masked_bytes(data, self.scan_text)

    def scan_texts(self, texts: Sequence[str]) -> list[str]:
        """Each of ``texts`` with what the detectors find in it masked, all scanned at once."""
        changed = self._scanner.changes(texts, self._all)
        return [changed[k][0] if k in changed else text for k, text in enumerate(texts)]

    def forget(self) -> None:
        """Forget every value masked so far: the next payloads are masked as if seen first.

        The masker remembers the token of each value it masked, so that a value seen
        again costs a lookup; a benchmark of first sight, or a process that wants that
        memory back, calls this. Tokens stay the same: the memory only saves work.
        """
        self._scanner.forget()
        self._pseudonyms.forget()

    # -- internals ------------------------------------------------------------------

    def _new_plan(self, kind: str, key: str, part: str) -> Plan:
        """The plan of a boundary not seen before (``mask_payload`` looks up the others), remembered."""
        plan = Plan(
            tuple(r for r in self._path_rules if r.selector.applies(kind, key, part)),
            tuple(r for r in self._field_rules if r.selector.applies(kind, key, part)),
        )
        with self._lock:
            if len(self._plans) > 4096:
                self._plans.clear()
            self._plans[(kind, key, part)] = plan
        return plan

    def mask_payload(
        self,
        kind: str,
        key: str,
        value: Any,
        part: str,
        *,
        encoded: bytes | None = None,
        cache: StringCache | None = None,
    ) -> MaskResult | None:
        """One payload masked: the result, or None when nothing changes.

        ``encoded`` is ``value`` as orjson writes it with this masker's ``default``
        (keys in any order), when the caller has it: the gate then reads those bytes
        instead of serializing the payload again. Most payloads end at the gate, so
        the caller keeps its bytes and the payload is neither walked nor copied.
        ``cache`` remembers strings already scanned (a session passes its own).
        """
        if not self.config.enabled:
            return None
        # The plan of a boundary seen before is one lookup, not a call.
        plan = self._plans.get((kind, key, part)) or self._new_plan(kind, key, part)
        active: Sequence[int] = self._all
        fields = plan.has_fields
        if not plan.path_rules:
            if encoded is None:
                try:
                    encoded = orjson.dumps(value, default=self._default, option=SERIALIZE)
                except TypeError:
                    encoded = None  # the walk converts what it can and raises what it cannot
            if encoded is not None:
                active, fields_possible = self.gate.select_payload(encoded)
                fields = fields and fields_possible
                if not active and not fields:
                    return None
        return self._walked(plan, value, active, fields=fields, cache=cache)

    def _walked(
        self, plan: Plan, value: Any, active: Sequence[int], *, fields: bool, cache: StringCache | None
    ) -> MaskResult | None:
        """The payload walked with the detectors ``active`` (and the field-name rules when
        ``fields``): the masked copy, or None when nothing fired."""
        walk = Walk(plan, self._scanner, self._pseudonyms, self._default, tuple(active), fields=fields, cache=cache)
        masked = walk.run(value)
        if not walk.fired:
            return None  # every change fires, so this is the payload, uncopied
        return MaskResult(None if masked is DROP else masked, walk.fired_paths())


class MaskingSession:
    """A ``Masker`` with a memory: long strings it has masked are not masked again.

    A model call sends the whole conversation every turn; without this, masking
    a run would cost the square of its number of turns.
    """

    __slots__ = ("_cache", "masker")

    def __init__(self, masker: Masker) -> None:
        self.masker = masker
        self._cache = StringCache()

    def mask(self, kind: str, key: str, value: Any, *, part: str = "input") -> MaskResult:
        """Mask one payload of boundary ``kind``/``key``; ``part`` is input, output or error."""
        return self.masker.mask_payload(kind, key, value, part, cache=self._cache) or MaskResult(value)

    def mask_encoded(
        self, kind: str, key: str, value: Any, encoded: bytes, *, part: str = "input"
    ) -> MaskResult | None:
        """``mask()`` for a payload the caller has serialized already; None when nothing changes.

        ``encoded`` is ``value`` as orjson writes it with the masker's ``default``
        (keys in any order: the span codec sorts an input's); see ``Masker.mask_payload``.
        None means exactly what a ``mask()`` that fired nothing means.
        """
        return self.masker.mask_payload(kind, key, value, part, encoded=encoded, cache=self._cache)

    @property
    def cached_strings(self) -> int:
        return len(self._cache)


_MASKERS: dict[tuple[MaskingConfig, bytes | None, int], Masker] = {}
_MASKERS_LOCK = threading.Lock()


def masker_for(config: MaskingConfig, *, default: Callable[[Any], Any] | None = None) -> Masker:
    """The ``Masker`` for ``config``, built once and reused while the config (and key) stay the same.

    Compiling the hyperscan databases is slow next to masking a payload; ``configure()``
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

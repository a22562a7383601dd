"""Scanning strings: each detector's findings in a text, resolved and replaced.

The gate says which detectors to ask about each text and where; the scanner
asks them, resolves overlaps (the earliest finding wins, then the detector that
comes first), leaves placeholders already in the text alone (so masking is
idempotent) and writes each finding's token in one join.

A finding's token depends on its detector and its text only, so the scanner
remembers the token of each finding it has seen: the same address met again,
in this payload or a later one, costs one dictionary lookup instead of its
normalization and keyed hash.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Final

from ._detector import Detector, RegexDetector, Window
from ._engine import Gate, PythonGate
from ._hints import hints_of
from ._joined import join, split_windows, starts_of
from ._pseudonyms import PLACEHOLDER, Pseudonyms

__all__ = ["WITHHELD", "Scanned", "Scanner"]

Scanned = tuple[str, tuple[str, ...]]  # the masked text, the names of the detectors that fired
Finding = tuple[int, int, int]  # start, detector index, end: sorts by position, then priority

# Passes over a text after the first, when findings touch their neighbours; and
# what the text becomes when they keep revealing more.
_RESCANS: Final = 3
WITHHELD: Final = "<masked>"
# Tokens remembered per detector, and the longest finding remembered: a token is
# cheap to make again, and a finding held here is a copy of a secret in memory.
_TOKENS_HELD: Final = 16384
_TOKEN_KEY_MAX: Final = 256
# Object keys remembered with their scan results.
_KEYS_HELD: Final = 8192
_KEY_MAX: Final = 256


class Scanner:
    """Finds and replaces the detectors' findings in strings. Thread-safe."""

    __slots__ = (
        "_all",
        "_alone",
        "_constant",
        "_keys",
        "_names",
        "_pseudonyms",
        "_python_gate",
        "_remembered",
        "_separable",
        "_tokens",
        "detectors",
        "gate",
        "min_length",
    )

    def __init__(
        self, detectors: tuple[Detector, ...], gate: Gate, python_gate: PythonGate, pseudonyms: Pseudonyms
    ) -> None:
        self.detectors = detectors
        self.gate = gate
        self._python_gate = python_gate
        self._pseudonyms = pseudonyms
        self._all = tuple(range(len(detectors)))
        self._names = tuple(d.name for d in detectors)
        # What fired in a text where one detector found something: shared, not built per text.
        self._alone = tuple((name,) for name in self._names)
        hints = [hints_of(d) for d in detectors]
        self._separable = tuple(h.separable for h in hints)
        # The shortest text any detector can find something in.
        self.min_length = min((h.min_length for h in hints), default=1 << 30)
        # A detector whose every finding becomes the same placeholder needs no memory.
        self._constant: tuple[str | None, ...] = tuple(
            None if pseudonyms.keyed and d.pseudonymize else f"<{d.name}>" for d in detectors
        )
        self._tokens: tuple[dict[str, str], ...] = tuple({} for _ in detectors)
        # Their lookups, bound once (a memo is cleared, never replaced).
        self._remembered = tuple(memo.get for memo in self._tokens)
        self._keys: dict[str, Scanned] = {}

    def with_pseudonyms(self, pseudonyms: Pseudonyms) -> Scanner:
        """A scanner that finds what this one finds (same detectors and gates) and writes
        ``pseudonyms``' tokens, remembering its own."""
        return Scanner(self.detectors, self.gate, self._python_gate, pseudonyms)

    def forget(self) -> None:
        """Drop the remembered token of every value found so far."""
        for memo in self._tokens:
            memo.clear()
        self._keys.clear()

    def changes(self, texts: Sequence[str], active: Sequence[int]) -> dict[int, Scanned]:
        """The masked form of each text something fired in (by index), and the detectors
        that fired in it; the other texts are as they were."""
        if not active or not texts:
            return {}
        joined, starts, found = self._find(texts, active, self.gate)
        if not found:
            return {}
        out: dict[int, Scanned] = {}
        glued = self._rewrite(joined, starts, found, out)
        if glued:
            self._rescan(glued, out)
        return out

    def scan_key(self, key: str) -> Scanned:
        """An object key's masked form and the detectors that fired in it. Keys repeat
        from payload to payload and are short: remembered here, and looked for with
        literal tests alone."""
        hit = self._keys.get(key)
        if hit is None:
            _, _, found = self._find((key,), self._all, self._python_gate)
            hit = self._settle(key, found) if found else (key, ())
            if len(key) <= _KEY_MAX:
                if len(self._keys) >= _KEYS_HELD:
                    self._keys.clear()
                self._keys[key] = hit
        return hit

    def _find(self, texts: Sequence[str], active: Sequence[int], gate: Gate) -> tuple[str, list[int], list[Finding]]:
        """The texts joined, where each starts in that (and one past the end plus one),
        and the findings in all of them, sorted, in offsets of the joined texts."""
        joined = join(texts)
        starts = starts_of(texts) if len(texts) > 1 else [0, len(joined) + 1]
        located = gate.locate(texts, joined, active)
        if not located:
            return joined, starts, []
        detectors = self.detectors
        separable = self._separable
        single = len(texts) == 1
        found: list[Finding] = []
        for i, windows in located.items():
            if single or separable[i]:
                if windows is None:
                    spans = detectors[i](joined)
                else:
                    detector = detectors[i]
                    assert isinstance(detector, RegexDetector)
                    spans = detector.locate(joined, windows)
                found += [(start, i, end) for start, end in spans]
            else:
                found += self._text_by_text(i, windows, texts, starts)
        # Each detector's findings come mostly in runs already in order, which the
        # sort merges; _rewrite tells the texts apart as it goes through them.
        found.sort()
        return joined, starts, found

    def _text_by_text(
        self, i: int, windows: tuple[Sequence[Window] | None, ...] | None, texts: Sequence[str], starts: list[int]
    ) -> list[Finding]:
        """Detector ``i``, which is not separable, asked about each text alone."""
        detector = self.detectors[i]
        selects = self._python_gate.selects
        found: list[Finding] = []
        if windows is None:
            for k, text in enumerate(texts):
                if selects(text, i):
                    base = starts[k]
                    found += [(start + base, i, end + base) for start, end in detector(text)]
            return found
        assert isinstance(detector, RegexDetector)
        split = [None if w is None else split_windows(w, starts) for w in windows]
        whole = any(w is None for w in windows)
        windowed = {k for per_text in split if per_text for k in per_text}
        shortest = detector.hints.min_length
        for k in range(len(texts)) if whole else sorted(windowed):
            text = texts[k]
            if len(text) < shortest or (whole and k not in windowed and not selects(text, i)):
                continue
            base = starts[k]
            own = tuple(None if per_text is None else per_text.get(k, ()) for per_text in split)
            found += [(start + base, i, end + base) for start, end in detector.locate(text, own)]
        return found

    def _settle(self, text: str, found: list[Finding]) -> Scanned:
        """One text with its findings (sorted) replaced, and masked again while a
        replacement may have revealed more."""
        out: dict[int, Scanned] = {}
        glued = self._rewrite(text, [0, len(text) + 1], found, out)
        if glued:
            self._rescan(glued, out)
        return out.get(0) or (text, ())

    def _rescan(self, glued: list[int], out: dict[int, Scanned]) -> None:
        """The texts ``glued`` of ``out``, where a finding touched its neighbour, masked
        again until nothing changes: all of them scanned together on each pass, as the
        first pass scanned them (prose puts a comma after an address: most texts of a
        conversation come back here)."""
        # A finding written against its neighbour ("10.0.0.1sk-ant-...") was a boundary
        # for the detectors; its placeholder may not be ("<ipv4>sk-ant-..." is a key).
        # Masking again until nothing changes keeps masking idempotent.
        rescans = 0
        while glued:
            joined, starts, found = self._find([out[k][0] for k in glued], self._all, self.gate)
            if not found:
                return
            again: dict[int, Scanned] = {}
            still = self._rewrite(joined, starts, found, again)
            rescans += 1
            for j, (masked, more) in again.items():
                k = glued[j]
                names = out[k][1]
                out[k] = (masked, (*names, *(name for name in more if name not in names)))
            if rescans == _RESCANS:
                # A chain of secrets each hiding the next (a phone number against a key
                # against a phone number...) would cost a pass each: past a few, the
                # whole text is withheld, which is final and costs nothing more.
                for j in still:
                    out[glued[j]] = (WITHHELD, out[glued[j]][1])
                return
            glued = [glued[j] for j in still]

    def _rewrite(self, source: str, starts: list[int], found: list[Finding], out: dict[int, Scanned]) -> list[int]:
        """Each text of ``source`` (texts joined, starting at ``starts``) that holds findings
        (sorted, in offsets of ``source``): written into ``out`` by its index, each finding
        replaced in one join, with the detectors that found something in it. Returns the
        indexes of the texts where a finding touched a neighbouring character.

        One pass over the findings: a text's findings are those before the next text
        starts, so no text's findings are cut out into a list of their own."""
        if source.find("<") != -1:
            found = _outside_placeholders(source, found)
        constant = self._constant
        remembered = self._remembered
        make = self._token
        alone = self._alone
        glued_texts: list[int] = []
        total = len(found)
        n = 0
        k = -1
        while n < total:
            start, i, end = found[n]
            # The text this finding is in: most often the one after the last.
            k += 1
            following = starts[k + 1]
            if following <= start:
                k = bisect_right(starts, start, k) - 1
                following = starts[k + 1]
            lo = starts[k]
            hi = following - 1
            if n + 1 < total and found[n + 1][0] < following:
                n, text, names, glued = self._rewrite_text(source, found, n, lo, hi, following)
                out[k] = (text, names)
                if glued:
                    glued_texts.append(k)
                continue
            # The only finding in its text: the common case in records, a field
            # holding one email, one phone number.
            n += 1
            token = constant[i]
            if token is None:
                raw = source[start:end]
                token = remembered[i](raw) or make(i, raw)
            out[k] = (source[lo:start] + token + source[end:hi], alone[i])
            if (start > lo and not source[start - 1].isspace()) or (end < hi and not source[end].isspace()):
                glued_texts.append(k)
        return glued_texts

    def _rewrite_text(
        self, source: str, found: list[Finding], n: int, lo: int, hi: int, following: int
    ) -> tuple[int, str, tuple[str, ...], bool]:
        """The text ``source[lo:hi]`` with its findings (from ``found[n]``, those that start
        before ``following``) replaced in one join: the index of the next text's first
        finding, the text, the detectors that found something in it, and whether a
        finding touched a neighbouring character."""
        constant = self._constant
        remembered = self._remembered
        make = self._token
        all_names = self._names
        total = len(found)
        pieces: list[str] = []
        append = pieces.append
        names: list[str] = []
        glued = False
        pos = lo
        while n < total:
            start, i, end = found[n]
            if start >= following:
                break
            n += 1
            if start < pos:
                continue  # overlaps an earlier (or higher-priority) finding
            token = constant[i]
            if token is None:
                raw = source[start:end]
                token = remembered[i](raw) or make(i, raw)
            append(source[pos:start])
            append(token)
            name = all_names[i]
            if name not in names:
                names.append(name)
            if not glued and (
                (start > lo and not source[start - 1].isspace()) or (end < hi and not source[end].isspace())
            ):
                glued = True
            pos = end
        append(source[pos:hi])
        return n, "".join(pieces), tuple(names), glued

    def _token(self, i: int, raw: str) -> str:
        detector = self.detectors[i]
        token = self._pseudonyms.token(detector.name, detector.normalize(raw), pseudonymize=detector.pseudonymize)
        if len(raw) <= _TOKEN_KEY_MAX:
            memo = self._tokens[i]
            if len(memo) >= _TOKENS_HELD:
                memo.clear()
            memo[raw] = token
        return token


def _outside_placeholders(source: str, found: list[Finding]) -> list[Finding]:
    """The findings that overlap no placeholder already in ``source`` (one sweep, both
    sorted). ``source`` may be texts joined with NUL: no placeholder holds a NUL, so a
    finding can overlap only those in its own text."""
    taken = [m.span() for m in PLACEHOLDER.finditer(source)]
    if not taken:
        return found
    kept: list[Finding] = []
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

"""Gates: which detectors to ask about a payload's strings, and where to look.

A gate never decides what is masked. It answers, for a payload's strings joined
with NUL (see ``_joined``), which detectors could find something in them and,
for patterns that promise a ``reach``, the windows their hits must lie in. Every
answer covers every finding, so the masked result is the same whichever gate
runs (a test holds them to that):

- ``PythonGate`` (always there): a detector is asked when one of its
  ``literals`` occurs (one C-level search), and then scans the strings whole.
- ``HyperscanGate`` (when the ``hyperscan`` package is installed): one Intel
  Hyperscan pass over a whole serialized payload says whether anything can be
  masked at all (a clean payload is then done without being walked), and one
  pass over all of a payload's strings, joined, reports where every prefilter
  matches, so each pattern runs only in small windows around those places.
"""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from spanreplay.errors import ConfigurationError

from ._detector import Detector, Pattern, RegexDetector, Window
from ._hints import hints_of
from ._regex import holds_digit, widest
from ._windows import around, before_ends, unescaped

__all__ = ["Gate", "HyperscanGate", "Located", "PythonGate", "hyperscan_available", "make_gate"]

# What a gate says about a payload's strings, joined: the detectors to ask (by
# index) and, for a RegexDetector, each pattern's windows over the joined
# strings (None: scan them whole; empty: nothing to find). A detector mapped to
# None is asked about all of them. In a built-in prefilter only a boundary
# (``after()``, ``before()``) can take the NUL that joins them, so its matches
# reach at most the separator on either side of a string; a prefilter of your own
# that matches across one only widens the windows, which still cover every hit.
Located = dict[int, tuple[Sequence[Window] | None, ...] | None]


class Gate(Protocol):
    """Which detectors may find something, and where."""

    name: str

    def select_payload(self, data: bytes) -> tuple[Sequence[int], bool]:
        """For a whole serialized payload (JSON text): the detectors that may find
        something in it, and False only when no object key in it can match a
        field-name rule. Any superset is a right answer: ``locate`` looks again."""
        ...

    def locate(self, texts: Sequence[str], joined: str, among: Sequence[int]) -> Located:
        """For ``texts`` and ``joined`` (them joined with NUL): the detectors in
        ``among`` to ask, and where in ``joined`` to look."""
        ...


class PythonGate:
    """Literal tests only; always available."""

    name = "python"

    def __init__(self, detectors: Sequence[Detector], field_words: Sequence[str]) -> None:
        hints = [hints_of(d) for d in detectors]
        self._min = tuple(h.min_length for h in hints)
        # One search per detector for any of its literals (a single character class
        # when they are single characters), in C rather than a loop of tests.
        self._literals = tuple(_any_of(h.literals) for h in hints)
        self._blob_literals = tuple(tuple(lit.encode() for lit in h.literals) for h in hints)
        self._field_words = tuple(f'{w}":'.encode() for w in field_words)

    def select_payload(self, data: bytes) -> tuple[Sequence[int], bool]:
        out = []
        for i, literals in enumerate(self._blob_literals):
            if not literals or any(lit in data for lit in literals):
                out.append(i)
        fields = bool(self._field_words)
        if fields:
            lowered = data.lower()
            fields = any(word in lowered for word in self._field_words)
        return out, fields

    def selects(self, text: str, i: int) -> bool:
        """Whether detector ``i`` is to be asked about ``text`` alone."""
        if len(text) < self._min[i]:
            return False
        literals = self._literals[i]
        return literals is None or literals(text) is not None

    def locate(self, texts: Sequence[str], joined: str, among: Sequence[int]) -> Located:
        longest = len(joined) if len(texts) == 1 else max(map(len, texts))
        minimum = self._min
        literals = self._literals
        out: Located = {}
        for i in among:
            if longest >= minimum[i]:
                search = literals[i]
                if search is None or search(joined) is not None:
                    out[i] = None
        return out


def _any_of(literals: Sequence[str]) -> Callable[[str], object] | None:
    """A search that finds any of ``literals`` in a text; None when there are none to find."""
    if not literals:
        return None
    if all(len(lit) == 1 for lit in literals):
        expression = "[" + "".join(re.escape(lit) for lit in literals) + "]"
    else:
        expression = "|".join(re.escape(lit) for lit in sorted(literals, key=len, reverse=True))
    return re.compile(expression).search


class HyperscanGate:
    """Hyperscan finds every prefilter match; Python runs the patterns near them.

    The compiled databases are shared; each thread scans with its own scratch space.
    """

    name = "hyperscan"

    def __init__(
        self, detectors: Sequence[Detector], field_words: Sequence[str], field_patterns: Sequence[str]
    ) -> None:
        # Imported by name: hyperscan is optional, and the pure-Python gate serves without it.
        hyperscan: Any = importlib.import_module("hyperscan")
        self._hs = hyperscan
        self._python = PythonGate(detectors, field_words)
        self._all = tuple(range(len(detectors)))
        hints = [hints_of(d) for d in detectors]
        self._min = tuple(h.min_length for h in hints)

        # The payload gate. A detector's first report ends the scan (only the field-name
        # pattern's does not), so how many reports a detector's prefilter could make
        # never matters, and their flags are chosen for speed alone (measured with
        # benchmarks/bench_record.py; see benchmarks/README.md):
        # - a prefilter every match of which holds a digit (the number prefilters, with
        #   no literal to start from): none. With SINGLEMATCH, as the others have it,
        #   hyperscan scanned text without a finding much more slowly, and text with
        #   numbers in it no faster.
        # - the others: SINGLEMATCH. Without it on them too, every scan was slower.
        expressions: list[bytes] = []
        ids: list[int] = []
        flags: list[int] = []
        # Detectors without a prefilter are asked through their literals instead.
        self._unfiltered = tuple(i for i, h in enumerate(hints) if h.prefilter is None)
        for i, own in enumerate(hints):
            if own.prefilter is not None:
                expressions.append(own.prefilter.encode())
                ids.append(i)
                flags.append(0 if holds_digit(own.prefilter) else hyperscan.HS_FLAG_SINGLEMATCH)
        self._field_id = len(detectors)
        if field_patterns:
            # An object key in orjson's output is a string followed directly by ":".
            expressions.append(("(?:" + "|".join(field_patterns) + ')":').encode())
            ids.append(self._field_id)
            flags.append(hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_CASELESS)
        self._payload_db = self._compile(expressions, ids, flags)

        # The locating database: where each prefilter matches, in the payload's strings
        # as they are (not JSON-escaped). A pattern with a reach needs to know where its
        # prefilter's matches lie. A match ending at ``end`` starts at or after ``end -
        # width`` when no match of the prefilter is wider than ``width``, and hyperscan
        # scans faster for ends alone: only a prefilter of unbounded (or unknown) width
        # is compiled to report its matches' starts too (SOM_LEFTMOST). A detector
        # that is not a RegexDetector, or a pattern without a reach, needs only to know
        # that its prefilter matched. Its flags are chosen for speed alone (measured
        # with benchmarks/bench_masking.py; see CHANGELOG.md):
        # - of bounded width (the key and token prefilters): SOM_LEFTMOST, its starts
        #   unused. Without it the database compiles much more slowly (a key's long
        #   fixed repeats cost most), with SINGLEMATCH or not. SINGLEMATCH, which cannot
        #   go with SOM_LEFTMOST, would save a few reports only.
        # - of unbounded width (the email prefilter): none. Asking for its matches'
        #   starts, or SINGLEMATCH, made the scans slower.
        self._targets: list[tuple[int, int]] = []  # pattern id -> (detector, pattern or -1)
        self._patterns: list[tuple[Pattern, ...]] = []
        # Per pattern id: how far before a match's end its window starts (the widest
        # match plus the reach), or None where the match's own start says it.
        leads: list[int | None] = []
        expressions = []
        flags = []
        for i, detector in enumerate(detectors):
            patterns = detector.patterns if isinstance(detector, RegexDetector) else ()
            self._patterns.append(patterns)
            if hints[i].prefilter is None:
                continue
            for j, prefilter in enumerate([p.hints.prefilter for p in patterns] if patterns else [hints[i].prefilter]):
                assert prefilter is not None
                expression = unescaped(prefilter)
                width = self._widest(expression)
                reach = patterns[j].hints.reach if patterns else None
                if reach is None:
                    flags.append(0 if width is None else hyperscan.HS_FLAG_SOM_LEFTMOST)
                    leads.append(0)
                elif width is None:
                    flags.append(hyperscan.HS_FLAG_SOM_LEFTMOST)
                    leads.append(None)
                else:
                    flags.append(0)
                    leads.append(width + reach)
                expressions.append(expression.encode())
                self._targets.append((i, j if patterns else -1))
        self._leads = tuple(leads)
        self._starts = None in leads  # whether any match's start is asked for
        self._locate_db = self._compile(expressions, list(range(len(expressions))), flags)
        self._local = threading.local()

    def _widest(self, expression: str) -> int | None:
        """No match of ``expression`` (hyperscan syntax) spans more characters than this;
        None when that is unbounded or not known."""
        bound = widest(expression)
        if bound is None:
            return None
        # Python's syntax is not hyperscan's everywhere ("a{,3}" is a repeat to Python,
        # five literal characters to hyperscan), nor are its widths in bytes (a
        # non-ASCII literal). Python's bound holds for hyperscan when hyperscan
        # compiles the expression, and refuses it compiled for matches longer than
        # the bound (its error's type is all that is read: that refusal is the only
        # difference between the two compiles).
        longer = (self._hs.HS_EXT_FLAG_MIN_LENGTH, 0, 0, bound + 1, 0, 0)
        try:
            self._compile([expression.encode()], [0], [0])
        except self._hs.error:
            return None
        try:
            self._compile([expression.encode()], [0], [0], [longer])
        except self._hs.error:
            return bound
        return None

    def _compile(
        self,
        expressions: list[bytes],
        ids: list[int],
        flags: list[int],
        ext: list[tuple[int, int, int, int, int, int]] | None = None,
    ) -> Any:
        if not expressions:
            return None
        database = self._hs.Database(mode=self._hs.HS_MODE_BLOCK)
        database.compile(expressions=expressions, ids=ids, elements=len(expressions), flags=flags, ext=ext)
        return database

    def _scratch(self, which: str, database: Any) -> Any:
        scratch = getattr(self._local, which, None)
        if scratch is None:
            scratch = self._hs.Scratch(database)
            setattr(self._local, which, scratch)
        return scratch

    def select_payload(self, data: bytes) -> tuple[Sequence[int], bool]:
        field_id = self._field_id
        # What matched: the field-name pattern's id first, then the ids that matched.
        found = [field_id]
        if self._payload_db is not None and data:
            scratch = getattr(self._local, "payload", None) or self._scratch("payload", self._payload_db)
            try:
                # Positional (data, handler, flags, context, scratch): keywords cost the
                # binding more than scanning a short payload does.
                self._payload_db.scan(data, _on_payload_match, 0, found, scratch)
            except self._hs.ScanTerminated:
                return self._all, True
        if not self._unfiltered:
            if len(found) == 1:
                return (), False  # a clean payload, the common case: settled here
            return sorted(set(found[1:]) - {field_id}), field_id in found[1:]
        unfiltered, _ = self._python.select_payload(data)
        out = sorted({*found[1:], *(i for i in self._unfiltered if i in unfiltered)} - {field_id})
        return out, field_id in found[1:]

    def locate(self, texts: Sequence[str], joined: str, among: Sequence[int]) -> Located:
        if self._locate_db is None or not joined:
            return self._python.locate(texts, joined, among)
        scanned = self._locate_matches(self._locate_db, joined)
        if scanned is None:
            return self._python.locate(texts, joined, among)
        ends, starts = scanned
        return self._located(texts, joined, among, ends, starts)

    def _locate_matches(self, db: Any, joined: str) -> tuple[list[list[int]], list[list[int]]] | None:
        """Per prefilter (the locating database's pattern ids): where its matches in
        ``joined`` end, and where they start for a prefilter compiled to say so. None
        when the scan ran past its budget."""
        # One byte per character, so hyperscan's offsets are string offsets: every
        # non-ASCII character becomes "?", which no prefilter's characters include.
        # A NUL follows the last text too, as it follows every other: hyperscan misses
        # some matches that end exactly where its data ends ("c0" after 15 characters
        # or more, for "c[0-9]+", and for "c[0-9]{1,5}" compiled without
        # SOM_LEFTMOST), and missed none with a character after them. A prefilter's
        # boundary may take that NUL, so a match may end one past the text.
        data = (joined.encode("ascii") if joined.isascii() else joined.encode("ascii", "replace")) + b"\x00"
        ends: list[list[int]] = [[] for _ in self._targets]
        starts = ends
        # A prefilter that matches everywhere (a long run of "1:" for the IPv6
        # one) would call back into Python per match; past this budget the scan
        # stops and the gate answers as the Python one would, with the same result.
        budget = itertools.count(-256 - len(data) // 8)
        if self._starts:
            starts = [[] for _ in self._targets]

            def on_match(pattern_id: int, start: int, end: int, flags: int, context: object) -> bool:
                ends[pattern_id].append(end)
                starts[pattern_id].append(start)
                return next(budget) > 0

        else:

            def on_match(pattern_id: int, start: int, end: int, flags: int, context: object) -> bool:
                ends[pattern_id].append(end)
                return next(budget) > 0

        try:
            db.scan(data, on_match, 0, None, self._scratch("locate", db))
        except self._hs.ScanTerminated:
            return None
        return ends, starts

    def _located(
        self,
        texts: Sequence[str],
        joined: str,
        among: Sequence[int],
        ends: list[list[int]],
        starts: list[list[int]],
    ) -> Located:
        """The windows of each detector in ``among``, from its prefilters' matches."""
        wanted = set(among)
        n = len(joined)
        longest = n if len(texts) == 1 else max(map(len, texts))
        minimum = self._min
        leads = self._leads
        out: Located = {}
        for pattern_id, matched in enumerate(ends):
            if not matched:
                continue
            i, j = self._targets[pattern_id]
            if i not in wanted or longest < minimum[i]:
                continue
            if j < 0:
                out[i] = None
                continue
            patterns = self._patterns[i]
            entry = out.get(i)
            windows: list[Sequence[Window] | None] = [()] * len(patterns) if entry is None else list(entry)
            reach = patterns[j].hints.reach
            lead = leads[pattern_id]
            if reach is None:
                windows[j] = None
            elif lead is None:
                windows[j] = around(list(zip(starts[pattern_id], matched, strict=True)), reach, n)
            else:
                windows[j] = before_ends(matched, lead, reach, n)
            out[i] = tuple(windows)
        if self._unfiltered:
            asked = self._python.locate(texts, joined, [i for i in self._unfiltered if i in wanted])
            out.update(asked)
        return out


def _on_payload_match(pattern_id: int, start: int, end: int, flags: int, found: list[int]) -> bool | None:
    found.append(pattern_id)
    # One detector that may find something means the payload is walked and its
    # strings located anyway, and that scan says which detectors to ask: the rest of
    # this one would only repeat it. found[0] is the field-name pattern's id.
    return True if pattern_id != found[0] else None


def hyperscan_available() -> bool:
    """True when the ``hyperscan`` package is installed on this machine."""
    return importlib.util.find_spec("hyperscan") is not None


def make_gate(
    engine: str, detectors: Sequence[Detector], field_words: Sequence[str], field_patterns: Sequence[str]
) -> Gate:
    """The gate for ``engine``: ``"auto"`` (hyperscan when installed), ``"hyperscan"`` or ``"python"``."""
    if engine == "python" or (engine == "auto" and not hyperscan_available()):
        return PythonGate(detectors, field_words)
    if not hyperscan_available():
        raise ConfigurationError(
            "MaskingConfig(engine='hyperscan') needs the hyperscan package, which is not installed; "
            "pip install hyperscan, or use engine='auto' to fall back to the pure-Python engine."
        )
    try:
        return HyperscanGate(detectors, field_words, field_patterns)
    except Exception as exc:  # hyperscan.error: the library refused to build a database
        culprit = _refused_prefilter(detectors)
        raise ConfigurationError(
            f"Hyperscan could not build the masking databases ({type(exc).__name__}: {exc})"
            + (f"; the prefilter of detector {culprit!r} is refused alone" if culprit else "")
            + ". Use MaskingConfig(engine='python'), which masks identically."
        ) from exc


def _refused_prefilter(detectors: Sequence[Detector]) -> str | None:
    """The name of the first detector whose prefilter hyperscan refuses on its own, if any."""
    hyperscan: Any = importlib.import_module("hyperscan")
    for detector in detectors:
        hints = hints_of(detector)
        patterns = detector.patterns if isinstance(detector, RegexDetector) else ()
        prefilters = [p.hints.prefilter for p in patterns] if patterns else [hints.prefilter]
        for prefilter in prefilters:
            if prefilter is None:
                continue
            try:
                database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
                database.compile(expressions=[prefilter.encode()], ids=[0], elements=1, flags=[0])
            except hyperscan.error:
                return detector.name
    return None

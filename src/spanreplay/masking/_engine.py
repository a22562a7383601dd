"""Gates: which detectors can find anything in a text, answered cheaply.

A gate never decides what is masked; it only says which detectors are worth
asking. Every gate answers with a superset of the detectors that would find
something, so the masked result is the same whichever gate runs, and a test
holds them to that. Two gates exist:

- ``PythonGate`` (always there): a detector is asked when the text is long enough
  and holds one of its ``literals`` (a ``str.__contains__`` test, memchr-fast).
- ``HyperscanGate`` (when the ``hyperscan`` package is installed): one pass of
  Intel Hyperscan over the text with every detector's ``prefilter`` compiled into
  one database, at hundreds of MB/s; a clean payload is then done without
  walking it at all.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from ._detectors import Detector

logger = logging.getLogger("spanreplay")

__all__ = ["Gate", "HyperscanGate", "PythonGate", "make_gate"]


class Gate(Protocol):
    """Answers which detectors (by index) may find something in a text."""

    name: str

    def select(self, text: str, among: Sequence[int]) -> list[int]:
        """The indices in ``among`` whose detector may find something in ``text``."""
        ...

    def select_payload(self, data: bytes) -> tuple[list[int], bool]:
        """For a whole serialized payload (JSON text): the detector indices, and
        False only when no object key in it can match a field-name rule."""
        ...


class PythonGate:
    """Literal tests only; always available."""

    name = "python"

    def __init__(self, detectors: Sequence[Detector], field_words: Sequence[str]) -> None:
        self._detectors = tuple(detectors)
        self._min = tuple(d.min_length for d in detectors)
        self._literals = tuple(d.literals for d in detectors)
        self._blob_literals = tuple(tuple(lit.encode() for lit in d.literals) for d in detectors)
        self._field_words = tuple(f'{w}":'.encode() for w in field_words)

    def select(self, text: str, among: Sequence[int]) -> list[int]:
        n = len(text)
        out = []
        for i in among:
            if n < self._min[i]:
                continue
            literals = self._literals[i]
            if not literals:
                out.append(i)
                continue
            for lit in literals:
                if lit in text:
                    out.append(i)
                    break
        return out

    def select_payload(self, data: bytes) -> tuple[list[int], bool]:
        out = []
        for i, literals in enumerate(self._blob_literals):
            if not literals or any(lit in data for lit in literals):
                out.append(i)
        return out, self._fields_possible(data)

    def _fields_possible(self, data: bytes) -> bool:
        if not self._field_words:
            return False
        lowered = data.lower()
        return any(word in lowered for word in self._field_words)


class HyperscanGate:
    """One Hyperscan pass over the text finds every detector whose prefilter occurs.

    Detectors without a prefilter fall back to their literals. The compiled
    database is shared; each thread scans with its own scratch space.
    """

    name = "hyperscan"

    def __init__(self, detectors: Sequence[Detector], field_patterns: Sequence[str]) -> None:
        import hyperscan

        self._hs = hyperscan
        self._python = PythonGate(detectors, ())
        self._detectors = tuple(detectors)
        self._min = tuple(d.min_length for d in detectors)
        self._always: list[int] = []
        expressions: list[bytes] = []
        ids: list[int] = []
        for i, detector in enumerate(detectors):
            if detector.prefilter is None:
                self._always.append(i)
            else:
                expressions.append(detector.prefilter.encode())
                ids.append(i)
        flags = [hyperscan.HS_FLAG_SINGLEMATCH] * len(expressions)
        self._field_id = len(detectors)
        if field_patterns:
            # An object key in orjson's output is a string followed directly by ":".
            expressions.append(("(?:" + "|".join(field_patterns) + ')":').encode())
            ids.append(self._field_id)
            flags.append(hyperscan.HS_FLAG_SINGLEMATCH | hyperscan.HS_FLAG_CASELESS)
        self._database: Any = None
        if expressions:
            database = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
            # SINGLEMATCH: one report per pattern and scan is all a gate needs, and it
            # keeps a 40 KB run of digits from calling back into Python per position.
            database.compile(
                expressions=expressions,
                ids=ids,
                elements=len(expressions),
                flags=flags,
            )
            self._database = database
        self._local = threading.local()

    def _scan(self, data: bytes) -> set[int]:
        found: set[int] = set()
        if self._database is None or not data:
            return found
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = self._hs.Scratch(self._database)

        def on_match(pattern_id: int, start: int, end: int, flags: int, context: object) -> None:
            found.add(pattern_id)

        self._database.scan(data, match_event_handler=on_match, scratch=scratch)
        return found

    def select(self, text: str, among: Sequence[int]) -> list[int]:
        found = self._scan(text.encode("utf-8", "surrogatepass"))
        n = len(text)
        out = [i for i in among if i in found and n >= self._min[i]]
        if self._always:
            out.extend(self._python.select(text, [i for i in self._always if i in among]))
            out.sort()
        return out

    def select_payload(self, data: bytes) -> tuple[list[int], bool]:
        found = self._scan(data)
        out = [i for i in range(len(self._detectors)) if i in found]
        if self._always:
            blob, _ = self._python.select_payload(data)
            out.extend(i for i in self._always if i in blob)
            out.sort()
        return out, self._field_id in found


def hyperscan_available() -> bool:
    try:
        import hyperscan  # noqa: F401
    except ImportError:
        return False
    return True


def make_gate(
    engine: str, detectors: Sequence[Detector], field_words: Sequence[str], field_patterns: Sequence[str]
) -> Gate:
    """The gate for ``engine``: ``"auto"`` (hyperscan when installed), ``"hyperscan"`` or ``"python"``."""
    if engine == "python" or (engine == "auto" and not hyperscan_available()):
        return PythonGate(detectors, field_words)
    return HyperscanGate(detectors, field_patterns)

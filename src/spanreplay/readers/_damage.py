"""Damaged lines and unreadable files: what a reader skipped, and which runs it may have cost.

A trace directory is read by many runs' loads and listings; one damaged line (a
write cut short by a full disk, then the next line appended after the half one;
garbage bytes) must cost one warning and its own run, never the folder. So a
reader skips the damaged line, warns once naming file:line, and hands a
``Damage`` to the caller's hook (when it gave one), which decides: a listing
marks the runs the line names, a load refuses its run when the line names it.

Which run a damaged line held is told from the run-id attribute, when the part
of the line that survived still holds it whole. When it does not, the run is
found by the hole the lost span leaves in its seq numbering, where the loader
names the damaged lines as where the span may have gone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from spanreplay.semconv import RUN_ID

# The run-id attribute as OTLP/JSON writes it; whitespace allowed where a
# pretty-printer would put it. The id must be closed by its quote: a cut id names
# no run (a prefix of one id could be another run's id).
_RUN_ID_ATTRIBUTE: Final = re.compile(
    rb'"key"\s*:\s*"'
    + re.escape(RUN_ID.encode())
    + rb'"\s*,\s*"value"\s*:\s*\{\s*"stringValue"\s*:\s*"([A-Za-z0-9_.:+\-]{1,200})"'
)
# Runs named by one damaged line: a Collector batch holds many spans, but a bound
# keeps a crafted line from making a list of millions.
_MOST_RUNS: Final = 100


@dataclass(frozen=True, slots=True)
class Damage:
    """A line (or a whole file, ``line`` None) a reader skipped.

    Attributes:
        source: the file, as shown in messages.
        line: its 1-based line number; None when the whole file was skipped or
            the line could not be numbered.
        reason: what is wrong, a clause ("not valid JSON (... at column 43)").
        runs: the run ids the damaged bytes name, in the order found.
        offset: the byte offset of the line, when its number is not known.
    """

    source: str
    line: int | None
    reason: str
    runs: tuple[str, ...] = ()
    offset: int | None = None

    @property
    def where(self) -> str:
        if self.line is not None:
            return f"{self.source}:{self.line}"
        if self.offset is not None:
            return f"{self.source} at byte {self.offset}"
        return self.source

    @property
    def whole_file(self) -> bool:
        return self.line is None and self.offset is None

    def described(self) -> str:
        """``file:line: reason``, for a sentence that names it."""
        return f"{self.where}: {self.reason}"


# Called with each damaged line or unreadable file a read skipped.
DamageHook = Callable[[Damage], object]


def runs_named(data: bytes) -> tuple[str, ...]:
    """The run ids the run-id attributes in ``data`` name whole, each once, in order."""
    found: dict[str, None] = {}
    for match in _RUN_ID_ATTRIBUTE.finditer(data):
        found[match.group(1).decode()] = None
        if len(found) >= _MOST_RUNS:
            break
    return tuple(found)


def listed_damage(damage: list[Damage], most: int = 3) -> str:
    """The damaged places, the first ``most`` named and the rest counted."""
    shown = ", ".join(d.described() for d in damage[:most])
    rest = len(damage) - most
    return shown + (f" and {rest} more" if rest > 0 else "")

"""Which runs ``spanreplay check`` replays: ``--agent``, ``--since``, ``--status``.

Top-level runs only. A sub-agent's run (``RunSummary.parent`` set) is replayed
inside its parent's replay, with its own divergence checks, where the parent
opened it; replayed on its own against ``--entry`` (the top-level agent's code)
it could only diverge. Those runs are left out and counted, apart from the ones
whose parent the source does not hold, which no replay of this source checks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from spanreplay import semconv as sc
from spanreplay.model.events import RunSummary

from ._common import BadInput

__all__ = ["STATUSES", "Selection", "parse_since", "select_runs"]

# --status: which recorded outcomes to replay. A run still being recorded is never replayed.
STATUSES: Final = {
    "ok": frozenset({sc.RUN_STATUS_OK}),
    "failed": frozenset({sc.RUN_STATUS_ERROR, sc.RUN_STATUS_CRASHED}),
    "all": frozenset({sc.RUN_STATUS_OK, sc.RUN_STATUS_ERROR, sc.RUN_STATUS_CRASHED}),
}

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_AGE = re.compile(r"(\d+)\s*([smhdw])")
_UNITS: Final = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime) -> datetime:
    """The start of the window ``--since`` names: an age back from ``now`` (``7d``, ``12h``,
    ``30m``, ``2w``, ``90s``) or a date or time (``2026-11-24``, ``2026-11-24T08:00``, UTC
    unless it names its zone)."""
    match = _AGE.fullmatch(text.strip())
    if match:
        return now - timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            f"--since {text!r} is neither an age nor a date; write an age back from now such as 7d, 12h, "
            "30m, 2w or 90s, or a date such as 2026-11-24 (UTC unless it names its zone)."
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Selection:
    """The runs to replay, and how many each filter left out (said in the summary)."""

    runs: list[RunSummary]
    other_agent: int = 0
    too_old: int = 0
    other_status: int = 0
    running: int = 0
    sub_agent: int = 0
    orphan: int = 0

    def left_out(self) -> str:
        """``3 left out: 2 of another agent, 1 still running``, or ``""``."""
        parts = [
            f"{count} {what}"
            for count, what in (
                (self.sub_agent, "sub-agent run(s) (replayed in their parent's)"),
                (self.orphan, "sub-agent run(s) whose parent the source lacks"),
                (self.other_agent, "of another agent"),
                (self.too_old, "started before --since"),
                (self.other_status, "of another --status"),
                (self.running, "still running"),
            )
            if count
        ]
        total = self.sub_agent + self.orphan + self.other_agent + self.too_old + self.other_status + self.running
        return f"{total} left out: {', '.join(parts)}" if parts else ""


def select_runs(
    found: Sequence[RunSummary], *, agents: Sequence[str] = (), since: datetime | None = None, status: str = "all"
) -> Selection:
    """The top-level runs of ``found`` that pass every filter, in the order given (oldest first)."""
    wanted = STATUSES[status]
    # Exact integer nanoseconds: a float timestamp rounds at this size.
    cutoff_ns = (since - _EPOCH) // timedelta(microseconds=1) * 1000 if since is not None else None
    kept: list[RunSummary] = []
    other_agent = too_old = other_status = running = sub_agent = orphan = 0
    listed = {run.run_id for run in found}
    for run in found:
        if run.parent is not None:
            if run.parent in listed:
                sub_agent += 1
            else:
                orphan += 1
        elif agents and run.agent not in agents:
            other_agent += 1
        elif cutoff_ns is not None and (not run.start_ns or run.start_ns < cutoff_ns):
            too_old += 1
        elif run.status == sc.RUN_STATUS_RUNNING:
            running += 1
        elif run.status not in wanted:
            other_status += 1
        else:
            kept.append(run)
    return Selection(kept, other_agent, too_old, other_status, running, sub_agent, orphan)

"""Sub-agents on replay: the parent's replay serves each child run's steps in place.

A recording that opened a sub-agent's run holds a step of kind ``agent`` at that
point (``spanreplay.recording.child_runs``), whose output names the child run. When
the code under replay opens the same sub-agent there (``record(agent=...)`` or
``@agent``), that step is served like any other (so a sub-agent opened elsewhere, or
not at all, diverges), the child's recording is loaded from the source the parent
came from, and a replay of the child serves the sub-agent's steps, with its own
divergence checks. A child the source does not hold fails closed.
"""

from __future__ import annotations

import os
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

from spanreplay import semconv as sc
from spanreplay.errors import ReplayDivergenceError, RunNotFoundError, SpanReplayError
from spanreplay.model.events import EventLog
from spanreplay.model.run_ids import checked_run_id, path_inside
from spanreplay.run.base import BoundaryCall, Mode, Run, current_scope_var
from spanreplay.sources import open_source

from .replaying_run import ReplayingRun

__all__ = ["ChildReplay", "recorded_child", "remember_source"]

SourceName = str | os.PathLike[str]

# The source each replay was loaded from: its children are looked for there.
_sources: weakref.WeakKeyDictionary[Run, SourceName] = weakref.WeakKeyDictionary()
# Per replay: the (scope call id, agent) pairs at which the recording opened a child run.
_openings: weakref.WeakKeyDictionary[Run, frozenset[tuple[str, str]]] = weakref.WeakKeyDictionary()


def remember_source(run: Run, source: SourceName) -> None:
    """Note where ``run``'s recording was read from, so that its child runs are read from there too."""
    _sources[run] = source


def recorded_child(run: Run, agent: str) -> bool:
    """Whether the recording ``run`` replays opened a child run of ``agent`` in the calling scope."""
    log = run.replayed_log
    if log is None:
        return False
    openings = _openings.get(run)
    if openings is None:
        openings = _openings[run] = frozenset(
            (event.parent_call_id, event.key) for event in log.events if event.kind == sc.KIND_AGENT
        )
    if not openings:
        return False
    scope = current_scope_var.get()
    scope_id = scope.call_id if scope is not None and scope.run is run else ""
    return (scope_id, agent) in openings


class ChildReplay(Run):
    """``record(agent=...)`` where the replayed recording opened a sub-agent's run.

    Entering serves the parent's step that opened the child, loads the child's recording
    and enters a replay of it; the block gets that replay. A divergence inside the child
    ends the parent's replay too, even when the parent's code catches it.
    """

    mode = Mode.REPLAY

    def __init__(self, parent: ReplayingRun, agent: str) -> None:
        super().__init__(parent.run_id, agent)
        self.parent = parent
        self._children: list[ReplayingRun] = []

    def __enter__(self) -> ReplayingRun:
        parent = self.parent
        try:
            served = parent.call(
                BoundaryCall(kind=sc.KIND_AGENT, key=self.agent, input={"agent": self.agent}, function=_never)
            )
            log = _child_log(parent, _child_run_id(parent, served))
            child = ReplayingRun(
                log,
                ignore_paths=parent.engine.ignore_paths,
                require_all_steps=parent.require_all_steps,
                live=parent.live,
            )
        except SpanReplayError as error:
            parent.refuse(error)  # the replay ends with it even if the code catches it
            raise
        source = _sources.get(parent)
        if source is not None:
            _sources[child] = source
        self._children.append(child)
        return child.__enter__()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        child = self._children.pop()
        try:
            child.__exit__(exc_type, exc, tb)
        except ReplayDivergenceError as error:
            self.parent.refuse(error)
            raise
        if isinstance(exc, ReplayDivergenceError):
            self.parent.refuse(exc)


def _never() -> Any:
    raise AssertionError("a replay never opens a sub-agent's run for real")  # pragma: no cover


def _child_run_id(parent: ReplayingRun, served: Any) -> str:
    run_id = served.get("run_id") if isinstance(served, dict) else None
    if not isinstance(run_id, str) or not run_id:
        raise RunNotFoundError(
            f"Run {parent.run_id} recorded a sub-agent step that names no child run ({served!r}); "
            "the trace was edited or not written by spanreplay.",
            run_id=None,
        )
    # A run id read from the trace: it names a file beside the parent's, so it must be one.
    return checked_run_id(run_id, where=f"the sub-agent step of run {parent.run_id}")


def _child_log(parent: ReplayingRun, child_id: str) -> EventLog:
    """The recording of child run ``child_id``: from the parent's source, else beside the parent's file."""
    source = _sources.get(parent)
    looked: list[str] = []
    if source is not None:
        try:
            return open_source(source).load(child_id)
        except RunNotFoundError:
            looked.append(os.fspath(source))
    origin = parent.events.run.origin
    if origin:
        beside = path_inside(Path(origin.rpartition(":")[0] or origin).parent, f"{child_id}.jsonl")
        if beside.is_file():
            return open_source(beside).load(child_id)
        looked.append(str(beside))
    where = " or ".join(looked) if looked else "no source (the replay was given an EventLog)"
    raise RunNotFoundError(
        f"Run {parent.run_id} opened sub-agent run {child_id} here, but {where} does not hold run "
        f"{child_id}; replay the parent from a source that holds its sub-agents' runs too (the trace "
        "directory they were recorded in).",
        run_id=child_id,
    )

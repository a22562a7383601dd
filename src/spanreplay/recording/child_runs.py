"""Sub-agents on record: ``record(agent=...)`` inside an open recording opens a child run.

The child is a run of its own (its own run id, its own trace file and steps), with
``spanreplay.run.parent`` naming the run that opened it. Its run span starts in the
calling context, so it is a child of the parent's current span (its run span, or the
boundary the sub-agent was called from) in the same trace.

Before the child starts, the parent records one step of kind ``agent`` (key: the
sub-agent's name, output: ``{"run_id": child}``). That step keeps the parent's
sequence of steps the same on replay, and tells the parent's replay which recorded
child to serve at that point (``spanreplay.replaying.child_runs``).
"""

from __future__ import annotations

from typing import Any

from spanreplay import semconv as sc
from spanreplay.run.base import BoundaryCall, Run

from .recording_run import RecordingRun

__all__ = ["ChildRecordingRun", "opened_child_call"]


def opened_child_call(agent: str, run_id: str) -> BoundaryCall:
    """The parent's step that opens sub-agent run ``run_id`` of agent ``agent``."""

    def opened() -> dict[str, Any]:
        return {"run_id": run_id}

    return BoundaryCall(kind=sc.KIND_AGENT, key=agent, input={"agent": agent}, function=opened)


class ChildRecordingRun(RecordingRun):
    """A sub-agent's recording, opened inside the recording ``parent``."""

    def __init__(self, parent: Run, agent: str, run_id: str | None = None) -> None:
        super().__init__(agent, run_id, parent=parent.run_id)
        self.parent_run = parent

    def __enter__(self) -> RecordingRun:
        # In the caller's context, before this run binds it: the step lands in the
        # parent's current scope (a branch, when the sub-agent runs in a task or thread).
        self.parent_run.call(opened_child_call(self.agent, self.run_id))
        return super().__enter__()

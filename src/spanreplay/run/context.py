"""The context variables that say which run and which boundary the code is in.

Kept apart from _run so span processors can read the current run id without
importing the run machinery.
"""

from __future__ import annotations

from contextvars import ContextVar

# The run id of the run the current code executes in (record mode), or None.
current_run_id: ContextVar[str | None] = ContextVar("spanreplay_run_id", default=None)

"""Boundaries made at the same time from one scope: a recording whose call ids depend on timing.

Tasks and threads spanreplay sees start (see ``spanreplay.run.branches``) get branch
scopes of their own, so concurrent siblings keep their call ids whatever the
scheduler does. Work that runs in a context spanreplay did not see copied (a thread
pool of another library that hands each job a context it copied earlier, a loop
that is no ``BaseEventLoop``) shares its starter's scope: two such jobs take their
ordinals in the order they get there, which a replay may not repeat.

The recording tells when it happens, not the replay: a sync boundary marks its
scope busy while it runs (``Scope.busy``, one attribute read and two writes per
call), and a second boundary made from a busy scope came from another thread. The
run then warns once, naming both call ids, and writes them on its span
(``spanreplay.run.concurrent_siblings``), where replay and ``spanreplay check``
find why it may diverge.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
import weakref
from typing import Any

from spanreplay import semconv as sc
from spanreplay.readers._base import SpanReplayWarning
from spanreplay.run.base import Run, Scope

__all__ = ["FIX", "concurrent_siblings"]

FIX = (
    "Start the work as tasks or threads spanreplay sees start inside the run (asyncio tasks, "
    "threading.Thread, ThreadPoolExecutor.submit), or with an executor that copies the context "
    "when the work is submitted (contextvars.copy_context().run)"
)

_warned: weakref.WeakSet[Run] = weakref.WeakSet()
_lock = threading.Lock()


def concurrent_siblings(run: Run, span: Any, first: Scope, second: Scope) -> None:
    """``second`` was made from the scope ``first`` is still running in: warn once per run, mark its span."""
    with _lock:
        if run in _warned:
            return
        _warned.add(run)
    ids = [first.call_id, second.call_id]
    if span is not None:
        with contextlib.suppress(Exception):  # recording fails open: the warning still says it
            span.set_attribute(sc.RUN_CONCURRENT_SIBLINGS, ids)
    warnings.warn(
        f"spanreplay: run {run.run_id} made {ids[0]} and {ids[1]} at the same time from one scope, with no "
        "branch between them (the threads or tasks that made them started where spanreplay did not see "
        "it), so their call ids depend on timing and a replay may diverge there. "
        f"{FIX}.",
        SpanReplayWarning,
        stacklevel=4,
    )

"""Runs, modes, call ids and ``boundary()``: the one choke point of an agent.

In record mode a boundary runs the real work and emits a span that carries its
input and its output or error. In replay mode it serves the recorded result by
call id and never runs the real work. Outside any run it just runs the work.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from spanreplay.model.events import EventLog
from spanreplay.model.run_ids import new_run_id
from spanreplay.recording.child_runs import ChildRecordingRun
from spanreplay.recording.recording_run import RecordingRun
from spanreplay.replaying.breakpoints import BreakAt
from spanreplay.replaying.child_runs import ChildReplay, recorded_child, remember_source
from spanreplay.replaying.effects import effect_attributes
from spanreplay.replaying.forking_run import ForkingRun, fork
from spanreplay.replaying.guard import DirectCallGuard
from spanreplay.replaying.replaying_run import JoinedReplay, ReplayingRun
from spanreplay.run.base import (
    Decoder,
    Mode,
    Outcome,
    Run,
    current_run,
    current_run_var,
    joinable_run,
    run_for_boundary,
    set_process_run_factory,
)
from spanreplay.run.calls import Call

logger = logging.getLogger("spanreplay")

T = TypeVar("T")

__all__ = [
    "Call",
    "ForkingRun",
    "Mode",
    "Outcome",
    "RecordingRun",
    "ReplayingRun",
    "Run",
    "boundary",
    "current_run",
    "fork",
    "new_run_id",
    "record",
    "recording",
    "replay",
    "run_for_boundary",
    "set_process_run_factory",
]


def record(agent: str = "agent", run_id: str | None = None) -> Run:
    """Start recording a run: ``with spanreplay.record(agent="support") as run: ...``.

    Inside an open recording, it opens a sub-agent's run: a child run of its own (its
    own run id, ``spanreplay.run.parent`` naming the open run), whose run span is a
    child of the open run's current span in the same trace; the open run records the
    step that opened it. Inside an open replay (or fork), the run joins it instead (the
    block gets the replaying run), so the same code serves both modes; where the
    replayed recording opened a sub-agent's run, the block gets a replay of that child
    run, read from the same source.

    Args:
        agent: the agent's name, shown in ``spanreplay runs`` and on the root span
            (``invoke_agent {agent}``).
        run_id: the run id; by default ``run_YYYYMMDD_HHMMSS_xxxxxxxx`` (UTC).
    """
    open_run = joinable_run()
    if open_run is not None and open_run.serves_recorded:
        if isinstance(open_run, ReplayingRun) and recorded_child(open_run, agent):
            return ChildReplay(open_run, agent)
        return JoinedReplay(open_run)
    inside = current_run_var.get()
    if inside is not None and inside.records:
        return ChildRecordingRun(inside, agent, run_id)
    return recording(agent, run_id)


def recording(agent: str = "agent", run_id: str | None = None) -> Run:
    """A new recording, never joined to an open replay: what zero-code mode opens for the process."""
    return RecordingRun(agent, run_id)


def replay(  # noqa: PLR0913  public keyword options since 0.x; grouping them would break every caller of replay()
    source: str | os.PathLike[str] | EventLog,
    run_id: str | None = None,
    *,
    ignore_paths: Sequence[str] = (),
    require_all_steps: bool = True,
    strict: bool | None = None,
    break_at: BreakAt = None,
    guard: bool = False,
    overrides: Mapping[int | str, Any] | None = None,
    live: bool = True,
) -> ReplayingRun:
    """Replay a recorded run: ``with spanreplay.replay("traces/", run_id) as run: ...``.

    Args:
        source: a trace file, directory, glob, ``-`` for stdin, or an EventLog.
        run_id: the run to replay; may be left out when the source holds one run. A
            sub-agent's run id replays the sub-agent alone, from its own steps; a parent's
            replay serves its sub-agents' runs from the same source where it opened them.
        ignore_paths: JSON paths (``"messages[*].timestamp"``) left out of the
            input comparison.
        require_all_steps: raise LeftoverEventsError when the code ends before the
            recording does (steps recorded that the replay never asked for).
        strict: the former name of ``require_all_steps`` (deprecated).
        break_at: stop in the debugger (``sys.breakpointhook()``) just before the step
            at this seq hands its recorded value to the code; a list of seqs; or
            ``"divergence"`` to stop where the code first stops matching. The frame
            holds ``step`` (the recorded Event), at a divergence also ``recorded``
            and ``attempted``. See docs/debugging.md.
        guard: warn (``DeterminismWarning``, once per file and line) when code in the
            run reads the clock or the random module directly instead of through
            spanreplay; see docs/testing.md, "Runtime guard".
        overrides: what-if edits: ``{seq or call id: value}``. A value is served in place of
            the step's recorded output, an exception instance is raised in its place; a model
            call's value is the response as the Messages API returns it (a dict or an SDK
            ``Message``). A call id the recording does not have names a call the edited run
            makes; it is served without an input to compare. Values are served as given,
            not masked. Once the code no longer matches the recording, the replay diverges;
            the run may end differently from the recording once an override was served.
        live: for a trace another instrumentation recorded (run id: its trace id),
            run the tools it holds no result of for real; False refuses them
            instead (docs/foreign.md). Runs spanreplay recorded never run work.
    """
    if strict is not None:
        warnings.warn(
            "replay(strict=) is now replay(require_all_steps=); strict= goes in a later release.",
            DeprecationWarning,
            stacklevel=2,
        )
        require_all_steps = strict
    if isinstance(source, EventLog):
        log = source
    else:
        from .loading import load

        log = load(source, run_id)
    run = ReplayingRun(
        log,
        ignore_paths=ignore_paths,
        require_all_steps=require_all_steps,
        break_at=break_at,
        overrides=overrides,
        live=live,
    )
    if not isinstance(source, EventLog):
        remember_source(run, source)  # its sub-agents' runs are read from there too
    if guard:
        run.guard = DirectCallGuard(run.run_id)
    return run


def boundary(
    kind: str,
    key: str,
    input: Any,
    fn: Callable[[], T],
    *,
    decode: Decoder | None = None,
    attributes: dict[str, Any] | None = None,
    effect: bool = False,
) -> T:
    """The single choke point for every nondeterministic call of an agent.

    Args:
        kind: what kind of boundary (``"tool"``, ``"model"``, ``"clock"``, ...).
        key: which one of that kind (a tool name, a model name).
        input: the call's input, JSON-serializable (compared on replay).
        fn: the real work, a no-argument callable, sync or async. In record mode
            it runs and its result is recorded; in replay mode it never runs.
        decode: turns the recorded JSON back into the object the caller expects
            (replay only).
        attributes: extra span attributes (token counts, GenAI names).
        effect: the work changes the world (a payment, an email): its intent (run,
            seq, call id, masked input) is written to the trace file, and committed
            to Postgres, before ``fn`` runs, and its outcome after; see docs/debugging.md.

    Returns:
        ``fn()``'s result (an awaitable when ``fn`` is async). Outside any run,
        ``fn()`` itself.
    """
    run = run_for_boundary(f"{kind} {key!r}")
    if run is None:
        return fn()
    if effect:
        attributes = effect_attributes(attributes)
    return run.boundary(kind, key, input, fn, decode=decode, attributes=attributes)

"""One run of ``spanreplay check``: replay it against the entry point and say how it ended.

``spanreplay check`` replays each run in a fresh process (see ``_check_processes``):
the entry point's module state (caches, counters, clients opened at import)
never carries over from one replayed run to the next, and a run that hangs or
kills its process takes only its own replay with it. The process is forked from
a server that imported this module (``run_forked``) or, where there is no
fork, started as ``python -m spanreplay.cli._check_run VERDICT_FILE SPEC``
(``main``). The verdict is written as JSON to VERDICT_FILE; the replayed code's
own output goes to its stdout and stderr.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
import orjson

from spanreplay import semconv as sc
from spanreplay.api.runs import replay
from spanreplay.errors import ReplayDivergenceError, SpanReplayError
from spanreplay.model.events import EventLog
from spanreplay.replaying.replaying_run import ReplayingRun

from ._replay import call_entry, cwd_on_path, failing_step, load_entry, never_asked, script_errors

__all__ = ["COMPLETED", "DIVERGED", "ERROR", "REPRODUCED", "Verdict", "judge", "main", "replay_one"]

COMPLETED = "completed"  # an ok run completed again, every step matched
REPRODUCED = "reproduced"  # a failed run failed again with the recorded error at the recorded step
DIVERGED = "diverged"  # anything else: the code no longer does what the run recorded
ERROR = "error"  # the run could not be judged: an unreadable run, an entry that does not import


@dataclass(frozen=True)
class Verdict:
    """How the replay of one run ended.

    Attributes:
        run_id: the run replayed.
        outcome: ``completed``, ``reproduced``, ``diverged`` or ``error``.
        seq: the step it happened at: where it diverged, or where the recorded
            failure was reproduced; None when it was not at a step (the run ended
            otherwise than recorded, or could not be judged).
        reason: the whole message (a divergence report, the reproduced error).
        error_type: the class of the error the reason comes from, when there is one.
        seconds: how long the replay took, loading the run included.
    """

    run_id: str
    outcome: str
    seq: int | None = None
    reason: str = ""
    error_type: str = ""
    seconds: float = 0.0

    def headline(self) -> str:
        """``diverged at seq 3: <first line of the reason>``."""
        where = f" at seq {self.seq}" if self.seq is not None else ""
        if self.outcome == DIVERGED and self.seq is None:
            where = " at the end of the run"
        first = self.reason.strip().split("\n", 1)[0] if self.reason.strip() else ""
        return f"{self.outcome}{where}" + (f": {first}" if first else "")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def replay_one(source: str, run_id: str, entry: str, ignore_paths: Sequence[str] = ()) -> Verdict:
    """Replay ``run_id`` from ``source`` against ``entry`` (``module:function``) in this process."""
    started = time.perf_counter()
    try:
        with cwd_on_path():
            function = load_entry(entry)
            # live=False: a gate never runs a tool, even one a foreign trace holds no result of.
            replaying = replay(source, run_id, ignore_paths=ignore_paths, live=False)
            script_errors.register()
            script_errors.module = sys.modules.get(entry.partition(":")[0])
            try:
                verdict = judge(replaying, function)
            finally:
                script_errors.module = None
    except click.ClickException as exc:  # an --entry that cannot be used
        verdict = Verdict(run_id, ERROR, reason=exc.format_message(), error_type="BadInput")
    except SpanReplayError as exc:  # the run cannot be loaded, or replayed with the masking at hand
        verdict = Verdict(run_id, ERROR, reason=str(exc), error_type=type(exc).__qualname__)
    return Verdict(
        verdict.run_id,
        verdict.outcome,
        verdict.seq,
        verdict.reason,
        verdict.error_type,
        seconds=time.perf_counter() - started,
    )


def judge(replaying: ReplayingRun, function: Callable[[], Any]) -> Verdict:
    """Call ``function`` under ``replaying`` and judge the outcome the way a deploy gate must.

    Stricter than ``spanreplay replay`` in one place: a recorded error raised again
    counts as reproduced only when the replay also asked for every recorded step;
    reaching it another way is a divergence at the first step never asked for.
    """
    log = replaying.events
    run_id = log.run_id
    try:
        with replaying:
            call_entry(function)
    except ReplayDivergenceError as exc:
        if replaying.outcome == REPRODUCED:  # the code reached the point where the recorded process died
            return Verdict(
                run_id,
                REPRODUCED,
                _last_seq(log) or None,
                f"the code reached seq {_last_seq(log)}, where the recorded process died (run {log.run.status})",
            )
        told = "\n".join([str(exc), *getattr(exc, "__notes__", ())])
        return Verdict(run_id, DIVERGED, exc.seq, told, type(exc).__qualname__)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        what = f"{type(exc).__qualname__}: {exc}"
        if replaying.outcome != REPRODUCED:
            return Verdict(run_id, DIVERGED, None, f"the replay ended with {what}", type(exc).__qualname__)
        step = failing_step(log)
        never = never_asked(replaying)
        if never:
            first = never[0]
            return Verdict(
                run_id,
                DIVERGED,
                first.seq,
                f"the recorded error {what} was raised again, but the replay never asked for {len(never)} of "
                f"the {len(log)} recorded steps, the first at seq {first.seq} ({first.kind} {first.key!r}): "
                "it reached the error another way",
                type(exc).__qualname__,
            )
        return Verdict(run_id, REPRODUCED, step.seq if step is not None else None, what, type(exc).__qualname__)
    if log.run.status == sc.RUN_STATUS_CRASHED:
        return Verdict(
            run_id,
            DIVERGED,
            None,
            f"the recorded process died after seq {_last_seq(log)}, but the replay completed: the crash came "
            "from outside the boundaries (a kill, running out of memory) or the code changed since",
        )
    return Verdict(run_id, COMPLETED, None, f"all {len(log)} recorded steps served")


def _last_seq(log: EventLog) -> int:
    return log.events[-1].seq if len(log) else 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m spanreplay.cli._check_run VERDICT_FILE SPEC``: SPEC is the JSON of replay_one's arguments."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m spanreplay.cli._check_run VERDICT_FILE SPEC_JSON", file=sys.stderr)
        return 2
    spec = orjson.loads(args[1])
    verdict = replay_one(spec["source"], spec["run_id"], spec["entry"], spec.get("ignore_paths", ()))
    Path(args[0]).write_bytes(orjson.dumps(verdict.to_dict()))
    return 0


def run_forked(verdict_file: str, spec: str, cwd: str, env: dict[str, str], stdout: str, stderr: str) -> None:
    """``main`` in a process forked from the server: first made to look like a new one of the caller's.

    The server was started once, from wherever the caller was then: the run gets the
    caller's current directory and environment, and its output goes to the files given.
    """
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.dont_write_bytecode = bool(env.get("PYTHONDONTWRITEBYTECODE"))
    for fd, path in ((1, stdout), (2, stderr)):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    try:
        main([verdict_file, spec])
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())

"""A fresh process per replayed run, for ``spanreplay check``.

Isolation is the point: an entry point's module state must not leak from one
replayed run into the next. A new interpreter per run gives that, but spends
most of its time importing spanreplay (and OpenTelemetry, orjson, rich) again.
Where the platform can fork, a multiprocessing forkserver imports spanreplay
once, and each run gets a process forked from it: fresh, since the server never
imports the entry point nor opens a run, and much cheaper to start. Elsewhere
(Windows) each run starts ``python -m spanreplay.cli._check_run``.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import orjson

import spanreplay

from ._check_run import DIVERGED, Verdict, run_forked

__all__ = ["Replayed", "replay_in_fresh_process"]

# Lines of the replayed code's output kept per run (the last ones, where a failure shows).
_OUTPUT_LINES: Final = 200
# What the server imports once for every run it forks.
_PRELOAD: Final = ["spanreplay.cli._check_server"]

# Whether runs are forked from a server (True) or started as new interpreters; tests switch it.
use_forkserver = "forkserver" in multiprocessing.get_all_start_methods()


@dataclass(frozen=True)
class Replayed:
    """A verdict, with what the replayed code printed and the wall time its process took."""

    verdict: Verdict
    stdout: str
    stderr: str
    seconds: float


def replay_in_fresh_process(
    source: str,
    run_id: str,
    entry: str,
    ignore_paths: Sequence[str],
    timeout: float | None,
    scratch: Path,
) -> Replayed:
    """Replay one run in a process of its own; ``scratch`` is a directory for this run's files."""
    spec = orjson.dumps({"source": source, "run_id": run_id, "entry": entry, "ignore_paths": list(ignore_paths)})
    verdict_file = scratch / "verdict.json"
    started = time.perf_counter()
    if use_forkserver:
        exit_code, stdout, stderr = _forked(spec.decode(), verdict_file, scratch, timeout)
    else:
        exit_code, stdout, stderr = _spawned(spec.decode(), verdict_file, timeout)
    seconds = time.perf_counter() - started
    if exit_code is None:
        reason = f"the replay did not finish within --timeout {timeout:g} s; its process was killed"
        return Replayed(
            Verdict(run_id, DIVERGED, reason=reason, error_type="Timeout", seconds=seconds), stdout, stderr, seconds
        )
    try:
        verdict = Verdict(**orjson.loads(verdict_file.read_bytes()))
    except (OSError, orjson.JSONDecodeError, TypeError):
        last = next((line for line in reversed(stderr.splitlines()) if line.strip()), "")
        how = f"was killed by signal {-exit_code}" if exit_code < 0 else f"ended with exit code {exit_code}"
        verdict = Verdict(
            run_id,
            DIVERGED,
            reason=f"the replay's process {how} before it gave a verdict"
            + (f"; the last line it wrote to stderr: {last}" if last else "; it wrote nothing to stderr"),
            error_type="ProcessExit",
            seconds=seconds,
        )
    return Replayed(verdict, stdout, stderr, seconds)


def _forked(spec: str, verdict_file: Path, scratch: Path, timeout: float | None) -> tuple[int | None, str, str]:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(_PRELOAD)
    out, err = scratch / "stdout", scratch / "stderr"
    process = context.Process(
        target=run_forked,
        args=(str(verdict_file), spec, os.getcwd(), dict(os.environ), str(out), str(err)),
        name="spanreplay-check",
        daemon=True,
    )
    process.start()
    process.join(timeout)
    if process.is_alive():
        process.kill()
        process.join()
        exit_code = None
    else:
        exit_code = process.exitcode if process.exitcode is not None else -1
    process.close()
    return exit_code, _read(out), _read(err)


def _spawned(spec: str, verdict_file: Path, timeout: float | None) -> tuple[int | None, str, str]:
    try:
        done = subprocess.run(
            [sys.executable, "-m", "spanreplay.cli._check_run", str(verdict_file), spec],
            capture_output=True,
            env=_child_environment(),
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        return None, _text(exc.stdout), _text(exc.stderr)
    return done.returncode, _text(done.stdout), _text(done.stderr)


def _child_environment() -> dict[str, str]:
    """This process's environment, with the spanreplay it runs first on the child's path."""
    env = dict(os.environ)
    here = str(Path(spanreplay.__file__).resolve().parent.parent)
    path = env.get("PYTHONPATH", "")
    env["PYTHONPATH"] = here + (os.pathsep + path if path else "")
    return env


def _read(path: Path) -> str:
    try:
        return _text(path.read_bytes())
    except OSError:
        return ""


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    lines = text.splitlines(keepends=True)
    if len(lines) > _OUTPUT_LINES:
        text = f"[{len(lines) - _OUTPUT_LINES} earlier lines left out]\n" + "".join(lines[-_OUTPUT_LINES:])
    return text

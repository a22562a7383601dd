"""A fresh process per replayed run, for ``spanreplay check``.

Isolation is the point: an entry point's module state must not leak from one
replayed run into the next. A new interpreter per run gives that, but spends
most of its time importing spanreplay (and OpenTelemetry, orjson, rich) and
compiling the masking databases again. Where the platform can fork, ``check``
starts one server (``_check_server``) that does that once and forks a process
per run: fresh, since the server never imports the entry point nor opens a run,
and much cheaper to start. (multiprocessing's forkserver would run the caller's
``__main__`` again in every run, which a script that calls the command line
without a ``__name__`` guard does not survive.) Elsewhere (Windows) each run
starts ``python -m spanreplay.cli._check_run``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

import orjson

import spanreplay

from ._check_run import DIVERGED, Verdict

__all__ = ["ForkServer", "Replayed", "fresh_processes", "replay_in_fresh_process"]

# Lines of the replayed code's output kept per run (the last ones, where a failure shows).
_OUTPUT_LINES: Final = 200
# Whether runs are forked from a server (True) or started as new interpreters; tests switch it.
use_fork_server = hasattr(os, "fork")


@dataclass(frozen=True)
class Replayed:
    """A verdict, with what the replayed code printed and the wall time its process took."""

    verdict: Verdict
    stdout: str
    stderr: str
    seconds: float


class ForkServer:
    """A running ``_check_server``, and the runs it was asked to fork; safe to use from several threads."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "spanreplay.cli._check_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_child_environment(),
        )
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._requests: IO[bytes] = self._process.stdin
        self._lock = threading.Lock()
        self._waiting: dict[str, tuple[Future[int], Future[int]]] = {}
        self._count = 0
        self._pids: set[int] = set()
        # Prepared before the first run is asked for: a run's time is then its own.
        if not self._process.stdout.readline():
            raise self._gone()
        self._reader = threading.Thread(target=self._read, args=(self._process.stdout,), daemon=True)
        self._reader.start()

    def run(self, request: dict[str, Any], timeout: float | None) -> int | None:
        """Fork a run and wait for it: its exit code, or None when it outlived ``timeout`` (it is killed).

        Raises:
            RuntimeError: the server itself ended (killed, out of memory): no run can be judged.
        """
        started, ended = Future[int](), Future[int]()
        with self._lock:
            self._count += 1
            key = str(self._count)
            self._waiting[key] = (started, ended)
            try:
                self._requests.write(orjson.dumps({**request, "id": key}) + b"\n")
                self._requests.flush()
            except OSError as exc:
                raise self._gone() from exc
        pid = started.result()
        self._pids.add(pid)
        try:
            return ended.result(timeout)
        except TimeoutError:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            ended.result()
            return None
        finally:
            self._pids.discard(pid)

    def _gone(self) -> RuntimeError:
        return RuntimeError(
            f"The process spanreplay check forks its runs from ended (exit code {self._process.poll()}) while "
            "runs were still to be replayed; run the command again, with --debug for the traceback, or with "
            "less -j if the machine ran out of memory."
        )

    def abort(self) -> None:
        """Kill the runs still going (the command was interrupted, or failed)."""
        for pid in list(self._pids):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _read(self, replies: IO[bytes]) -> None:
        for line in replies:
            reply = orjson.loads(line)
            with self._lock:
                started, ended = self._waiting[reply["id"]]
                if "exit" in reply:
                    del self._waiting[reply["id"]]
            if "pid" in reply:
                started.set_result(reply["pid"])
            else:
                ended.set_result(reply["exit"])
        # The server is gone: whoever still waits is told so.
        self._process.wait()
        with self._lock:
            left, self._waiting = self._waiting, {}
        for started, ended in left.values():
            for future in (started, ended):
                if not future.done():
                    future.set_exception(self._gone())

    def close(self) -> None:
        """Let the server leave once its runs have ended, and wait for it."""
        self._requests.close()
        self._process.wait()
        self._reader.join()
        assert self._process.stdout is not None
        self._process.stdout.close()


_server: ForkServer | None = None


@contextmanager
def fresh_processes() -> Iterator[None]:
    """While open, ``replay_in_fresh_process`` forks runs from one server (where the platform can fork)."""
    global _server
    if not use_fork_server:
        yield
        return
    _server = ForkServer()
    try:
        yield
    except BaseException:
        _server.abort()
        raise
    finally:
        server, _server = _server, None
        server.close()


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
    server = _server
    if server is not None:
        exit_code, stdout, stderr = _forked(server, spec.decode(), verdict_file, scratch, timeout)
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


def _forked(
    server: ForkServer, spec: str, verdict_file: Path, scratch: Path, timeout: float | None
) -> tuple[int | None, str, str]:
    out, err = scratch / "stdout", scratch / "stderr"
    request = {
        "verdict": str(verdict_file),
        "spec": spec,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "stdout": str(out),
        "stderr": str(err),
    }
    exit_code = server.run(request, timeout)
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
    """This process's environment, and the spanreplay it runs first on the child's path.

    Only a source tree is put first: an installed spanreplay's site-packages is on
    the child's path already, and put first it would come before the standard library.
    """
    env = dict(os.environ)
    here = Path(spanreplay.__file__).resolve().parent.parent
    if here.name not in ("site-packages", "dist-packages"):
        path = env.get("PYTHONPATH", "")
        env["PYTHONPATH"] = str(here) + (os.pathsep + path if path else "")
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

"""The server ``spanreplay check`` forks its runs from: ``python -m spanreplay.cli._check_server``.

Started once per ``check``, it imports what a replay needs and builds the
masker of the default masking configuration (whose hyperscan databases take
most of a small run's replay to compile), then forks one process per run it is
asked for. A forked run inherits what was built here instead of building it
again, and nothing else: the server never imports the entry point nor opens a
run. The Anthropic SDK, when installed, is imported here too: it takes seconds
to import and holds none of the agent's state. The masker is cached by
configuration and key (``masking.masker_for``), so a run whose environment asks
for other masking builds its own.

The protocol is JSON lines. On stdin, one request per run: ``{"id", "verdict",
"spec", "cwd", "env", "stdout", "stderr"}`` (the arguments of
``_check_run.run_forked``). On stdout, ``{"id", "pid"}`` once the run's process
is forked (so the caller can kill it at its timeout), then ``{"id", "exit"}``
when it ends (the exit code, or minus the signal that ended it). The server
first says ``{"ready": true}`` once prepared, and leaves when stdin closes,
once its runs have ended.
"""

from __future__ import annotations

import os
import selectors
import signal
import sys
from typing import Any

import orjson

from ._check_run import run_forked

__all__ = ["main"]


def _prepare() -> None:
    try:
        from spanreplay.recording.settings import masker

        masker()
    except Exception:  # a run builds what it needs itself, and says what went wrong then
        pass
    try:
        # The SDK spanreplay instruments: importing it takes seconds, and it holds no state of
        # the agent's, so every run forks with it imported instead of importing it again.
        import anthropic  # noqa: F401

        from spanreplay.instrumentation import anthropic as _instrumentation  # noqa: F401
    except Exception:
        pass


def _fork(request: dict[str, Any]) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        # The run reads nothing from the caller, and must not hold the server's pipes.
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        run_forked(
            request["verdict"], request["spec"], request["cwd"], request["env"], request["stdout"], request["stderr"]
        )
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        os._exit(code)


def main() -> int:
    _prepare()
    out = sys.stdout.buffer
    out.write(b'{"ready":true}\n')
    out.flush()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)
    requests = sys.stdin.fileno()
    selector = selectors.DefaultSelector()
    selector.register(requests, selectors.EVENT_READ, "request")
    selector.register(wake_r, selectors.EVENT_READ, "child")
    running: dict[int, str] = {}
    pending = b""
    open_input = True

    def say(message: dict[str, Any]) -> None:
        out.write(orjson.dumps(message) + b"\n")
        out.flush()

    def reap() -> None:
        while running:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            say({"id": running.pop(pid), "exit": os.waitstatus_to_exitcode(status)})

    while open_input or running:
        for key, _ in selector.select(timeout=1.0):
            if key.data == "child":
                os.read(wake_r, 4096)
                continue
            chunk = os.read(requests, 1 << 16)
            if not chunk:
                open_input = False
                selector.unregister(requests)
                continue
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                request = orjson.loads(line)
                pid = _fork(request)
                running[pid] = request["id"]
                say({"id": request["id"], "pid": pid})
        reap()
    return 0


if __name__ == "__main__":
    sys.exit(main())

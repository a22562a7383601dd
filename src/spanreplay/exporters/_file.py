"""The durable trace file: one OTLP/JSON-lines file per run, written as each span ends.

Nothing is held in a memory batch: each span is one ``os.write`` of one complete
line to a file opened with ``O_APPEND``, so a process killed with SIGKILL leaves
every span that had ended readable (at worst a torn last line, which the loader
tolerates). The run's root span is also written when it starts, marked
``running``; a reader that never sees its ended copy knows the run crashed.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .. import _semconv as sc
from ._otlp_json import LineEncoder

logger = logging.getLogger("spanreplay")

_SAFE_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$")
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


class DurableFileSpanProcessor(SpanProcessor):
    """Writes every span that carries a run id to ``{trace_dir}/{run_id}.jsonl``.

    Args:
        trace_dir: the directory for the files; created (owner-only) when missing.
        fsync: also ``fsync`` after each line, for durability across power loss
            and kernel crashes, at the cost of a disk flush per span.
    """

    def __init__(self, trace_dir: str | os.PathLike[str] = "traces", *, fsync: bool = False) -> None:
        self.trace_dir = Path(trace_dir)
        self.fsync = fsync
        # configure() turns the processor off rather than removing it (the SDK cannot).
        self.enabled = True
        self._encoder = LineEncoder()
        self._fds: dict[str, int] = {}
        self._lock = threading.Lock()

    def path_for(self, run_id: str) -> Path:
        return self.trace_dir / f"{run_id}.jsonl"

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        attributes = span.attributes or {}
        if attributes.get(sc.RUN_STATUS) == sc.RUN_STATUS_RUNNING:
            self._write(str(attributes[sc.RUN_ID]), span)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = span.attributes or {}
        run_id = attributes.get(sc.RUN_ID)
        if run_id is None:
            return
        self._write(str(run_id), span)
        if sc.RUN_STATUS in attributes:
            self._close(str(run_id))

    def _write(self, run_id: str, span: ReadableSpan) -> None:
        if not self.enabled:
            return
        try:
            line = self._encoder.encode(span)
            fd = self._fd(run_id)
            if fd is None:
                return
            os.write(fd, line)
            if self.fsync:
                os.fsync(fd)
        except Exception:  # telemetry never breaks the agent
            logger.exception("spanreplay could not write span %s of run %s to %s", span.name, run_id, self.path_for(run_id))

    def _fd(self, run_id: str) -> int | None:
        fd = self._fds.get(run_id)
        if fd is not None:
            return fd
        if not _SAFE_RUN_ID.match(run_id):
            logger.error("spanreplay will not write run id %r to a file name; use letters, digits, '_', '.', '-'", run_id)
            return None
        with self._lock:
            fd = self._fds.get(run_id)
            if fd is None:
                self.trace_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
                fd = os.open(self.path_for(run_id), _FLAGS, 0o600)
                self._fds[run_id] = fd
            return fd

    def _close(self, run_id: str) -> None:
        with self._lock:
            fd = self._fds.pop(run_id, None)
        if fd is not None:
            os.close(fd)

    def shutdown(self) -> None:
        with self._lock:
            fds, self._fds = list(self._fds.values()), {}
        for fd in fds:
            os.close(fd)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        # Lines are written as spans end; there is nothing buffered to flush.
        return True

"""The durable trace file: one OTLP/JSON-lines file per run, written as each span ends.

Nothing is held in a memory batch: each span is one ``os.write`` of one complete
line to a file opened with ``O_APPEND``, so a process killed with SIGKILL leaves
every span that had ended readable (at worst a torn last line, which the loader
tolerates). A write the kernel takes only part of (a full disk) is finished or
cut back by ``_appends.LineFile``, so later lines never join half of one. The
file is opened with ``O_NOFOLLOW``: a link planted where a run's file goes is
refused, never written through (``_private_files``). The run's root span is also written when it starts, marked
``running``; a reader that never sees its ended copy knows the run crashed.
So is a side effect's span (``effect=True``): its intent is on disk before its
work runs, and a reader that never sees its ended copy knows it may have happened.
"""

from __future__ import annotations

import logging
import os
import threading
import warnings
from pathlib import Path

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from spanreplay import semconv as sc
from spanreplay.model.private_files import TraceFileLinkError, make_private_dirs, open_nofollow
from spanreplay.model.run_ids import checked_run_id, is_run_id

from ._appends import LineFile
from ._foreign import guarded
from ._otlp_dicts import attributes_of
from ._otlp_json import LineEncoder

logger = logging.getLogger("spanreplay")

# O_NOFOLLOW and O_CLOEXEC are added by open_nofollow.
_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT


class DurableFileSpanProcessor(SpanProcessor):
    """Writes every span that carries a run id to ``{trace_dir}/{run_id}.jsonl``.

    Args:
        trace_dir: the directory for the files; created (owner-only, 0700, with any
            parents it makes) when missing. A folder that exists keeps its mode.
        fsync: also ``fsync`` after each line, for durability across power loss
            and kernel crashes, at the cost of a disk flush per span.
        raise_internal_errors: raise a failure to write (tests); otherwise it is logged
            once per run and the agent goes on without its trace file.
        strict: the former name of ``raise_internal_errors`` (deprecated).
    """

    def __init__(
        self,
        trace_dir: str | os.PathLike[str] = "traces",
        *,
        fsync: bool = False,
        raise_internal_errors: bool = False,
        strict: bool | None = None,
    ) -> None:
        if strict is not None:
            warnings.warn(
                "DurableFileSpanProcessor(strict=) is now DurableFileSpanProcessor(raise_internal_errors=); "
                "strict= goes in a later release.",
                DeprecationWarning,
                stacklevel=2,
            )
            raise_internal_errors = strict
        self.trace_dir = Path(trace_dir)
        self.fsync = fsync
        self.raise_internal_errors = raise_internal_errors
        # configure() turns the processor off rather than removing it (the SDK cannot).
        self.enabled = True
        self._encoder = LineEncoder()
        self._fds: dict[str, LineFile] = {}
        self._failed: set[str] = set()
        # Runs whose file already held spans when opened (a run id recorded again):
        # discard() leaves such a file alone, as it holds the earlier run too.
        self._appended: set[str] = set()
        self._lock = threading.Lock()

    @property
    def strict(self) -> bool:
        """The former name of ``raise_internal_errors`` (deprecated)."""
        warnings.warn(
            "DurableFileSpanProcessor.strict is now .raise_internal_errors; strict goes in a later release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.raise_internal_errors

    @strict.setter
    def strict(self, value: bool) -> None:
        warnings.warn(
            "DurableFileSpanProcessor.strict is now .raise_internal_errors; strict goes in a later release.",
            DeprecationWarning,
            stacklevel=2,
        )
        self.raise_internal_errors = value

    def retarget(self, trace_dir: str | os.PathLike[str], *, fsync: bool, raise_internal_errors: bool) -> None:
        """Write runs started from now on to ``trace_dir`` (``configure()`` called again)."""
        with self._lock:
            moved = Path(trace_dir) != self.trace_dir
            self.trace_dir = Path(trace_dir)
            self.fsync = fsync
            self.raise_internal_errors = raise_internal_errors
            self.enabled = True
            files, self._fds = (list(self._fds.values()), {}) if moved else ([], self._fds)
        for file in files:
            os.close(file.fd)

    def path_for(self, run_id: str) -> Path:
        return self.trace_dir / f"{run_id}.jsonl"

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        # The run's root span is written when it starts too, marked running: if the
        # process dies, the file still says which run it was and that it never ended.
        attributes = attributes_of(span)
        if attributes.get(sc.RUN_STATUS) == sc.RUN_STATUS_RUNNING:
            self._write(str(attributes[sc.RUN_ID]), span)
        elif attributes.get(sc.EFFECT) is True and sc.RUN_ID in attributes:
            # A side effect's intent: on disk before its work runs, so a crash inside a
            # payment leaves a trace of the attempt. Its ended copy follows as usual.
            self._write(str(attributes[sc.RUN_ID]), span)

    def on_end(self, span: ReadableSpan) -> None:
        attributes = attributes_of(span)
        run_id = attributes.get(sc.RUN_ID)
        if run_id is None:
            return
        if type(run_id) is not str:
            run_id = str(run_id)
        self._write(run_id, span)
        if sc.RUN_STATUS in attributes:
            self._close(run_id)

    def _write(self, run_id: str, span: ReadableSpan) -> None:
        if not self.enabled:
            return
        file = None
        try:
            file = self._fds.get(run_id)
            if file is None:
                file = self._open(run_id)
            # Another instrumentation's span (the model SDK's own) has its content masked first.
            file.write_line(self._encoder.encode(guarded(span)))
            if self.fsync:
                os.fsync(file.fd)
        except Exception as error:  # telemetry never breaks the agent
            if self.raise_internal_errors:
                raise
            self._report(run_id, span, error, file)

    def _report(self, run_id: str, span: ReadableSpan, error: Exception, file: LineFile | None) -> None:
        with self._lock:
            first = run_id not in self._failed
            self._failed.add(run_id)
        if not first:
            logger.debug("spanreplay could not write span %r of run %s", span.name, run_id, exc_info=True)
            return
        path = self.path_for(run_id)
        if isinstance(error, TraceFileLinkError):
            # Not a fault to debug: no traceback, the sentence says what to do.
            logger.warning("spanreplay did not record run %s to a file: %s", run_id, error)
            return
        if file is None:
            repaired = ""
        elif file.torn:
            repaired = " Part of its line was written and could not be cut off; the next line starts on a fresh one."
        else:
            repaired = " The file still ends on a whole line."
        logger.warning(
            "spanreplay could not write span %r of run %s to %s (%s: %s); the agent continues, but this run's "
            "trace file is incomplete (later failures for the run are logged at DEBUG level).%s Check that "
            "the trace directory is writable and its disk has room, or pass another trace_dir to "
            "spanreplay.configure().",
            span.name,
            run_id,
            path,
            type(error).__name__,
            error,
            repaired,
            exc_info=not isinstance(error, OSError),
        )

    def _open(self, run_id: str) -> LineFile:
        # Any code can put a run id on a span: it names a file only once it is a plain name
        # (no separator, no "..": the file lies in trace_dir), opened without following a link.
        checked_run_id(run_id, where="a span being recorded")
        with self._lock:
            file = self._fds.get(run_id)
            if file is None:
                make_private_dirs(self.trace_dir)
                fd = open_nofollow(self.path_for(run_id), _FLAGS, 0o600)
                file = self._fds[run_id] = LineFile(fd)
                if os.fstat(fd).st_size:
                    self._appended.add(run_id)
            return file

    def _close(self, run_id: str) -> None:
        with self._lock:
            file = self._fds.pop(run_id, None)
            self._failed.discard(run_id)
        if file is not None:
            os.close(file.fd)

    def discard(self, run_id: str) -> bool:
        """Close the run's file and remove it (the keep policy dropped the run).

        Returns whether it was removed: a file that held spans before this run
        opened it (the same run id recorded again) is kept, and so is any file
        while the processor is off.
        """
        with self._lock:
            file = self._fds.pop(run_id, None)
            self._failed.discard(run_id)
            shared = run_id in self._appended
            self._appended.discard(run_id)
        if file is not None:
            os.close(file.fd)
        if shared or not self.enabled or not is_run_id(run_id):
            return False
        try:
            self.path_for(run_id).unlink()
        except FileNotFoundError:
            return False
        return True

    def shutdown(self) -> None:
        with self._lock:
            files, self._fds = list(self._fds.values()), {}
        for file in files:
            os.close(file.fd)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        # Lines are written as spans end; there is nothing buffered to flush.
        return True

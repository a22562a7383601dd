"""OTLP export that never holds up the agent: a bounded queue, a sender thread, one report per outage.

``configure()`` sends spans to an OTLP endpoint (a Collector, Jaeger, Tempo, Phoenix)
through ``OtlpSpanProcessor`` and ``GuardedExporter``, which wraps the
OpenTelemetry SDK's own OTLP exporter (gRPC or HTTP/protobuf, set up by the
standard ``OTEL_EXPORTER_OTLP_*`` variables).

What the agent can wait for, at most:

- a span ending: nothing. ``on_end`` appends to a bounded queue (no I/O, no
  lock shared with the sender, no logging); a span that finds the queue full is
  dropped and counted.
- ``force_flush(timeout_millis)``: ``timeout_millis``. The SDK's batch processor
  exports in the caller's thread with no bound; this one waits for its sender.
- ``shutdown()`` (the provider's, at interpreter exit): ``shutdown_timeout``
  (2 s by default), whatever the endpoint does.

The sender sends batches of ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` spans every
``OTEL_BSP_SCHEDULE_DELAY`` milliseconds, each bounded by
``OTEL_EXPORTER_OTLP_TIMEOUT`` seconds (retries included). After a failure it
backs off (1 s, doubling up to 30 s) and drops batches untried meanwhile, so an
outage costs the agent no encoding work; an explicit ``force_flush`` still
tries. Spans it could not deliver are counted in ``stats``; the first failure of an outage is logged once,
with its cause and the fix, and the endpoint answering again is logged once with
the count. The SDK's own per-attempt log lines about these exports are withheld
(they repeat for every batch); those about the application's own exporters pass.

The durable trace file does not depend on any of this: it is written as each
span ends, so every step is on disk whatever happens to the OTLP path, and
``spanreplay push`` sends it later.

``_otlp_endpoint`` builds the exporter the standard variables describe;
``_otlp_failures`` tells one failure from another and words its fix.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ._foreign import guarded
from ._otlp_endpoint import build_exporter, protocol_from_environment
from ._otlp_failures import PUSH_HINT, cause, withholding

logger = logging.getLogger("spanreplay")

__all__ = ["GuardedExporter", "OtlpExportStats", "OtlpSpanProcessor"]

SHUTDOWN_TIMEOUT_S: Final = 2.0
# After a failed export the sender drops batches untried for this long, doubling up to the maximum.
_FIRST_BACKOFF_S: Final = 1.0
_MAX_BACKOFF_S: Final = 30.0


@dataclass
class OtlpExportStats:
    """What the OTLP path did so far. Read it to alert on spans that did not reach the backend.

    Attributes:
        exported: spans the endpoint accepted.
        dropped: spans that never reached it: refused, timed out, queue full, or
            still queued at shutdown. The trace files hold them (``spanreplay push``).
        failed_exports: export requests that failed (each drops its whole batch).
    """

    exported: int = 0
    dropped: int = 0
    failed_exports: int = 0


class GuardedExporter(SpanExporter):
    """Wraps an OTLP span exporter: never raises, counts what it could not send, reports once per outage.

    Args:
        inner: the SDK exporter (``build_exporter()``).
        endpoint: shown in messages; by default the inner exporter's own.
        factory: builds another inner exporter; a forked child uses it rather than
            the parent's connections (a gRPC channel, pooled HTTP sockets).
    """

    def __init__(
        self, inner: SpanExporter, *, endpoint: str | None = None, factory: Callable[[], SpanExporter] | None = None
    ) -> None:
        self.inner = inner
        self.endpoint = endpoint or str(getattr(inner, "_endpoint", "") or "the OTLP endpoint")
        self._factory = factory
        self._stale = False
        self._reset()

    def _reset(self) -> None:
        self.stats = OtlpExportStats()
        self._lock = threading.Lock()
        self._retry_at = 0.0
        self._backoff = 0.0
        self._failing = False
        self._dropped_in_outage = 0
        self._reported = False
        self._in_flight = 0
        self._abandoned = False

    def after_fork(self) -> None:
        """In a forked child: counts of its own, and a new inner exporter on first use."""
        self._reset()
        self._stale = self._factory is not None

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        with self._lock:
            abandoned = self._abandoned
            self._in_flight = 0 if abandoned else len(spans)
        if abandoned:
            self.failed(len(spans), lambda: ("the exporter was shut down", "send spans before shutdown."), export=False)
            return SpanExportResult.FAILURE
        error: BaseException | None = None
        with withholding() as sink:
            try:
                if self._stale and self._factory is not None:
                    self.inner, self._stale = self._factory(), False
                result = self.inner.export(spans)
            except Exception as exc:  # telemetry never breaks the agent, nor its sender thread
                logger.debug("spanreplay: the OTLP exporter raised", exc_info=True)
                result, error = SpanExportResult.FAILURE, exc
        with self._lock:
            self._in_flight = 0
            if self._abandoned:
                return result  # counted as dropped by abandon()'s caller
        if result is SpanExportResult.SUCCESS:
            self._succeeded(len(spans))
        else:
            with self._lock:
                self._backoff = min(max(self._backoff * 2, _FIRST_BACKOFF_S), _MAX_BACKOFF_S)
                self._retry_at = time.monotonic() + self._backoff
            self.failed(len(spans), lambda: cause(sink, error, self.endpoint, len(spans)))
        return result

    def ready(self) -> bool:
        """False while the endpoint is backed off after a failure (1 s, doubling up to 30 s)."""
        return not self._failing or time.monotonic() >= self._retry_at

    def skip(self, count: int) -> None:
        """Count a batch dropped without trying it: the endpoint is backed off."""
        self.failed(count, lambda: ("it failed moments ago and is backed off", "see the first failure."), export=False)

    def _succeeded(self, count: int) -> None:
        with self._lock:
            self._backoff = 0.0
            self.stats.exported += count
            recovered, dropped = self._failing, self._dropped_in_outage
            self._failing, self._dropped_in_outage, self._reported = False, 0, False
        if recovered:
            logger.warning(
                "spanreplay: %s takes spans again; %d span(s) did not reach it during the outage. The local trace "
                "files hold them: `spanreplay push traces/ --endpoint URL` sends them.",
                self.endpoint,
                dropped,
            )

    def failed(self, count: int, cause: Callable[[], tuple[str, str]], *, export: bool = True) -> None:
        """Count ``count`` spans that did not reach the endpoint; the first of an outage is logged.

        ``cause`` says what happened and the fix; it is only asked for when logging
        (it may probe the endpoint).
        """
        with self._lock:
            self.stats.dropped += count
            self.stats.failed_exports += 1 if export else 0
            self._dropped_in_outage += count
            self._failing = True
            first, self._reported = not self._reported, True
        if not first:
            logger.debug("spanreplay: %d more span(s) not sent to %s", count, self.endpoint)
            return
        what, fix = cause()
        logger.error(
            "spanreplay could not send %d span(s) to %s: %s. The agent goes on at full speed; spans that "
            "cannot be sent are dropped and counted (settings().otlp_processor.stats) and this is not logged "
            "again until the endpoint takes spans again. Fix: %s %s",
            count,
            self.endpoint,
            what,
            fix,
            PUSH_HINT,
        )

    def abandon(self) -> int:
        """Stop counting: the spans of the export still running (returned) are the caller's to count."""
        with self._lock:
            self._abandoned = True
            return self._in_flight

    def shutdown(self) -> None:
        with withholding():
            try:
                self.inner.shutdown()
            except Exception:
                logger.debug("spanreplay: the OTLP exporter failed to shut down", exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _env_number(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        logger.warning("spanreplay: %s=%r is not a number; using %s", name, raw, default)
        return default
    return value if value > 0 else default


class OtlpSpanProcessor(SpanProcessor):
    """Sends ended spans to an OTLP endpoint in batches from its own thread; bounded everywhere.

    Args:
        exporter: where batches go; an SDK exporter is wrapped in ``GuardedExporter``.
        max_queue_size: most spans waiting (``OTEL_BSP_MAX_QUEUE_SIZE``, 2048);
            past it, spans are dropped and counted rather than held in memory.
        max_export_batch_size: most spans per request (``OTEL_BSP_MAX_EXPORT_BATCH_SIZE``, 512).
        schedule_delay: seconds between sends (``OTEL_BSP_SCHEDULE_DELAY`` in ms, 5000).
        shutdown_timeout: most seconds ``shutdown()`` waits for the queue to drain.
    """

    def __init__(
        self,
        exporter: SpanExporter,
        *,
        max_queue_size: int | None = None,
        max_export_batch_size: int | None = None,
        schedule_delay: float | None = None,
        shutdown_timeout: float = SHUTDOWN_TIMEOUT_S,
    ) -> None:
        self.exporter = exporter if isinstance(exporter, GuardedExporter) else GuardedExporter(exporter)
        self.max_queue_size = max_queue_size or int(_env_number("OTEL_BSP_MAX_QUEUE_SIZE", 2048))
        batch = max_export_batch_size or int(_env_number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512))
        self.max_export_batch_size = min(batch, self.max_queue_size)
        self.schedule_delay = schedule_delay or _env_number("OTEL_BSP_SCHEDULE_DELAY", 5000) / 1000
        self.shutdown_timeout = shutdown_timeout
        # configure() silences a processor rather than removing it (an SDK provider cannot).
        self.enabled = True
        self._init_state()
        _processors.add(self)

    @classmethod
    def from_environment(cls, protocol: str | None = None, endpoint: str | None = None) -> OtlpSpanProcessor:
        """The processor ``configure()`` adds: the exporter the standard variables describe,
        or ``configure(otlp=OtlpExport(protocol=, endpoint=))`` where it names them.

        Raises:
            ConfigurationError: a protocol the Python exporter does not speak.
        """
        chosen = protocol or protocol_from_environment()
        exporter = build_exporter(chosen, endpoint=endpoint)
        return cls(GuardedExporter(exporter, factory=lambda: build_exporter(chosen, endpoint=endpoint)))

    @property
    def stats(self) -> OtlpExportStats:
        return self.exporter.stats

    def _init_state(self) -> None:
        self._queue: deque[ReadableSpan] = deque()
        self._wake = threading.Event()
        self._idle = threading.Condition(threading.Lock())
        self._flush_requests = 0
        self._flushed = 0
        self._closing = False
        self._deadline = float("inf")
        self._full_drops: list[None] = []
        self._thread = threading.Thread(target=self._run, name="spanreplay-otlp", daemon=True)
        self._thread.start()

    def after_fork(self) -> None:
        """In a forked child: a fresh, empty queue and a sender thread of its own (unless shut down)."""
        if not self._closing:
            self.exporter.after_fork()
            self._init_state()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        # The agent's thread: no I/O, no logging, no lock the sender holds while sending.
        if self._closing or not self.enabled or not span.context.trace_flags.sampled:
            return
        if len(self._queue) >= self.max_queue_size:
            # One list append counts it: atomic, and cheaper than a lock on this hot path.
            self._full_drops.append(None)
            if not self._wake.is_set():
                self._wake.set()  # the sender reports it
            return
        self._queue.append(span)
        if len(self._queue) >= self.max_export_batch_size and not self._wake.is_set():
            self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self.schedule_delay)
            self._wake.clear()
            with self._idle:
                wanted = self._flush_requests
            self._report_full_queue()
            flushing = wanted > self._flushed
            while self._queue and not (self._closing and time.monotonic() > self._deadline):
                self._send(min(len(self._queue), self.max_export_batch_size), attempt=flushing)
            with self._idle:
                self._flushed = wanted
                self._idle.notify_all()
            if self._closing:
                return

    def _send(self, count: int, *, attempt: bool) -> None:
        batch = []
        for _ in range(count):
            try:
                batch.append(self._queue.popleft())
            except IndexError:
                break
        if attempt or self.exporter.ready():
            # Here, on the sender's thread, not in on_end: another instrumentation's span
            # (the model SDK's own) has its content masked before it is encoded.
            self.exporter.export([guarded(span) for span in batch])  # a GuardedExporter: never raises
        else:
            # The endpoint failed moments ago: encoding this batch only to fail again
            # would take the interpreter from the agent. An explicit flush still tries.
            self.exporter.skip(len(batch))

    def _report_full_queue(self) -> None:
        dropped = len(self._full_drops)
        del self._full_drops[:dropped]  # one operation: an append meanwhile is kept for the next report
        if dropped:
            self.exporter.failed(
                dropped,
                lambda: (
                    f"its queue of {self.max_queue_size} spans was full, because the endpoint takes spans more "
                    "slowly than the agent makes them",
                    "raise OTEL_BSP_MAX_QUEUE_SIZE, or make the Collector faster (batch processor, more memory).",
                ),
                export=False,
            )

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Send what is queued; waits at most ``timeout_millis``. False when it did not finish in time."""
        deadline = time.monotonic() + timeout_millis / 1000
        with self._idle:
            self._flush_requests += 1
            ticket = self._flush_requests
            self._wake.set()
            while self._flushed < ticket:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._idle.wait(left)
        return True

    def shutdown(self) -> None:
        """Send what is queued, waiting at most ``shutdown_timeout`` seconds; the rest is counted as dropped."""
        if self._closing:
            return
        self._deadline = time.monotonic() + self.shutdown_timeout
        self._closing = True
        self._wake.set()
        self._thread.join(self.shutdown_timeout)
        # Still running: stuck in a request to a slow endpoint. Its batch counts as
        # dropped; the daemon thread finishes that request on its own, uncounted.
        stuck = self.exporter.abandon() if self._thread.is_alive() else 0
        self.exporter.shutdown()
        self._report_full_queue()
        left = stuck
        while True:  # popped one by one: a span the sender pops instead is counted by the exporter
            try:
                self._queue.popleft()
            except IndexError:
                break
            left += 1
        if left:
            self.exporter.failed(
                left,
                lambda: (
                    f"{left} span(s) were still queued when the process shut down",
                    f"the endpoint did not take them within {self.shutdown_timeout:g} s; check that it runs.",
                ),
                export=False,
            )


_processors: weakref.WeakSet[OtlpSpanProcessor] = weakref.WeakSet()


def _after_fork() -> None:
    # A forked child has the parent's queue but not its sender thread: it starts
    # its own, empty (the parent sends what it had queued).
    for processor in list(_processors):
        processor.after_fork()


os.register_at_fork(after_in_child=_after_fork)

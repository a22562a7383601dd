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
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from ..errors import ConfigurationError

logger = logging.getLogger("spanreplay")

__all__ = ["GuardedExporter", "OtlpExportStats", "OtlpSpanProcessor", "build_exporter", "resource"]

PROTOCOLS: Final = ("grpc", "http/protobuf")
SHUTDOWN_TIMEOUT_S: Final = 2.0
# After a failed export the sender drops batches untried for this long, doubling up to the maximum.
_FIRST_BACKOFF_S: Final = 1.0
_MAX_BACKOFF_S: Final = 30.0
DEPLOYMENT_ENVIRONMENT: Final = "deployment.environment"
DEPLOYMENT_ENVIRONMENT_NAME: Final = "deployment.environment.name"
_DEFAULT_SERVICE: Final = "agent"
_PUSH_HINT: Final = (
    "Every step is still in the local trace files; `spanreplay push traces/ --endpoint URL` sends them "
    "once the endpoint takes spans again."
)
# The SDK exporters' loggers: their lines about spanreplay's exports are withheld (see _Withheld).
_SDK_LOGGERS: Final = (
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
    "opentelemetry.exporter.otlp.proto.http._common",
    "opentelemetry.exporter.otlp.common.http",
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.grpc.trace_exporter",
)


def resource(service_name: str | None = None, extra: dict[str, Any] | None = None) -> Resource:
    """The resource of a provider spanreplay creates, from the standard variables.

    ``OTEL_RESOURCE_ATTRIBUTES`` and ``OTEL_SERVICE_NAME`` are read by the SDK
    (``service.version=1.4.2,deployment.environment.name=prod``); ``service_name``
    and ``extra`` override them; ``service.name`` falls back to ``"agent"`` rather
    than the SDK's ``unknown_service``. The deployment environment is set under both
    its current name (``deployment.environment.name``) and the older one that Jaeger
    and Grafana dashboards still filter on (``deployment.environment``).
    """
    attributes: dict[str, Any] = dict(extra or {})
    if service_name:
        attributes[SERVICE_NAME] = service_name
    created = Resource.create(attributes)
    found = dict(created.attributes)
    if str(found.get(SERVICE_NAME, "")).startswith("unknown_service"):
        found[SERVICE_NAME] = _DEFAULT_SERVICE
    environment = found.get(DEPLOYMENT_ENVIRONMENT_NAME, found.get(DEPLOYMENT_ENVIRONMENT))
    if environment is not None:
        found.setdefault(DEPLOYMENT_ENVIRONMENT_NAME, environment)
        found.setdefault(DEPLOYMENT_ENVIRONMENT, environment)
    return Resource(found, created.schema_url)


def protocol_from_environment() -> str:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()


def build_exporter(protocol: str | None = None, *, timeout: float | None = None) -> SpanExporter:
    """The SDK's OTLP span exporter for ``protocol`` (default: the standard variables).

    Raises:
        ConfigurationError: a protocol the Python exporter does not speak (``http/json``).
    """
    protocol = protocol or protocol_from_environment()
    if protocol == "grpc":
        from grpc import StatusCode
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        # RESOURCE_EXHAUSTED is what gRPC answers to a message above the receiver's
        # size limit: sending the same batch again cannot succeed, and retrying it
        # would hold the sender for the whole timeout while the queue overflows.
        # (OTLP treats it as retryable only with RetryInfo, which the SDK ignores.)
        retryable = None
        if not os.environ.get("OTEL_PYTHON_EXPORTER_OTLP_GRPC_RETRYABLE_ERROR_CODES"):
            retryable = [
                StatusCode.CANCELLED,
                StatusCode.DEADLINE_EXCEEDED,
                StatusCode.ABORTED,
                StatusCode.OUT_OF_RANGE,
                StatusCode.UNAVAILABLE,
                StatusCode.DATA_LOSS,
            ]
        return GrpcExporter(timeout=timeout, retryable_error_codes=retryable)
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        if os.environ.get("OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER"):
            return HttpExporter(timeout=timeout)  # the application's own session, with its credentials
        import requests

        # The SDK logs no status once its retries run out ("due to timeout, max
        # retries or shutdown"); a response hook keeps the status for the report.
        session = requests.Session()
        session.hooks["response"].append(_note_response)
        return HttpExporter(timeout=timeout, session=session)
    raise ConfigurationError(
        f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not a protocol the OpenTelemetry Python exporter "
        "speaks; set it to 'grpc' or 'http/protobuf'."
    )


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


@dataclass
class _Sink:
    """What one export said about itself: the SDK's log records and the HTTP answers."""

    records: list[logging.LogRecord] = field(default_factory=list)
    answers: list[tuple[int, str]] = field(default_factory=list)


class _Capture(threading.local):
    sink: _Sink | None = None


_capture = _Capture()


class _Withheld(logging.Filter):
    """Keeps the SDK exporter's own lines about spanreplay's exports for spanreplay's report.

    Only records logged in a thread that is inside ``GuardedExporter.export`` are
    withheld; an application's own exporters log as before.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        sink = _capture.sink
        if sink is None:
            return True
        sink.records.append(record)
        return False


def _note_response(response: Any, *args: Any, **kwargs: Any) -> None:
    sink = _capture.sink
    if sink is not None:
        sink.answers.append((int(response.status_code), str(response.reason or "")))


_WITHHELD = _Withheld()
for _name in _SDK_LOGGERS:
    logging.getLogger(_name).addFilter(_WITHHELD)


@contextmanager
def _withholding() -> Iterator[_Sink]:
    sink = _Sink()
    previous, _capture.sink = _capture.sink, sink
    try:
        yield sink
    finally:
        _capture.sink = previous


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
        with _withholding() as sink:
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
            self.failed(len(spans), lambda: _cause(sink, error, self.endpoint, len(spans)))
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
            _PUSH_HINT,
        )

    def abandon(self) -> int:
        """Stop counting: the spans of the export still running (returned) are the caller's to count."""
        with self._lock:
            self._abandoned = True
            return self._in_flight

    def shutdown(self) -> None:
        with _withholding():
            try:
                self.inner.shutdown()
            except Exception:
                logger.debug("spanreplay: the OTLP exporter failed to shut down", exc_info=True)

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _cause(sink: _Sink, error: BaseException | None, endpoint: str, count: int) -> tuple[str, str]:
    """What went wrong, from the SDK's withheld lines and the HTTP answers, and what fixes it."""
    if error is not None:
        return (
            f"the exporter raised {type(error).__name__}: {error}",
            "this is a bug in the exporter; report it with the traceback (logged at DEBUG level).",
        )
    lines = [_message(r) for r in sink.records]
    codes = {code for code, _ in sink.answers}
    codes |= {a for r in sink.records for a in (r.args if isinstance(r.args, tuple) else ()) if type(a) is int}
    shown = _shown(sink, lines)
    lowered = " | ".join(lines).lower()
    if 413 in codes or "resource_exhausted" in lowered or "exceeds max_request_size" in lowered:
        return (
            f"it refused a batch of {count} span(s) as too large ({shown})",
            "raise the receiver's message limit (the Collector's otlp receiver: max_recv_msg_size_mib for gRPC, "
            "max_request_body_size for HTTP; collector-config/ sets both to 64 MiB), or send smaller batches "
            "with OTEL_BSP_MAX_EXPORT_BATCH_SIZE.",
        )
    if any(s in lowered for s in ("connection refused", "failed to connect", "failed to establish", "name or service")):
        return _down(shown)
    if codes & {429, 502, 503, 504} or "unavailable" in lowered or "too many requests" in lowered:
        return (
            f"it refused the spans as unavailable ({shown})",
            "the Collector is shedding load (its memory_limiter, or full queues towards Jaeger or Tempo): give it "
            "more memory, or check the backends it exports to.",
        )
    if "timed out" in lowered or "deadline_exceeded" in lowered or "read timeout" in lowered:
        return _slow(shown)
    if not codes:
        # No answer, and the SDK's last line does not say why (its retries ran out):
        # one connection attempt tells a dead endpoint from a silent one.
        probed = _probe(endpoint)
        if probed is not None:
            return _down(probed) if "refused" in probed or "unknown" in probed else _slow(probed)
        if "retries or shutdown" in lowered:
            return _slow("it accepts connections but sent no answer before the export timeout")
    return (
        f"the export failed ({shown})",
        "check the endpoint with OTEL_EXPORTER_OTLP_ENDPOINT and OTEL_EXPORTER_OTLP_PROTOCOL (grpc on 4317, "
        "http/protobuf on 4318).",
    )


def _down(shown: str) -> tuple[str, str]:
    return (
        f"nothing answers there ({shown})",
        "start the Collector (collector-config/: docker compose up -d), or point OTEL_EXPORTER_OTLP_ENDPOINT "
        "at one that runs.",
    )


def _slow(shown: str) -> tuple[str, str]:
    return (
        f"it did not answer in time ({shown})",
        "the Collector is overloaded or stuck: check its logs and its memory_limiter, or allow more time with "
        "OTEL_EXPORTER_OTLP_TIMEOUT (seconds).",
    )


def _probe(endpoint: str, timeout: float = 0.5) -> str | None:
    """Why a TCP connection to the endpoint fails, or None when it connects."""
    parsed = urlsplit(endpoint if "//" in endpoint else f"//{endpoint}")
    host = parsed.hostname
    if not host:
        return None
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError:
        return None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except ConnectionRefusedError:
        return f"connection to {host}:{port} refused"
    except socket.gaierror:
        return f"host {host} unknown"
    except TimeoutError:
        return f"no answer from {host}:{port} within {timeout:g} s"
    except OSError as exc:
        return f"connection to {host}:{port} failed: {exc.strerror or exc}"
    return None


def _message(record: logging.LogRecord) -> str:
    try:
        return record.getMessage()
    except Exception:
        return str(record.msg)


def _shown(sink: _Sink, lines: list[str]) -> str:
    """The most telling line: an HTTP answer, else the last line that is not the SDK's summary."""
    if sink.answers:
        code, reason = sink.answers[-1]
        return f"HTTP {code} {reason}".rstrip()
    detailed = [m for m in lines if "retries or shutdown" not in m]
    if not lines:
        return "no reason given"
    return " ".join((detailed[-1] if detailed else lines[-1]).split())[:400]


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
    def from_environment(cls) -> OtlpSpanProcessor:
        """The processor ``configure()`` adds: the exporter the standard variables describe.

        Raises:
            ConfigurationError: a protocol the Python exporter does not speak.
        """
        protocol = protocol_from_environment()
        exporter = build_exporter(protocol)
        return cls(GuardedExporter(exporter, factory=lambda: build_exporter(protocol)))

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
            self.exporter.export(batch)  # a GuardedExporter: never raises
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

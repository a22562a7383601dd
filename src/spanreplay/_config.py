"""``configure()``: the tracer provider, the durable file and the OTLP exporter."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

from . import _semconv as sc
from ._context import current_run_id
from .errors import ConfigurationError
from .exporters._file import DurableFileSpanProcessor

if TYPE_CHECKING:
    from .exporters.postgres import PostgresSpanProcessor

logger = logging.getLogger("spanreplay")

__all__ = ["Settings", "configure", "settings"]


class RunIdSpanProcessor(SpanProcessor):
    """Stamps the run id on every span started inside a run, whoever started it.

    A backend search by run id then finds the whole run, and the durable file
    keeps the spans of other instrumentations (HTTP clients, databases) beside
    the boundaries. Registered before the exporters so they see the attribute.
    """

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        run_id = current_run_id.get()
        if run_id is not None and sc.RUN_ID not in (span.attributes or {}):
            span.set_attribute(sc.RUN_ID, run_id)

    def on_end(self, span: ReadableSpan) -> None:
        pass


@dataclass
class Settings:
    """What ``configure()`` set up. ``spanreplay.settings()`` returns the current one."""

    provider: TracerProvider
    tracer: trace.Tracer
    file_processor: DurableFileSpanProcessor | None
    otlp_processor: SpanProcessor | None
    strict: bool
    postgres_processor: PostgresSpanProcessor | None = None

    @property
    def trace_dir(self) -> Path | None:
        return self.file_processor.trace_dir if self.file_processor else None


_settings: Settings | None = None
_lock = threading.Lock()


def configure(
    service_name: str | None = None,
    trace_dir: str | os.PathLike[str] | None = "traces",
    *,
    tracer_provider: TracerProvider | None = None,
    otlp: bool | None = None,
    fsync: bool = False,
    strict: bool | None = None,
    resource_attributes: dict[str, Any] | None = None,
    postgres: str | PostgresSpanProcessor | None = None,
) -> Settings:
    """Set up recording: a tracer provider with the durable file and, if asked, OTLP.

    Args:
        service_name: ``service.name`` of a provider spanreplay creates; defaults to
            ``OTEL_SERVICE_NAME`` or ``"agent"``.
        trace_dir: where the per-run OTLP/JSON-lines files go (``SPANREPLAY_TRACE_DIR``
            overrides the default); None writes no files.
        tracer_provider: an SDK ``TracerProvider`` to add spanreplay's processors to.
            Without it, spanreplay uses the global provider when the application has
            already set an SDK one, and otherwise creates one and makes it global.
        otlp: add an OTLP exporter. The default (None) adds one when the standard
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
            variable is set and spanreplay created the provider itself (an
            application's own provider exports the way the application set up).
        fsync: fsync the trace file after each span (survives power loss; slower).
        strict: raise spanreplay's own internal failures instead of logging them
            (tests use it; ``SPANREPLAY_STRICT=1`` turns it on). Never affects the
            exceptions of the agent's own code, which always pass through unchanged.
        resource_attributes: extra resource attributes for a provider spanreplay creates.
        postgres: also write every step to Postgres as it completes: a DSN
            (``postgresql://...``; ``SPANREPLAY_POSTGRES_DSN`` is the default) or a
            ``PostgresSpanProcessor`` (batched mode, other timeouts). See docs/postgres.md.

    Returns:
        The Settings in force. Calling ``configure()`` again replaces them.
    """
    global _settings
    if trace_dir == "traces":
        trace_dir = os.environ.get("SPANREPLAY_TRACE_DIR", "traces")
    with _lock:
        provider, created = _provider(tracer_provider, service_name, resource_attributes)
        previous = _settings
        if previous is not None and previous.provider is provider:
            # Reconfiguring the same provider: its processors cannot be removed, so the
            # file processor is retargeted (or silenced) instead of added twice.
            file_processor = previous.file_processor
            if file_processor is not None:
                file_processor.trace_dir = Path(trace_dir) if trace_dir is not None else file_processor.trace_dir
                file_processor.fsync = fsync
                file_processor.enabled = trace_dir is not None
            elif trace_dir is not None:
                file_processor = DurableFileSpanProcessor(trace_dir, fsync=fsync)
                provider.add_span_processor(file_processor)
            otlp_processor = previous.otlp_processor
        else:
            provider.add_span_processor(RunIdSpanProcessor())
            file_processor = None
            if trace_dir is not None:
                file_processor = DurableFileSpanProcessor(trace_dir, fsync=fsync)
                provider.add_span_processor(file_processor)
            otlp_processor = None
            if otlp or (otlp is None and created and _otlp_requested()):
                otlp_processor = BatchSpanProcessor(_otlp_exporter())
                provider.add_span_processor(otlp_processor)
        reused = previous.postgres_processor if previous is not None and previous.provider is provider else None
        postgres_processor = _postgres_processor(provider, postgres, reused)
        from . import __version__

        _settings = Settings(
            provider=provider,
            tracer=provider.get_tracer(sc.INSTRUMENTATION_NAME, __version__),
            file_processor=file_processor,
            otlp_processor=otlp_processor,
            strict=strict if strict is not None else os.environ.get("SPANREPLAY_STRICT", "") in ("1", "true"),
            postgres_processor=postgres_processor,
        )
        return _settings


def settings() -> Settings:
    """The Settings in force, configuring with defaults on first use."""
    current = _settings
    return current if current is not None else configure()


def _provider(
    given: TracerProvider | None, service_name: str | None, extra: dict[str, Any] | None
) -> tuple[TracerProvider, bool]:
    if given is not None:
        if not isinstance(given, TracerProvider):
            raise ConfigurationError(
                f"tracer_provider must be an opentelemetry.sdk.trace.TracerProvider, not "
                f"{type(given).__name__}; spanreplay adds span processors, which only the SDK "
                "provider has."
            )
        return given, False
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current, False
    attributes: dict[str, Any] = {SERVICE_NAME: service_name or os.environ.get("OTEL_SERVICE_NAME") or "agent"}
    attributes.update(extra or {})
    provider = TracerProvider(resource=Resource.create(attributes))
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:
        # Another provider won the race to be global; keep ours private rather than fail.
        logger.warning("spanreplay: a global tracer provider was already set; recording with a private one")
    return provider, True


def _postgres_processor(
    provider: TracerProvider, postgres: str | PostgresSpanProcessor | None, previous: PostgresSpanProcessor | None
) -> PostgresSpanProcessor | None:
    if postgres is None and previous is None and not os.environ.get("SPANREPLAY_POSTGRES_DSN"):
        return None  # psycopg is an optional dependency: imported only when Postgres is asked for
    from .exporters.postgres import attach

    return attach(provider, postgres, previous)


def _otlp_requested() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def _otlp_exporter() -> SpanExporter:
    protocol = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    )
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        return GrpcExporter()
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        return HttpExporter()
    raise ConfigurationError(
        f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not supported; use 'grpc' or 'http/protobuf'."
    )

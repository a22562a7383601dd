"""``configure()``: the tracer provider, the durable file and the OTLP exporter."""

from __future__ import annotations

import logging
import os
import threading
import warnings
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider

from spanreplay import semconv as sc
from spanreplay._accelerators import preflight, set_accelerate
from spanreplay._environment import environment
from spanreplay.errors import ConfigurationError
from spanreplay.masking import MaskingConfig
from spanreplay.model.events import RunSummary
from spanreplay.run.context import current_run_id

from .config_values import OtlpExport, PostgresStore, otlp_export_of, postgres_of
from .exporters._file import DurableFileSpanProcessor
from .exporters._otlp import OtlpSpanProcessor
from .exporters._otlp_dicts import attributes_of
from .exporters._otlp_endpoint import resource as otlp_resource
from .keep import KeepPolicy, RunTally, policy_of
from .settings import Settings, current_settings, install, is_configured, masker, masker_of

if TYPE_CHECKING:
    from .postgres.processor import PostgresSpanProcessor

logger = logging.getLogger("spanreplay")

__all__ = [
    "Settings",
    "configure",
    "current_settings",
    "is_configured",
    "masker",
    "recording_into",
    "reset",
    "settings",
]

# configure()'s trace_dir when the caller names none: SPANREPLAY_TRACE_DIR, else "traces".
# A sentinel, so that an explicit trace_dir="traces" is taken as said.
_DEFAULT_TRACE_DIR: Any = type("DefaultTraceDir", (), {"__repr__": lambda self: "'traces'"})()


class RunIdSpanProcessor(SpanProcessor):
    """Stamps the run id on every span started inside a run, whoever started it.

    A backend search by run id then finds the whole run, and the durable file
    keeps the spans of other instrumentations (HTTP clients, databases) beside
    the boundaries. Registered before the exporters so they see the attribute.
    """

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        run_id = current_run_id.get()
        if run_id is not None and sc.RUN_ID not in attributes_of(span):
            span.set_attribute(sc.RUN_ID, run_id)

    def on_end(self, span: ReadableSpan) -> None:
        pass


@dataclass
class _Attached:
    """The processors spanreplay added to one provider. An SDK provider cannot remove
    a processor, so a later ``configure()`` reuses, retargets or silences these."""

    owned: bool
    file_processor: DurableFileSpanProcessor | None = None
    otlp_processor: OtlpSpanProcessor | None = None
    postgres_processor: PostgresSpanProcessor | None = None
    tally: RunTally | None = None


# configure(otlp=None): an exporter when the OTEL_EXPORTER_OTLP_* variables ask for one.
_OTLP_AS_THE_ENVIRONMENT_SAYS: Final = OtlpExport(enabled=None)


@dataclass(frozen=True)
class _Resolved:
    """What ``configure()`` (or a first run without it) asks for, its keywords resolved:
    the value objects unpacked, the deprecated names mapped and the defaults filled in."""

    trace_dir: str | os.PathLike[str] | None
    service_name: str | None = None
    tracer_provider: TracerProvider | None = None
    resource_attributes: dict[str, Any] | None = None
    otlp: OtlpExport = _OTLP_AS_THE_ENVIRONMENT_SAYS
    fsync: bool = False
    raise_internal_errors: bool | None = None
    postgres: str | PostgresSpanProcessor | None = None
    postgres_commit: str | None = None
    masking: MaskingConfig | bool | None = None
    keep: KeepPolicy | None = None


_lock = threading.Lock()
_attached: weakref.WeakKeyDictionary[TracerProvider, _Attached] = weakref.WeakKeyDictionary()


def configure(  # noqa: PLR0913 -- public keyword options; value objects sit beside them, not in place of them
    service_name: str | None = None,
    trace_dir: str | os.PathLike[str] | None = _DEFAULT_TRACE_DIR,
    *,
    tracer_provider: TracerProvider | None = None,
    otlp: bool | OtlpExport | None = None,
    fsync: bool = False,
    raise_internal_errors: bool | None = None,
    resource_attributes: dict[str, Any] | None = None,
    postgres: str | PostgresStore | PostgresSpanProcessor | None = None,
    masking: MaskingConfig | bool | None = None,
    strict: bool | None = None,
    keep_ok: float | None = None,
    keep: Callable[[RunSummary], bool] | KeepPolicy | None = None,
    postgres_commit: str | None = None,
    accelerate: bool | None = None,
) -> Settings:
    """Set up recording: a tracer provider with the durable file and, if asked, OTLP.

    Which provider records the spans:

    - ``tracer_provider=`` given: spanreplay adds its processors to it (tests pass a
      private one).
    - Otherwise, when the application already set a global SDK ``TracerProvider``
      (``trace.set_tracer_provider(...)``, or ``opentelemetry-instrument``),
      spanreplay adds its processors to that provider: the run and boundary spans
      then go through the application's own exporters too, with its resource.
      Call ``configure()`` after the application set its provider.
    - Otherwise spanreplay creates an SDK provider (``service.name`` from
      ``service_name``, ``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES`` or ``"agent"``)
      and makes it global.

    Calling ``configure()`` again never adds a processor twice: the processors it
    added to a provider before are retargeted (a new ``trace_dir``), silenced
    (``trace_dir=None``) or kept.

    Args:
        service_name: ``service.name`` of a provider spanreplay creates.
        trace_dir: where the per-run OTLP/JSON-lines files go; when not given,
            ``SPANREPLAY_TRACE_DIR``, else ``traces``. None writes no files.
        tracer_provider: an SDK ``TracerProvider`` to add spanreplay's processors to.
        otlp: add an OTLP exporter (gRPC or HTTP, set up by the standard
            ``OTEL_EXPORTER_OTLP_*`` variables). The default (None) adds one when
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is
            set, ``OTEL_TRACES_EXPORTER`` does not rule out ``otlp``, and spanreplay
            created the provider itself: an application's own provider already
            exports the way the application set it up. An ``OtlpExport`` says
            whether and also how (``protocol``, ``endpoint``).
        fsync: fsync the trace file after each span (survives power loss; slower).
        raise_internal_errors: raise spanreplay's own internal failures (an unwritable trace dir, a
            span that cannot be encoded) instead of logging them once per run and
            recording on with less telemetry. Tests use it; ``SPANREPLAY_STRICT=1``
            turns it on. It never changes the exceptions of the agent's own code,
            which always pass through unchanged.
        strict: the former name of ``raise_internal_errors`` (deprecated).
        resource_attributes: extra resource attributes for a provider spanreplay creates.
        postgres: also write every step to Postgres as it completes: a DSN
            (``postgresql://...``; ``SPANREPLAY_POSTGRES_DSN`` is the default) or a
            ``PostgresSpanProcessor`` (batched mode, other timeouts), or a ``PostgresStore``
            holding either and the commit mode. See docs/postgres.md.
        postgres_commit: how the rows of a ``postgres`` DSN are committed: ``"sync"``
            (the default; ``SPANREPLAY_POSTGRES_COMMIT`` sets it) waits for the server's
            WAL flush, ``"async"`` does not (``synchronous_commit=off``). Not beside a
            ``PostgresStore``, which holds its own.
        masking: how payloads are masked before they become span attributes: a
            ``spanreplay.masking.MaskingConfig`` (the value object for masking); None or
            True for the defaults (on); False to record payloads unmasked. See docs/masking.md.
        keep_ok: the share of successful runs kept once they end (0.1: one in ten,
            picked by a hash of the run id, so every process agrees); the trace file,
            salt and Postgres rows of the others are removed when they end. Failed and
            crashed runs are always kept. ``SPANREPLAY_KEEP_OK`` is the default; unset,
            every run is kept.
        keep: a callable given the ``RunSummary`` of a successful run (steps, model
            calls, tokens, usd) that keeps the run when it returns True, whatever its
            share (``lambda run: run.usd > 1``). Without ``keep_ok`` only the runs it
            asks for are kept. One that raises keeps the run. A ``KeepPolicy`` holds
            both (``keep=KeepPolicy(keep_ok=0.1, keep=...)``; not beside ``keep_ok``).
        accelerate: False turns off every speed shortcut that reads another
            library's private names (the direct replay of a plain Anthropic call,
            boundary spans started without the SDK's per-attribute checks, the
            in-place read of a span's attributes); the public paths then serve the
            same results, slower. None (the default) leaves it to
            ``SPANREPLAY_ACCELERATE`` (on unless ``0``, ``false``, ``no`` or ``off``).
            An accelerator whose private names a library no longer has turns itself
            off, with one log line, whatever this says. See docs/architecture.md.

    Returns:
        The Settings in force. Calling ``configure()`` again replaces them.

    Raises:
        ConfigurationError: ``tracer_provider`` is not an SDK provider; or, under
            ``raise_internal_errors``, the OTLP variables ask for a protocol that cannot be set up; or
            ``keep_ok`` (``SPANREPLAY_KEEP_OK``) is not a share from 0 to 1; or a value
            object is given beside the plain keyword it replaces (``keep_ok`` beside a
            ``KeepPolicy``, ``postgres_commit`` beside a ``PostgresStore``).
    """
    if trace_dir is _DEFAULT_TRACE_DIR:
        trace_dir = _default_trace_dir()
    if strict is not None:
        warnings.warn(
            "configure(strict=) is now configure(raise_internal_errors=); strict= goes in a later release.",
            DeprecationWarning,
            stacklevel=2,
        )
        if raise_internal_errors is None:
            raise_internal_errors = strict
    store, commit = postgres_of(postgres, postgres_commit)
    policy = policy_of(keep_ok, keep)
    set_accelerate(accelerate=accelerate)
    resolved = _Resolved(
        trace_dir,
        service_name=service_name,
        tracer_provider=tracer_provider,
        resource_attributes=resource_attributes,
        otlp=otlp_export_of(otlp=otlp),
        fsync=fsync,
        raise_internal_errors=raise_internal_errors,
        postgres=store,
        postgres_commit=commit,
        masking=masking,
        keep=policy,
    )
    return _configure(resolved, make_global=True)


def _configure(resolved: _Resolved, *, make_global: bool) -> Settings:
    raise_internal_errors = resolved.raise_internal_errors
    if raise_internal_errors is None:
        raise_internal_errors = environment().raise_internal_errors
    trace_dir, fsync, keep = resolved.trace_dir, resolved.fsync, resolved.keep
    with _lock:
        provider, created = _provider(
            resolved.tracer_provider, resolved.service_name, resolved.resource_attributes, make_global=make_global
        )
        attached = _attached.get(provider)
        if attached is None:
            attached = _attached[provider] = _Attached(owned=created)
            # First, so that the processors after it see the run id it stamps.
            provider.add_span_processor(RunIdSpanProcessor())
        tallied = keep is not None and keep.keep is not None
        if tallied and attached.tally is None:
            # Only for a keep= callable: a span processor on every span's path costs time.
            attached.tally = RunTally()
            provider.add_span_processor(attached.tally)
        if attached.tally is not None:
            attached.tally.active = tallied

        file_processor = attached.file_processor
        if trace_dir is not None:
            if file_processor is None:
                file_processor = DurableFileSpanProcessor(
                    trace_dir, fsync=fsync, raise_internal_errors=raise_internal_errors
                )
                provider.add_span_processor(file_processor)
                attached.file_processor = file_processor
            else:
                file_processor.retarget(trace_dir, fsync=fsync, raise_internal_errors=raise_internal_errors)
        elif file_processor is not None:
            file_processor.enabled = False
        for other, processors in list(_attached.items()):
            # Runs now record through ``provider``: an earlier provider's file stays quiet.
            if other is not provider and processors.file_processor is not None:
                processors.file_processor.enabled = False

        otlp = resolved.otlp
        exporting = otlp.enabled or (otlp.enabled is None and attached.owned and _otlp_requested())
        if attached.otlp_processor is None and exporting:
            attached.otlp_processor = _otlp_processor(provider, otlp, raise_internal_errors=raise_internal_errors)

        attached.postgres_processor = _postgres_processor(
            provider, resolved.postgres, attached.postgres_processor, resolved.postgres_commit
        )
        from spanreplay._version import __version__

        configured = Settings(
            provider=provider,
            tracer=provider.get_tracer(sc.INSTRUMENTATION_NAME, __version__),
            file_processor=file_processor if trace_dir is not None else None,
            otlp_processor=attached.otlp_processor,
            raise_internal_errors=raise_internal_errors,
            postgres_processor=attached.postgres_processor,
            masker=masker_of(masking=resolved.masking),
            keep=keep,
            tally=attached.tally,
        )
        install(configured)
    # Outside the lock: a failed check logs. A run started from here on uses what it says.
    preflight()
    return configured


def settings() -> Settings:
    """The Settings in force, configuring with defaults on first use.

    A run recorded before any ``configure()`` call configures with the defaults
    (``SPANREPLAY_TRACE_DIR`` or ``traces``, OTLP when the standard variables ask
    for it), on the global SDK provider when the application has set one, and
    otherwise on a provider of spanreplay's own that it does not make global: an
    application that sets its provider later still can. Say it once, at INFO.
    """
    current = current_settings()
    if current is not None:
        return current
    trace_dir = _default_trace_dir()
    logger.info(
        "spanreplay: recording without configure(); using the defaults (trace files in %s). Call "
        "spanreplay.configure() at start-up to choose, or to record through your own tracer provider.",
        trace_dir,
    )
    return _configure(_Resolved(trace_dir, keep=_environment_policy()), make_global=False)


def _environment_policy() -> KeepPolicy | None:
    """``SPANREPLAY_KEEP_OK`` for a run that configures on first use: a bad value keeps every
    run (recording fails open) and says why; ``configure()`` raises it instead."""
    try:
        return policy_of(None, None)
    except ConfigurationError as exc:
        logger.error("spanreplay: %s Every run is kept until it is fixed.", exc)
        return None


def _default_trace_dir() -> str:
    """Where trace files go when no trace_dir is named: ``SPANREPLAY_TRACE_DIR``, else ``traces``."""
    return environment().trace_dir or "traces"


def reset() -> None:
    """Forget the configuration, for tests and notebooks: the next run configures anew.

    The processors spanreplay added to a provider stay on it (an OpenTelemetry SDK
    provider cannot drop one), but they go quiet: no more trace files, OTLP
    exports or Postgres rows from them; spans already handed to an exporter are
    flushed. A provider spanreplay made global stays global (OpenTelemetry sets the
    global provider once per process).
    """
    set_accelerate(accelerate=None)
    with _lock:
        install(None)
        for attached in list(_attached.values()):
            if attached.file_processor is not None:
                attached.file_processor.enabled = False
            if attached.tally is not None:
                attached.tally.active = False
            for processor in (attached.otlp_processor, attached.postgres_processor):
                if processor is not None:
                    try:
                        processor.shutdown()
                    except Exception:
                        logger.exception("spanreplay: could not shut down %r on reset()", processor)
            attached.otlp_processor = None
            attached.postgres_processor = None


@contextmanager
def recording_into(trace_dir: str | os.PathLike[str]) -> Iterator[Settings]:
    """Record the runs started in the block into ``trace_dir`` alone, then put back what was in force.

    For a test that records its own trace: the spans go through a private provider
    to one file processor, not to the application's provider, its exporters or the
    files ``configure()`` set up; the masking in force is kept (a conftest's
    ``configure(masking=...)`` masks the test's trace too). Internal failures are
    raised, so that a trace is never saved incomplete. Afterwards the settings in
    force before are in force again (none, when ``configure()`` had not been called).
    """
    from spanreplay._version import __version__

    with _lock:
        previous = current_settings()
    preflight()
    provider = TracerProvider(resource=otlp_resource(None, None))
    file_processor = DurableFileSpanProcessor(trace_dir, raise_internal_errors=True)
    provider.add_span_processor(RunIdSpanProcessor())
    provider.add_span_processor(file_processor)
    scoped = Settings(
        provider=provider,
        tracer=provider.get_tracer(sc.INSTRUMENTATION_NAME, __version__),
        file_processor=file_processor,
        otlp_processor=None,
        raise_internal_errors=True,
        masker=previous.masker if previous is not None and previous.masker is not None else masker_of(masking=None),
    )
    with _lock:
        install(scoped)
    try:
        yield scoped
    finally:
        with _lock:
            if current_settings() is scoped:
                install(previous)
        provider.shutdown()


def _provider(
    given: TracerProvider | None, service_name: str | None, extra: dict[str, Any] | None, *, make_global: bool
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
    provider = TracerProvider(resource=otlp_resource(service_name, extra))
    if not make_global:
        return provider, True
    trace.set_tracer_provider(provider)
    if trace.get_tracer_provider() is not provider:
        # Another provider won the race to be global; keep ours private rather than fail.
        logger.warning("spanreplay: a global tracer provider was already set; recording with a private one")
    return provider, True


def _postgres_processor(
    provider: TracerProvider,
    postgres: str | PostgresSpanProcessor | None,
    previous: PostgresSpanProcessor | None,
    commit: str | None,
) -> PostgresSpanProcessor | None:
    if postgres is None and previous is None and commit is None and not environment().postgres_dsn:
        return None  # psycopg is an optional dependency: imported only when Postgres is asked for
    from .postgres.exporter import attach

    return attach(provider, postgres, previous, commit)


def _otlp_requested() -> bool:
    """What the standard variables say: an endpoint is set and the exporter list allows otlp."""
    exporters = os.environ.get("OTEL_TRACES_EXPORTER")
    if exporters is not None and "otlp" not in {e.strip().lower() for e in exporters.split(",")}:
        return False  # "none", or another exporter the application chose
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def _otlp_processor(
    provider: TracerProvider, otlp: OtlpExport, *, raise_internal_errors: bool
) -> OtlpSpanProcessor | None:
    try:
        processor = OtlpSpanProcessor.from_environment(otlp.protocol, otlp.endpoint)
    except Exception:
        if raise_internal_errors:
            raise
        logger.exception("spanreplay could not set up the OTLP exporter; recording to the trace files only")
        return None
    provider.add_span_processor(processor)
    return processor

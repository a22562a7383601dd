"""The values ``configure()`` takes beside its plain keywords: ``OtlpExport`` and ``PostgresStore``.

The plain keywords stay for the common case (``otlp=True``, ``postgres="postgresql://..."``,
``postgres_commit="async"``); a value says the same and more in one place, and checks
itself when it is made, naming the value that is wrong and how to write it. The keep
policy's value is ``KeepPolicy`` (``keep``) and the masking one is
``spanreplay.masking.MaskingConfig``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from spanreplay.errors import ConfigurationError

from .exporters._otlp_endpoint import PROTOCOLS

if TYPE_CHECKING:
    from .postgres.processor import PostgresSpanProcessor

__all__ = ["OtlpExport", "PostgresStore", "otlp_export_of", "postgres_of"]

COMMIT_MODES: Final = ("sync", "async")
_SCHEMES: Final = ("http://", "https://")


@dataclass(frozen=True)
class OtlpExport:
    """Whether and how ``configure()`` exports spans over OTLP: ``configure(otlp=OtlpExport(...))``.

    ``configure(otlp=True)`` is ``OtlpExport()``, ``otlp=False`` is ``OtlpExport(enabled=False)``
    and ``otlp=None`` (the default) is ``OtlpExport(enabled=None)``.

    Args:
        enabled: True adds an OTLP exporter; False adds none; None adds one when
            ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set,
            ``OTEL_TRACES_EXPORTER`` does not rule out ``otlp``, and spanreplay created the
            provider itself. A later ``configure()`` keeps the exporter an earlier one added.
        protocol: ``"grpc"`` or ``"http/protobuf"``; None reads ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL``
            or ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``"http/protobuf"``.
        endpoint: where to send, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is written
            (``http://collector:4318``; ``/v1/traces`` is added for HTTP); None reads the
            standard variables. Headers, certificates and timeouts still come from them.

    Raises:
        ConfigurationError: ``enabled`` is not True, False or None, ``protocol`` is not one
            the OpenTelemetry Python exporter speaks, or ``endpoint`` is not an http(s) URL.
    """

    enabled: bool | None = True
    protocol: str | None = None
    endpoint: str | None = None

    def __post_init__(self) -> None:
        if self.enabled is not None and not isinstance(self.enabled, bool):
            raise ConfigurationError(
                f"OtlpExport(enabled={self.enabled!r}) is not True, False or None; write enabled=True to export, "
                "enabled=False not to, or enabled=None to follow the OTEL_EXPORTER_OTLP_* variables."
            )
        if self.protocol is not None and self.protocol not in PROTOCOLS:
            raise ConfigurationError(
                f"OtlpExport(protocol={self.protocol!r}) is not a protocol the OpenTelemetry Python exporter "
                "speaks; write protocol='grpc' or protocol='http/protobuf', or leave it out to use "
                "OTEL_EXPORTER_OTLP_PROTOCOL."
            )
        if self.endpoint is not None and (
            not isinstance(self.endpoint, str) or not self.endpoint.startswith(_SCHEMES) or self.endpoint in _SCHEMES
        ):
            raise ConfigurationError(
                f"OtlpExport(endpoint={self.endpoint!r}) is not an http(s) URL; write it as "
                "OTEL_EXPORTER_OTLP_ENDPOINT is written (endpoint='http://collector:4318'), or leave it out to "
                "use the OTEL_EXPORTER_OTLP_* variables."
            )
        if self.enabled is False and (self.protocol is not None or self.endpoint is not None):
            raise ConfigurationError(
                f"OtlpExport(enabled=False, protocol={self.protocol!r}, endpoint={self.endpoint!r}) exports "
                "nothing, so its protocol and endpoint are never used; drop enabled=False to export, or "
                "drop protocol= and endpoint=."
            )


@dataclass(frozen=True)
class PostgresStore:
    """Where ``configure()`` writes every step as it completes: ``configure(postgres=PostgresStore(...))``.

    ``configure(postgres=DSN, postgres_commit=MODE)`` is ``PostgresStore(dsn=DSN, commit=MODE)``,
    ``configure(postgres=processor)`` is ``PostgresStore(processor=processor)``. See docs/postgres.md.

    Args:
        dsn: the database (``postgresql://USER@HOST:PORT/DATABASE``); None (with no
            ``processor``) uses ``SPANREPLAY_POSTGRES_DSN`` when it is set.
        processor: a ``spanreplay.postgres.PostgresSpanProcessor`` built by the caller
            (batched mode, other timeouts), in place of ``dsn``.
        commit: ``"sync"`` (the default; ``SPANREPLAY_POSTGRES_COMMIT`` sets it) waits for the
            server's WAL flush, ``"async"`` does not (``synchronous_commit=off``). A
            processor brings its own: ``commit`` may only repeat it.

    Raises:
        ConfigurationError: both ``dsn`` and ``processor``; a ``dsn`` that is not a
            non-empty string; a ``processor`` that is not a ``PostgresSpanProcessor``;
            ``commit`` not ``"sync"`` or ``"async"``, or not the processor's.
    """

    dsn: str | None = None
    processor: PostgresSpanProcessor | None = None
    commit: str | None = None

    def __post_init__(self) -> None:
        if self.dsn is not None and self.processor is not None:
            raise ConfigurationError(
                "PostgresStore(dsn=..., processor=...) names the database twice; give dsn= alone, or "
                "processor= alone (the processor has its own DSN)."
            )
        if self.dsn is not None and (not isinstance(self.dsn, str) or not self.dsn.strip()):
            raise ConfigurationError(
                f"PostgresStore(dsn={self.dsn!r}) is not a DSN; write dsn='postgresql://USER@HOST:PORT/DATABASE', "
                "or leave it out to use SPANREPLAY_POSTGRES_DSN."
            )
        if self.commit is not None:
            mode = self.commit.strip().lower() if isinstance(self.commit, str) else self.commit
            if mode not in COMMIT_MODES:
                raise ConfigurationError(
                    f'PostgresStore(commit={self.commit!r}) is not a commit mode; write commit="sync" (the '
                    'default: each commit waits for the server to flush it) or commit="async" '
                    "(synchronous_commit=off). See docs/postgres.md."
                )
            object.__setattr__(self, "commit", mode)
        if self.processor is not None:
            from .postgres.processor import PostgresSpanProcessor

            if not isinstance(self.processor, PostgresSpanProcessor):
                raise ConfigurationError(
                    f"PostgresStore(processor={self.processor!r}) is not a PostgresSpanProcessor; build one with "
                    "spanreplay.postgres.PostgresSpanProcessor(dsn, ...), or pass dsn= instead."
                )
            if self.commit is not None and self.commit != self.processor.postgres_commit:
                raise ConfigurationError(
                    f"PostgresStore(commit={self.commit!r}) contradicts the processor given, which commits "
                    f"{self.processor.postgres_commit!r}; build it with PostgresSpanProcessor(dsn, "
                    f"postgres_commit={self.commit!r}), or drop commit=."
                )


def otlp_export_of(*, otlp: OtlpExport | bool | None) -> OtlpExport:
    """``configure(otlp=)`` as an ``OtlpExport``: a plain keyword is taken as it always was."""
    if isinstance(otlp, OtlpExport):
        return otlp
    return OtlpExport(enabled=None if otlp is None else bool(otlp))


def postgres_of(
    postgres: PostgresStore | str | PostgresSpanProcessor | None, commit: str | None
) -> tuple[str | PostgresSpanProcessor | None, str | None]:
    """``configure(postgres=, postgres_commit=)`` as the DSN or processor and commit mode to attach.

    A ``PostgresStore`` is unpacked; plain keywords pass as they are, checked where they are used.

    Raises:
        ConfigurationError: ``postgres_commit=`` given beside a ``PostgresStore``.
    """
    if not isinstance(postgres, PostgresStore):
        return postgres, commit
    if commit is not None:
        raise ConfigurationError(
            f"configure(postgres_commit={commit!r}) is given beside configure(postgres=PostgresStore(...)); the "
            f"store holds the commit mode: write PostgresStore(..., commit={commit!r}) and drop postgres_commit=."
        )
    return postgres.processor if postgres.processor is not None else postgres.dsn, postgres.commit

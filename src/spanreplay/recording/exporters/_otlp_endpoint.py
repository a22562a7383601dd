"""Which OTLP exporter and resource the standard ``OTEL_*`` variables describe.

``build_exporter`` makes the OpenTelemetry SDK's own exporter (gRPC or
HTTP/protobuf); ``resource`` the resource of a provider spanreplay creates.
"""

from __future__ import annotations

import os
from typing import Any, Final

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace.export import SpanExporter

from spanreplay import semconv as sc
from spanreplay.errors import ConfigurationError

from ._otlp_failures import note_response

PROTOCOLS: Final = ("grpc", "http/protobuf")
_DEFAULT_SERVICE: Final = "agent"


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
    environment = found.get(sc.DEPLOYMENT_ENVIRONMENT_NAME, found.get(sc.DEPLOYMENT_ENVIRONMENT))
    if environment is not None:
        found.setdefault(sc.DEPLOYMENT_ENVIRONMENT_NAME, environment)
        found.setdefault(sc.DEPLOYMENT_ENVIRONMENT, environment)
    return Resource(found, created.schema_url)


def protocol_from_environment() -> str:
    return (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    ).strip()


def traces_url(endpoint: str) -> str:
    """The HTTP traces URL of a base endpoint, as ``OTEL_EXPORTER_OTLP_ENDPOINT`` is read: ``/v1/traces`` added."""
    base = endpoint.rstrip("/")
    return base if base.endswith("/v1/traces") else base + "/v1/traces"


def build_exporter(
    protocol: str | None = None, *, timeout: float | None = None, endpoint: str | None = None
) -> SpanExporter:
    """The SDK's OTLP span exporter for ``protocol`` (default: the standard variables).

    ``endpoint`` (``http://collector:4318``), when given, is used in place of the
    ``OTEL_EXPORTER_OTLP_*ENDPOINT`` variables.

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
        return GrpcExporter(endpoint=endpoint, timeout=timeout, retryable_error_codes=retryable)
    if protocol == "http/protobuf":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

        url = traces_url(endpoint) if endpoint is not None else None
        if os.environ.get("OTEL_PYTHON_EXPORTER_OTLP_HTTP_TRACES_CREDENTIAL_PROVIDER"):
            return HttpExporter(endpoint=url, timeout=timeout)  # the application's own session, with its credentials
        import requests

        # The SDK logs no status once its retries run out ("due to timeout, max
        # retries or shutdown"); a response hook keeps the status for the report.
        session = requests.Session()
        session.hooks["response"].append(note_response)
        return HttpExporter(endpoint=url, timeout=timeout, session=session)
    raise ConfigurationError(
        f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol!r} is not a protocol the OpenTelemetry Python exporter "
        "speaks; set it to 'grpc' or 'http/protobuf'."
    )

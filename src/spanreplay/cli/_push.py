"""``spanreplay push SOURCE --endpoint URL``: send recorded spans to an OTLP endpoint, ids and times kept.

The SDK's exporters can only send spans the SDK made (their ids come from its
span context), so push builds the OTLP protobuf itself from the spans a reader
yields: the original trace and span ids, parents, timestamps, resource and
scope. Duplicates are dropped the way the loader drops them (a run's root is
in its file twice: as ``running`` when it starts and again when it ends; the
ended copy wins, and a crashed run's only copy is sent as it is). A request the
endpoint refuses as too large is split in two until it fits.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import click
import orjson
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span, Status

from spanreplay import semconv as sc
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import iter_spans

from ._common import BadInput, console

PROTOCOLS: Final = ("http/protobuf", "grpc")
_TOO_LARGE: Final = "too large"
_RETRYABLE_HTTP: Final = frozenset({429, 502, 503, 504})
_ATTEMPTS: Final = 4
_INT64: Final = range(-(2**63), 2**63)


class PushFailed(Exception):
    """The endpoint did not take a request; ``reason`` says why, ``too_large`` whether splitting helps."""

    def __init__(self, reason: str, *, too_large: bool = False, retry: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.too_large = too_large
        self.retry = retry


@click.command("push")
@click.argument("source")
@click.option(
    "--endpoint",
    required=True,
    metavar="URL",
    help="The OTLP endpoint: http://HOST:4318 (HTTP; /v1/traces is added) or http://HOST:4317 for gRPC.",
)
@click.option(
    "--protocol",
    type=click.Choice(PROTOCOLS),
    default=None,
    help="OTLP over HTTP/protobuf or gRPC [default: OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf].",
)
@click.option("--run", "run_ids", multiple=True, metavar="RUN", help="Send only this run (repeat for several).")
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="NAME=VALUE",
    help="A header for every request (repeatable); OTEL_EXPORTER_OTLP_HEADERS is read too.",
)
@click.option(
    "--batch-size", default=512, show_default=True, type=click.IntRange(1, 100_000), help="Most spans per request."
)
@click.option(
    "--timeout",
    default=10.0,
    show_default=True,
    type=click.FloatRange(0.1, 600),
    help="Seconds to wait for each request.",
)
def push_command(
    source: str,
    endpoint: str,
    protocol: str | None,
    run_ids: tuple[str, ...],
    headers: tuple[str, ...],
    batch_size: int,
    timeout: float,
) -> None:
    """Send the spans in SOURCE to an OTLP endpoint, with their original ids and timestamps.

    SOURCE is anything `spanreplay runs` reads: the durable files under
    ./traces, a Collector's export files, Jaeger or Tempo JSON. Use it to fill
    a backend (a Collector, Jaeger, Tempo, Phoenix) with runs recorded while it
    was down, or with runs from another machine. Every span of the source is
    sent, other instrumentations' spans included; --run keeps one run's.
    """
    protocol = protocol or _protocol_from_environment()
    sender = _Sender(endpoint, protocol, _headers(headers), timeout)
    wanted = set(run_ids)
    spans = _spans(source, wanted)
    result = _push(spans, sender, batch_size)
    if wanted - result.runs:
        _missing_runs(source, sorted(wanted - result.runs), result)
    if not result.spans:
        raise BadInput(f"{source} holds no spans to push; record a run first (spanreplay demo) or check the path.")
    runs = f" of {len(result.runs)} run(s)" if result.runs else ""
    console().print(
        f"pushed {result.spans} span(s){runs} from {source} to {sender.url} in {result.requests} request(s).",
        markup=False,
    )
    if result.rejected:
        console().print(
            f"warning: the endpoint accepted the requests but rejected {result.rejected} span(s): {result.rejections}",
            markup=False,
        )


def _protocol_from_environment() -> str:
    value = (
        os.environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    ).strip()
    return value if value in PROTOCOLS else "http/protobuf"


def _headers(given: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    variable = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or os.environ.get("OTEL_EXPORTER_OTLP_HEADERS")
    for item in [*(variable.split(",") if variable else []), *given]:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BadInput(f"Header {item!r} is not NAME=VALUE; write it as --header 'authorization=Bearer ...'.")
        out[urllib.parse.unquote(name.strip()).lower()] = urllib.parse.unquote(value.strip())
    return out


# --- reading: every span once, the ended copy preferred ----------------------------------


def _spans(source: str, runs: set[str]) -> Iterator[SpanRecord]:
    """The spans to send, streamed: ended spans as they come, unended ones once nothing ended replaced them."""
    contains = f'"{next(iter(runs))}"'.encode() if len(runs) == 1 else None
    sent: set[tuple[str, str]] = set()
    unended: dict[tuple[str, str], SpanRecord] = {}
    for span in iter_spans(source, contains=contains):
        if runs and span.attributes.get(sc.RUN_ID) not in runs:
            continue
        if span.key in sent:
            continue  # an exporter's retry, or the file's second copy of an ended root
        if span.ended:
            unended.pop(span.key, None)
            sent.add(span.key)
            yield span
        else:
            unended[span.key] = span
    yield from unended.values()  # runs that crashed: their roots never ended


# --- building OTLP protobuf ------------------------------------------------------------------


def _any_value(value: Any) -> AnyValue:
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        # Beyond int64 the protocol has no integer: the digits travel as text.
        return AnyValue(int_value=value) if value in _INT64 else AnyValue(string_value=str(value))
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, (bytes, bytearray)):
        return AnyValue(bytes_value=bytes(value))
    if isinstance(value, Mapping):
        out = AnyValue()
        out.kvlist_value.values.extend(_key_values(value))
        return out
    if isinstance(value, (list, tuple)):
        out = AnyValue()
        out.array_value.values.extend(_any_value(v) for v in value)
        return out
    if value is None:
        return AnyValue()
    return AnyValue(string_value=str(value))


def _key_values(attributes: Mapping[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=_any_value(value)) for key, value in attributes.items()]


def _id(hex_id: str) -> bytes:
    return bytes.fromhex(hex_id) if hex_id else b""


def _span(record: SpanRecord) -> Span:
    span = Span(
        trace_id=_id(record.trace_id),
        span_id=_id(record.span_id),
        trace_state=record.trace_state,
        parent_span_id=_id(record.parent_span_id or ""),
        name=record.name,
        kind=record.kind,  # type: ignore[arg-type]  # OTLP's numbers, as SpanRecord keeps them
        start_time_unix_nano=record.start_ns,
        end_time_unix_nano=record.end_ns,
        attributes=_key_values(record.attributes),
        dropped_attributes_count=record.dropped_attributes_count,
        dropped_events_count=record.dropped_events_count,
        dropped_links_count=record.dropped_links_count,
        status=Status(code=record.status_code, message=record.status_message),  # type: ignore[arg-type]
    )
    for event in record.events:
        span.events.add(
            time_unix_nano=event.time_ns,
            name=event.name,
            attributes=_key_values(event.attributes),
            dropped_attributes_count=event.dropped_attributes_count,
        )
    for link in record.links:
        span.links.add(
            trace_id=_id(link.trace_id),
            span_id=_id(link.span_id),
            trace_state=link.trace_state,
            attributes=_key_values(link.attributes),
            dropped_attributes_count=link.dropped_attributes_count,
        )
    return span


def request_for(spans: Iterable[SpanRecord]) -> ExportTraceServiceRequest:
    """One request: spans grouped under their resource and then their instrumentation scope."""
    request = ExportTraceServiceRequest()
    resources: dict[bytes, ResourceSpans] = {}
    scopes: dict[tuple[bytes, bytes], ScopeSpans] = {}
    for record in spans:
        resource_key = orjson.dumps(record.resource, option=orjson.OPT_SORT_KEYS, default=str)
        resource_spans = resources.get(resource_key)
        if resource_spans is None:
            resource_spans = request.resource_spans.add(resource=Resource(attributes=_key_values(record.resource)))
            resources[resource_key] = resource_spans
        scope_key = (
            resource_key,
            orjson.dumps(
                [record.scope_name, record.scope_version, record.scope_attributes],
                option=orjson.OPT_SORT_KEYS,
                default=str,
            ),
        )
        scope_spans = scopes.get(scope_key)
        if scope_spans is None:
            scope = InstrumentationScope(
                name=record.scope_name,
                version=record.scope_version,
                attributes=_key_values(record.scope_attributes),
            )
            scope_spans = resource_spans.scope_spans.add(scope=scope)
            scopes[scope_key] = scope_spans
        scope_spans.spans.append(_span(record))
    return request


# --- sending ---------------------------------------------------------------------------------


class _Sender:
    """Sends one request over HTTP/protobuf or gRPC, retrying what a retry can fix."""

    def __init__(self, endpoint: str, protocol: str, headers: dict[str, str], timeout: float) -> None:
        parsed = urllib.parse.urlsplit(endpoint)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise BadInput(
                f"--endpoint {endpoint!r} is not an http:// or https:// URL; write http://localhost:4318 "
                "(HTTP) or http://localhost:4317 with --protocol grpc."
            )
        self.protocol = protocol
        self.headers = headers
        self.timeout = timeout
        if protocol == "grpc":
            self.url = f"{parsed.hostname}:{parsed.port or (443 if parsed.scheme == 'https' else 4317)}"
            self._stub = _grpc_stub(self.url, secure=parsed.scheme == "https")
        else:
            path = parsed.path.rstrip("/")
            self.url = endpoint.rstrip("/") + ("" if path.endswith("/v1/traces") else "/v1/traces")

    def send(self, request: ExportTraceServiceRequest) -> ExportTraceServiceResponse:
        body = request.SerializeToString()
        for attempt in range(_ATTEMPTS):
            try:
                return self._http(body) if self.protocol == "http/protobuf" else self._grpc(request)
            except PushFailed as failed:
                if not failed.retry or attempt + 1 == _ATTEMPTS:
                    raise
            time.sleep(0.5 * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    def _http(self, body: bytes) -> ExportTraceServiceResponse:
        headers = {"content-type": "application/x-protobuf", **self.headers}
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return _response(answer.read())
        except urllib.error.HTTPError as error:
            detail = error.read()[:200].decode("utf-8", "replace").strip()
            reason = f"HTTP {error.code} {error.reason}" + (f": {detail}" if detail else "")
            raise PushFailed(reason, too_large=error.code == 413, retry=error.code in _RETRYABLE_HTTP) from None
        except (urllib.error.URLError, OSError) as error:
            cause = getattr(error, "reason", error)
            raise PushFailed(f"nothing answered: {cause}", retry=isinstance(cause, TimeoutError)) from None

    def _grpc(self, request: ExportTraceServiceRequest) -> ExportTraceServiceResponse:
        import grpc

        try:
            response: ExportTraceServiceResponse = self._stub.Export(
                request, timeout=self.timeout, metadata=tuple(self.headers.items())
            )
            return response
        except grpc.RpcError as error:
            code = error.code()
            reason = f"gRPC {code.name}: {error.details()}"
            retry = code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
            too_large = code is grpc.StatusCode.RESOURCE_EXHAUSTED
            raise PushFailed(reason, too_large=too_large, retry=retry and "failed to connect" not in reason) from None


def _grpc_stub(target: str, *, secure: bool) -> Any:
    import grpc
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2_grpc import TraceServiceStub

    channel = grpc.secure_channel(target, grpc.ssl_channel_credentials()) if secure else grpc.insecure_channel(target)
    return TraceServiceStub(channel)  # type: ignore[no-untyped-call]


def _response(body: bytes) -> ExportTraceServiceResponse:
    response = ExportTraceServiceResponse()
    if body:
        try:
            response.ParseFromString(body)
        except Exception:  # a receiver that answers 200 with some other body took the spans all the same
            return ExportTraceServiceResponse()
    return response


# --- pushing -----------------------------------------------------------------------------------


@dataclass
class _Result:
    spans: int = 0
    requests: int = 0
    rejected: int = 0
    rejections: str = ""
    runs: set[str] = field(default_factory=set)


def _push(spans: Iterable[SpanRecord], sender: _Sender, batch_size: int) -> _Result:
    result = _Result()
    batch: list[SpanRecord] = []
    for span in spans:
        batch.append(span)
        if len(batch) >= batch_size:
            _send(batch, sender, result)
            batch = []
    if batch:
        _send(batch, sender, result)
    return result


def _send(batch: list[SpanRecord], sender: _Sender, result: _Result) -> None:
    try:
        response = sender.send(request_for(batch))
    except PushFailed as failed:
        if failed.too_large and len(batch) > 1:
            middle = len(batch) // 2
            _send(batch[:middle], sender, result)
            _send(batch[middle:], sender, result)
            return
        raise BadInput(_failure(failed, batch, sender, result)) from None
    result.requests += 1
    result.spans += len(batch)
    result.runs.update(str(s.attributes[sc.RUN_ID]) for s in batch if isinstance(s.attributes.get(sc.RUN_ID), str))
    partial = response.partial_success
    if partial.rejected_spans:
        result.rejected += partial.rejected_spans
        result.rejections = partial.error_message or "no reason given"


def _failure(failed: PushFailed, batch: list[SpanRecord], sender: _Sender, result: _Result) -> str:
    sent = f" {result.spans} span(s) were sent before it; pushing again sends them again." if result.spans else ""
    if failed.too_large:
        span = batch[0]
        return (
            f"{sender.url} refused span {span.name!r} ({span.origin}) as too large on its own ({failed.reason}); "
            "raise the receiver's limit (the Collector's otlp receiver: max_recv_msg_size_mib for gRPC, "
            f"max_request_body_size for HTTP).{sent}"
        )
    if failed.reason.startswith("nothing answered") or "failed to connect" in failed.reason.lower():
        fix = "start the Collector (collector-config/: docker compose up -d) or check --endpoint and --protocol"
    else:
        fix = "check the endpoint's logs, then push again"
    return f"Could not push to {sender.url} ({failed.reason}); {fix}.{sent}"


def _missing_runs(source: str, missing: list[str], result: _Result) -> None:
    from spanreplay.api.loading import runs

    found = [r.run_id for r in runs(source)]
    listed = ", ".join(found[-5:]) if found else "none"
    sent = f" The {result.spans} span(s) of the other runs were pushed." if result.spans else ""
    raise BadInput(
        f"Run {', '.join(missing)} is not in {source} (it holds {len(found)} run(s); the latest: {listed}); "
        f"spanreplay runs {source} lists them.{sent}"
    )

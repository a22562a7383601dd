"""Local OTLP endpoints on 127.0.0.1 for the export tests: one that records, and ones that misbehave.

``HttpReceiver`` speaks OTLP/HTTP (protobuf) and can answer 200, 503 or 413, or
sleep before answering; ``GrpcReceiver`` is a real grpcio server that answers
with a status code, or refuses messages above a size limit the way gRPC itself
does (RESOURCE_EXHAUSTED). Both keep the raw request bytes they were sent.
"""

from __future__ import annotations

import gzip
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, Span


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Received:
    """One request as it arrived: path, headers (names in lower case) and the body, decompressed."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float = field(default_factory=time.monotonic)

    def parsed(self) -> ExportTraceServiceRequest:
        request = ExportTraceServiceRequest()
        request.ParseFromString(self.body)
        return request


def spans_in(requests: list[Received] | list[ExportTraceServiceRequest]) -> Iterator[tuple[ResourceSpans, Span]]:
    """Every (resource spans, span) pair in the requests."""
    for item in requests:
        request = item.parsed() if isinstance(item, Received) else item
        for resource_spans in request.resource_spans:
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    yield resource_spans, span


class HttpReceiver:
    """An OTLP/HTTP endpoint: ``mode`` is ``ok``, ``503``, ``413`` or ``sleep`` (``delay`` seconds, then 200).

    The mode may be changed while it runs (an outage that ends). With ``max_body``,
    a larger request body is answered 413, as the Collector's limit answers it.
    """

    def __init__(self, mode: str = "ok", *, delay: float = 0.0, max_body: int | None = None) -> None:
        self.mode = mode
        self.delay = delay
        self.max_body = max_body
        self.requests: list[Received] = []
        self.attempts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.attempts += 1
                mode = receiver.mode
                if receiver.max_body is not None and len(body) > receiver.max_body:
                    mode = "413"  # what the Collector answers above max_request_body_size
                if mode == "sleep":
                    time.sleep(receiver.delay)
                    mode = "ok"
                if mode == "ok":
                    encoding = self.headers.get("Content-Encoding", "")
                    if encoding == "gzip":
                        body = gzip.decompress(body)
                    elif encoding == "deflate":
                        body = zlib.decompress(body)
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    receiver.requests.append(Received(self.path, headers, body))
                    self._answer(200, "OK", trace_service_pb2.ExportTraceServiceResponse().SerializeToString())
                elif mode == "503":
                    self._answer(503, "Service Unavailable", b"memory limiter refused the data")
                elif mode == "413":
                    self._answer(413, "Request Entity Too Large", b"request body too large")
                else:
                    raise AssertionError(f"unknown mode {mode!r}")

            def _answer(self, code: int, reason: str, body: bytes) -> None:
                try:
                    self.send_response(code, reason)
                    self.send_header("Content-Type", "application/x-protobuf")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up waiting (the sleep mode)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # type: ignore[attr-defined]
        self.port = int(self._server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> HttpReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def spans(self) -> list[Span]:
        return [span for _, span in spans_in(self.requests)]


class _Service(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: GrpcReceiver) -> None:
        self.receiver = receiver

    def Export(
        self, request: ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.receiver.attempts += 1
        if self.receiver.code is not None:
            context.abort(self.receiver.code, self.receiver.details)
        self.receiver.requests.append(request)
        return trace_service_pb2.ExportTraceServiceResponse()


class GrpcReceiver:
    """An OTLP/gRPC endpoint that answers ``code`` (None: accepts), or refuses messages above ``max_receive`` bytes."""

    def __init__(
        self, code: grpc.StatusCode | None = None, *, details: str = "refused", max_receive: int | None = None
    ) -> None:
        self.code = code
        self.details = details
        self.requests: list[ExportTraceServiceRequest] = []
        self.attempts = 0
        options = [("grpc.max_receive_message_length", max_receive)] if max_receive else []
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=options)
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_Service(self), self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> GrpcReceiver:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(0).wait(5)

    def spans(self) -> list[Span]:
        return [span for _, span in spans_in(self.requests)]

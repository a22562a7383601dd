"""A local OTLP/HTTP (protobuf) receiver that counts the spans it is sent, run in a process of its own.

    python benchmarks/_otlp_counter.py        # prints its port on the first line of stdout

``POST /v1/traces`` parses each ``ExportTraceServiceRequest`` and counts its spans
(and distinct span ids, so a retried batch shows up as duplicates); ``GET /count``
answers the counts as JSON. It runs in its own process so that parsing the
agents' exports does not share their CPU accounting; it stops when its stdin closes.
"""

from __future__ import annotations

import gzip
import json
import sys
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OK_BODY = ExportTraceServiceResponse().SerializeToString()


class Counts:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests = 0
        self.spans = 0
        self.span_ids: set[bytes] = set()
        self.bad_requests = 0

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        ids = [
            span.span_id
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]
        with self.lock:
            self.requests += 1
            self.spans += len(ids)
            self.span_ids.update(ids)

    def as_json(self) -> bytes:
        with self.lock:
            return json.dumps(
                {
                    "requests": self.requests,
                    "spans": self.spans,
                    "distinct_spans": len(self.span_ids),
                    "bad_requests": self.bad_requests,
                }
            ).encode()


def serve() -> None:
    counts = Counts()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive: the exporter reuses its connection

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            encoding = self.headers.get("Content-Encoding", "")
            try:
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                counts.add(body)
            except Exception:
                with counts.lock:
                    counts.bad_requests += 1
                self._answer(400, b"bad request", "text/plain")
                return
            self._answer(200, OK_BODY, "application/x-protobuf")

        def do_GET(self) -> None:
            self._answer(200, counts.as_json(), "application/json")

        def _answer(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin (or dies)
    server.shutdown()


if __name__ == "__main__":
    serve()

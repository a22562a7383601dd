"""What an OTLP export failure says about itself, worded as its cause and its fix.

The SDK exporter logs a line for every failed attempt, and nothing once its
retries run out. While ``GuardedExporter.export`` runs, ``withholding`` keeps
those lines (and the HTTP answers, through ``note_response``) for the export's
own report instead, and ``cause`` reads them: refused as too large, nothing
listening, shedding load, too slow. Lines about the application's own
exporters, logged from other threads, pass as before.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

PUSH_HINT: Final = (
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


@dataclass
class Sink:
    """What one export said about itself: the SDK's log records and the HTTP answers."""

    records: list[logging.LogRecord] = field(default_factory=list)
    answers: list[tuple[int, str]] = field(default_factory=list)


class _Capture(threading.local):
    sink: Sink | None = None


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


def note_response(response: Any, *args: Any, **kwargs: Any) -> None:
    """A ``requests`` response hook: keeps the HTTP answer for the report (see ``build_exporter``)."""
    sink = _capture.sink
    if sink is not None:
        sink.answers.append((int(response.status_code), str(response.reason or "")))


_WITHHELD = _Withheld()
for _name in _SDK_LOGGERS:
    logging.getLogger(_name).addFilter(_WITHHELD)


@contextmanager
def withholding() -> Iterator[Sink]:
    """Within the block, this thread's SDK exporter lines and HTTP answers go to the sink it gives."""
    sink = Sink()
    previous, _capture.sink = _capture.sink, sink
    try:
        yield sink
    finally:
        _capture.sink = previous


def cause(sink: Sink, error: BaseException | None, endpoint: str, count: int) -> tuple[str, str]:
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


def _shown(sink: Sink, lines: list[str]) -> str:
    """The most telling line: an HTTP answer, else the last line that is not the SDK's summary."""
    if sink.answers:
        code, reason = sink.answers[-1]
        return f"HTTP {code} {reason}".rstrip()
    detailed = [m for m in lines if "retries or shutdown" not in m]
    if not lines:
        return "no reason given"
    return " ".join((detailed[-1] if detailed else lines[-1]).split())[:400]

"""The OTLP path when the Collector is down, slow or refusing: the agent never notices.

Each case stands up a real misbehaving endpoint on 127.0.0.1 (or none at all)
and records runs through ``configure(otlp=True)`` set up by the standard
variables. In every case the agent's boundaries return at full speed, no
exception reaches it, the durable trace file holds every step, the spans the
OTLP path lost are counted, and one log line names the cause and the fix.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import Decision, StaticSampler

import spanreplay
from helpers.otlp_receivers import GrpcReceiver, HttpReceiver, closed_port
from spanreplay.recording.exporters._otlp import GuardedExporter, OtlpSpanProcessor

STEPS = 200


@spanreplay.tool
def lookup(index: int) -> dict[str, Any]:
    return {"index": index, "text": "lorem ipsum " * 20}


def run_agent(steps: int = STEPS) -> tuple[str, float]:
    """One run of ``steps`` tool calls; its id and how long the agent took."""
    started = time.perf_counter()
    with spanreplay.record(agent="faulty") as run:
        for index in range(steps):
            lookup(index)
    return run.run_id, time.perf_counter() - started


@pytest.fixture
def otlp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, provider: TracerProvider) -> Callable[..., OtlpSpanProcessor]:
    """Configure spanreplay to export to ``endpoint`` over ``protocol``, as the standard variables say."""

    def setup(endpoint: str, protocol: str, **more: str) -> OtlpSpanProcessor:
        for name in list(os.environ):
            if name.startswith("OTEL_"):
                monkeypatch.delenv(name)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
        monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
        for name, value in more.items():
            monkeypatch.setenv(name, value)
        config = spanreplay.configure(
            trace_dir=tmp_path / "traces", tracer_provider=provider, otlp=True, raise_internal_errors=True
        )
        assert isinstance(config.otlp_processor, OtlpSpanProcessor)
        return config.otlp_processor

    return setup


def shut_down(processor: OtlpSpanProcessor) -> float:
    started = time.monotonic()
    processor.shutdown()
    return time.monotonic() - started


def spanreplay_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "spanreplay" and r.levelno >= logging.ERROR]


def sdk_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("opentelemetry") and r.levelno >= logging.INFO]


def _down_http() -> AbstractContextManager[Any]:
    return nullcontext(f"http://127.0.0.1:{closed_port()}")


def _down_grpc() -> AbstractContextManager[Any]:
    return nullcontext(f"http://127.0.0.1:{closed_port()}")


FAULTS: dict[str, tuple[Callable[[], AbstractContextManager[Any]], str, str, str]] = {
    # name: (endpoint, protocol, what the report says happened, what it says to do)
    "collector down (HTTP)": (_down_http, "http/protobuf", "nothing answers there", "start the Collector"),
    "collector down (gRPC)": (_down_grpc, "grpc", "nothing answers there", "start the Collector"),
    "HTTP 503": (lambda: HttpReceiver("503"), "http/protobuf", "refused the spans as unavailable", "memory_limiter"),
    "HTTP 413": (lambda: HttpReceiver("413"), "http/protobuf", "as too large", "max_request_body_size"),
    "HTTP slow": (lambda: HttpReceiver("sleep", delay=5), "http/protobuf", "did not answer in time", "overloaded"),
    "gRPC UNAVAILABLE": (
        lambda: GrpcReceiver(grpc.StatusCode.UNAVAILABLE, details="data refused due to high memory usage"),
        "grpc",
        "refused the spans as unavailable",
        "memory_limiter",
    ),
    "gRPC RESOURCE_EXHAUSTED (oversized batch)": (
        lambda: GrpcReceiver(max_receive=300),  # smaller than any one request
        "grpc",
        "as too large",
        "max_recv_msg_size_mib",
    ),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_failing_endpoint_never_reaches_the_agent_and_is_reported_once(
    fault: str,
    otlp: Callable[..., OtlpSpanProcessor],
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    make, protocol, what, fix = FAULTS[fault]
    caplog.set_level(logging.DEBUG)
    with make() as endpoint:
        url = endpoint if isinstance(endpoint, str) else endpoint.url
        processor = otlp(url, protocol)
        run_ids = []
        for _ in range(3):
            run_id, took = run_agent()
            run_ids.append(run_id)
            # 200 boundaries take a few milliseconds each at most; one export held in the
            # agent's thread would take a second (the timeout) or five (the slow endpoint).
            assert took < 2.0, f"the agent took {took:.2f} s for {STEPS} boundaries"
        shutdown_took = shut_down(processor)

    assert shutdown_took <= processor.shutdown_timeout + 0.5
    for run_id in run_ids:
        log = spanreplay.load(tmp_path / "traces", run_id)
        assert log.run.status == "ok"
        assert [e.input for e in log] == [{"index": i} for i in range(STEPS)]
    assert processor.stats.exported == 0
    assert processor.stats.dropped == 3 * (STEPS + 1)  # every boundary span and each run's root span
    errors = spanreplay_errors(caplog)
    assert len(errors) == 1, errors
    assert what in errors[0]
    assert fix in errors[0]
    assert "spanreplay push traces/" in errors[0]
    assert sdk_lines(caplog) == []  # the SDK's per-attempt lines about these exports are withheld


def test_an_outage_that_ends_is_reported_when_it_ends_and_the_next_one_again(
    otlp: Callable[..., OtlpSpanProcessor], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with HttpReceiver("503") as receiver:
        processor = otlp(receiver.url, "http/protobuf")
        run_agent(10)
        assert processor.force_flush(5000)
        assert len(spanreplay_errors(caplog)) == 1
        lost = processor.stats.dropped
        assert lost == 11

        receiver.mode = "ok"
        run_agent(10)
        assert processor.force_flush(5000)
        recovered = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert recovered == [f"spanreplay: {receiver.url}/v1/traces takes spans again; 11 span(s) did not reach it "
                             "during the outage. The local trace files hold them: `spanreplay push traces/ --endpoint "
                             "URL` sends them."]  # fmt: skip
        assert processor.stats.exported == 11
        assert {s.name for s in receiver.spans()} == {"invoke_agent faulty", "execute_tool lookup"}

        receiver.mode = "503"
        run_agent(10)
        assert processor.force_flush(5000)
        shut_down(processor)
    assert len(spanreplay_errors(caplog)) == 2  # once per outage
    assert processor.stats.dropped == 22


def test_a_full_queue_drops_and_counts_spans_instead_of_waiting(
    otlp: Callable[..., OtlpSpanProcessor], caplog: pytest.LogCaptureFixture
) -> None:
    with HttpReceiver("sleep", delay=3) as receiver:
        processor = otlp(
            receiver.url, "http/protobuf", OTEL_BSP_MAX_QUEUE_SIZE="50", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="10"
        )
        assert (processor.max_queue_size, processor.max_export_batch_size) == (50, 10)
        _, took = run_agent()
        assert took < 2.0
        shut_down(processor)
    assert processor.stats.dropped == STEPS + 1
    assert processor.stats.exported == 0
    assert len(spanreplay_errors(caplog)) == 1


def test_force_flush_waits_no_longer_than_asked(otlp: Callable[..., OtlpSpanProcessor]) -> None:
    with HttpReceiver("sleep", delay=5) as receiver:
        processor = otlp(receiver.url, "http/protobuf")
        run_agent(5)
        started = time.monotonic()
        assert processor.force_flush(300) is False
        assert time.monotonic() - started < 0.8
        shut_down(processor)


def test_a_healthy_endpoint_gets_every_span_in_batches(otlp: Callable[..., OtlpSpanProcessor]) -> None:
    with HttpReceiver("ok") as receiver:
        processor = otlp(receiver.url, "http/protobuf")
        run_agent()
        assert processor.force_flush(5000)
        shut_down(processor)
    spans = receiver.spans()
    assert len(spans) == STEPS + 1
    assert len({(s.trace_id, s.span_id) for s in spans}) == STEPS + 1
    assert processor.stats.exported == STEPS + 1
    assert processor.stats.dropped == 0
    assert {r.path for r in receiver.requests} == {"/v1/traces"}


class _Raising(SpanExporter):
    """An exporter that fails by raising, as a broken custom exporter would."""

    def export(self, spans: Any) -> SpanExportResult:
        raise RuntimeError("exporter bug")


def test_an_exporter_that_raises_is_counted_and_the_sender_carries_on(
    caplog: pytest.LogCaptureFixture, tmp_path: Path, provider: TracerProvider
) -> None:
    processor = OtlpSpanProcessor(_Raising(), schedule_delay=0.01)
    provider.add_span_processor(processor)
    spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, raise_internal_errors=True)
    for _ in range(2):
        run_agent(3)
        assert processor.force_flush(2000)
    processor.shutdown()
    assert processor.stats.dropped == 8
    assert processor.stats.failed_exports >= 2
    [error] = spanreplay_errors(caplog)
    assert "RuntimeError: exporter bug" in error


def test_the_applications_own_otlp_exporter_still_logs_its_failures(caplog: pytest.LogCaptureFixture) -> None:
    # The withheld lines are only those of spanreplay's own exports.
    app = TracerProvider()
    app.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"http://127.0.0.1:{closed_port()}/v1/traces", timeout=0.3))
    )
    with app.get_tracer("app").start_as_current_span("work"):
        pass
    app.shutdown()
    assert any("Failed to export" in line for line in sdk_lines(caplog))


def test_spans_recorded_but_not_sampled_are_not_sent() -> None:
    with HttpReceiver("ok") as receiver:
        exporter = GuardedExporter(OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces"))
        processor = OtlpSpanProcessor(exporter, schedule_delay=0.01)
        provider = TracerProvider(sampler=StaticSampler(Decision.RECORD_ONLY))
        provider.add_span_processor(processor)
        with provider.get_tracer("t").start_as_current_span("recorded only") as span:
            assert span.is_recording()
        assert processor.force_flush(2000)
        provider.shutdown()
    assert receiver.attempts == 0
    assert processor.stats == type(processor.stats)()


def test_a_forked_child_sends_its_own_spans_through_a_sender_of_its_own(
    otlp: Callable[..., OtlpSpanProcessor],
) -> None:
    with HttpReceiver("ok") as receiver:
        processor = otlp(receiver.url, "http/protobuf")
        parent_run, _ = run_agent(2)
        pid = os.fork()
        if pid == 0:  # the child: record, flush, and report by exit status only
            try:
                run_agent(3)
                ok = processor.force_flush(5000) and processor.stats.exported == 4
                os._exit(0 if ok else 1)
            finally:
                os._exit(2)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert processor.force_flush(5000)
        shut_down(processor)
    runs = {
        next(kv.value.string_value for kv in span.attributes if kv.key == "spanreplay.run.id")
        for span in receiver.spans()
    }
    assert parent_run in runs
    assert len(runs) == 2  # the parent's run and the child's
    assert processor.stats.exported == 3  # the parent counts only its own


def test_after_a_failure_batches_are_dropped_untried_until_the_backoff_ends(
    otlp: Callable[..., OtlpSpanProcessor], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A first backoff longer than the run, so a loaded machine cannot end it mid-run.
    monkeypatch.setattr("spanreplay.recording.exporters._otlp._FIRST_BACKOFF_S", 60.0)
    with HttpReceiver("503") as receiver:
        processor = otlp(receiver.url, "http/protobuf", OTEL_BSP_MAX_EXPORT_BATCH_SIZE="10")
        run_agent()  # 201 spans: 21 batches, all made within the first backoff
        shut_down(processor)
    assert processor.stats.dropped == STEPS + 1
    # One export, not 21: encoding batches for an endpoint that just refused would
    # take the interpreter from the agent for nothing. (The SDK may retry a 503 once
    # within that export's timeout.)
    assert processor.stats.failed_exports == 1
    assert receiver.attempts <= 2


def test_an_explicit_flush_tries_even_while_backed_off(otlp: Callable[..., OtlpSpanProcessor]) -> None:
    with HttpReceiver("503") as receiver:
        processor = otlp(receiver.url, "http/protobuf")
        run_agent(5)
        assert processor.force_flush(5000)
        receiver.mode = "ok"
        run_agent(5)
        assert processor.force_flush(5000)  # within the backoff, and sent all the same
        shut_down(processor)
    assert processor.stats.exported == 6
    assert len(receiver.requests) == 1
    assert len(receiver.spans()) == 6  # the second run, sent in one request

"""configure(): which provider records, which processors it gets, and what happens when telemetry fails."""

from __future__ import annotations

import gzip
import logging
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay


@spanreplay.tool
def search(query: str) -> list[str]:
    return [query, query[::-1]]


def _line_count(trace_dir: Path, run_id: str) -> int:
    return len((trace_dir / f"{run_id}.jsonl").read_bytes().splitlines())


def _record_one() -> str:
    with spanreplay.record(agent="cfg") as run:
        search("x")
    return run.run_id


# --- processors on a private provider ---------------------------------------------


def test_a_private_provider_records_through_its_own_exporters(
    trace_dir: Path, provider: TracerProvider, memory_exporter: InMemorySpanExporter
) -> None:
    config = spanreplay.settings()
    assert config.provider is provider
    assert config.trace_dir == trace_dir
    assert config.raise_internal_errors is True
    run_id = _record_one()
    assert {s.name for s in memory_exporter.get_finished_spans()} == {"invoke_agent cfg", "execute_tool search"}
    assert _line_count(trace_dir, run_id) == 3


def test_configuring_again_does_not_add_processors_twice(
    trace_dir: Path, provider: TracerProvider, memory_exporter: InMemorySpanExporter
) -> None:
    for _ in range(3):
        spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=True)
    run_id = _record_one()
    assert _line_count(trace_dir, run_id) == 3  # running root, tool, ended root: each once
    assert len(memory_exporter.get_finished_spans()) == 2


def test_switching_providers_and_back_does_not_add_processors_twice(
    tmp_path: Path, trace_dir: Path, provider: TracerProvider
) -> None:
    other = TracerProvider()
    spanreplay.configure(trace_dir=tmp_path / "other", tracer_provider=other, raise_internal_errors=True)
    first = _record_one()
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=True)
    second = _record_one()
    other.shutdown()
    assert _line_count(tmp_path / "other", first) == 3
    assert _line_count(trace_dir, second) == 3
    assert not (trace_dir / f"{first}.jsonl").exists()
    assert not (tmp_path / "other" / f"{second}.jsonl").exists()


def test_a_new_trace_dir_takes_the_next_runs(tmp_path: Path, trace_dir: Path, provider: TracerProvider) -> None:
    first = _record_one()
    spanreplay.configure(trace_dir=tmp_path / "elsewhere", tracer_provider=provider, raise_internal_errors=True)
    second = _record_one()
    assert (trace_dir / f"{first}.jsonl").exists()
    assert _line_count(tmp_path / "elsewhere", second) == 3
    assert not (trace_dir / f"{second}.jsonl").exists()


def test_no_trace_dir_writes_no_files_but_still_records_spans(
    tmp_path: Path, trace_dir: Path, provider: TracerProvider, memory_exporter: InMemorySpanExporter
) -> None:
    spanreplay.configure(trace_dir=None, tracer_provider=provider, raise_internal_errors=True)
    assert spanreplay.settings().trace_dir is None
    _record_one()
    assert not trace_dir.exists()
    assert len(memory_exporter.get_finished_spans()) == 2


def test_a_provider_that_is_not_the_sdk_one_is_refused(tmp_path: Path) -> None:
    from opentelemetry.trace import NoOpTracerProvider

    with pytest.raises(spanreplay.ConfigurationError, match=r"opentelemetry\.sdk\.trace\.TracerProvider"):
        spanreplay.configure(trace_dir=tmp_path, tracer_provider=NoOpTracerProvider())  # type: ignore[arg-type]


# --- telemetry never breaks the agent ------------------------------------------------


def _unwritable(tmp_path: Path) -> Path:
    # A directory under a regular file cannot be created, even by root.
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    return blocker / "traces"


def test_an_unwritable_trace_dir_is_logged_once_and_the_agent_goes_on(
    tmp_path: Path, provider: TracerProvider, memory_exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    spanreplay.configure(trace_dir=_unwritable(tmp_path), tracer_provider=provider, raise_internal_errors=False)
    with caplog.at_level(logging.DEBUG, logger="spanreplay"), spanreplay.record(agent="cfg"):
        results = [search(q) for q in ("a", "b", "c")]
        when = spanreplay.now()
    assert results == [["a", "a"], ["b", "b"], ["c", "c"]]
    assert when.tzinfo is not None
    errors = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(errors) == 1
    assert "not-a-directory" in errors[0].getMessage()
    assert "trace_dir" in errors[0].getMessage()
    assert len(memory_exporter.get_finished_spans()) == 5  # the other exporters still got every span


def test_an_unwritable_trace_dir_raises_when_strict(tmp_path: Path, provider: TracerProvider) -> None:
    spanreplay.configure(trace_dir=_unwritable(tmp_path), tracer_provider=provider, raise_internal_errors=True)
    with pytest.raises(OSError, match="not-a-directory"), spanreplay.record(agent="cfg"):
        pass


def test_a_user_exception_is_unchanged_even_when_telemetry_fails(tmp_path: Path, provider: TracerProvider) -> None:
    spanreplay.configure(trace_dir=_unwritable(tmp_path), tracer_provider=provider, raise_internal_errors=False)
    raised = LookupError("the agent's own")

    def fail() -> None:
        raise raised

    with pytest.raises(LookupError) as caught, spanreplay.record():
        spanreplay.boundary("tool", "fail", None, fail)
    assert caught.value is raised


def test_an_unsupported_otlp_protocol_is_logged_when_not_strict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    provider = TracerProvider()
    config = spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, otlp=True, raise_internal_errors=False)
    assert config.otlp_processor is None
    assert "http/json" in caplog.text
    with pytest.raises(spanreplay.ConfigurationError, match="'grpc' or 'http/protobuf'"):
        spanreplay.configure(
            trace_dir=tmp_path, tracer_provider=TracerProvider(), otlp=True, raise_internal_errors=True
        )
    provider.shutdown()


# --- the global provider and the OTLP variables (own processes: the global is set once) -------

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import spanreplay
    from opentelemetry import trace

    if sys.argv[2] == "app-provider":
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, ConsoleSpanExporter

        app = TracerProvider(resource=Resource.create({"service.name": "the-app"}))
        app.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
        trace.set_tracer_provider(app)

    config = spanreplay.configure(service_name="own-service", trace_dir=sys.argv[1], raise_internal_errors=True)

    @spanreplay.tool
    def search(query: str) -> str:
        return query.upper()

    with spanreplay.record(agent="proc") as run:
        search("hi")
    print(json.dumps({
        "run_id": run.run_id,
        "global": config.provider is trace.get_tracer_provider(),
        "app": sys.argv[2] == "app-provider" and config.provider is app,
        "otlp": config.otlp_processor is not None,
    }))
    """
)


def _run_script(tmp_path: Path, mode: str, **env: str) -> tuple[dict[str, Any], str]:
    script = tmp_path / "agent_script.py"
    script.write_text(SCRIPT)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANREPLAY_"))}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "traces"), mode],
        capture_output=True,
        text=True,
        env={**clean, **env},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    import json

    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_an_application_provider_gets_the_processors_and_keeps_its_own_exporters(tmp_path: Path) -> None:
    facts, stderr = _run_script(tmp_path, "app-provider")
    assert facts["app"] is True
    assert facts["otlp"] is False
    assert '"name": "execute_tool search"' in stderr  # the application's own exporter saw it
    log = spanreplay.load(tmp_path / "traces", facts["run_id"])
    assert [e.output for e in log] == ["HI"]
    assert spanreplay.runs(tmp_path / "traces")[0].service_name == "the-app"


def test_without_a_provider_one_is_created_global_without_otlp(tmp_path: Path) -> None:
    facts, _ = _run_script(tmp_path, "no-provider")
    assert facts["global"] is True
    assert facts["otlp"] is False
    assert spanreplay.runs(tmp_path / "traces")[0].service_name == "own-service"


class _Receiver(BaseHTTPRequestHandler):
    requests: list[ExportTraceServiceRequest]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        type(self).requests.append(request)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def otlp_receiver() -> Iterator[tuple[str, list[ExportTraceServiceRequest]]]:
    handler = type("Receiver", (_Receiver,), {"requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler.requests
    server.shutdown()
    server.server_close()


def test_the_otlp_variables_add_an_exporter_that_reaches_a_real_receiver(
    tmp_path: Path, otlp_receiver: tuple[str, list[ExportTraceServiceRequest]]
) -> None:
    endpoint, requests = otlp_receiver
    facts, _ = _run_script(tmp_path, "no-provider", OTEL_EXPORTER_OTLP_ENDPOINT=endpoint)
    assert facts["otlp"] is True
    names = {
        span.name for request in requests for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans
    }
    assert names == {"invoke_agent proc", "execute_tool search"}


def test_otel_traces_exporter_none_keeps_otlp_off(
    tmp_path: Path, otlp_receiver: tuple[str, list[ExportTraceServiceRequest]]
) -> None:
    endpoint, requests = otlp_receiver
    facts, _ = _run_script(tmp_path, "no-provider", OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_TRACES_EXPORTER="none")
    assert facts["otlp"] is False
    assert requests == []


# --- explicit configuration: the default trace dir, reset(), no provider taken silently ------


def test_an_explicit_trace_dir_wins_over_the_environment(
    tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SPANREPLAY_TRACE_DIR", str(tmp_path / "from-env"))
    assert spanreplay.configure(trace_dir="traces", tracer_provider=provider).trace_dir == Path("traces")
    assert spanreplay.configure(tracer_provider=provider).trace_dir == tmp_path / "from-env"


def test_reset_forgets_the_configuration_and_quiets_its_processors(
    tmp_path: Path, trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert spanreplay.is_configured()
    first = _record_one()
    spanreplay.reset()
    assert not spanreplay.is_configured()
    monkeypatch.setenv("SPANREPLAY_TRACE_DIR", str(tmp_path / "after-reset"))
    second = _record_one()  # configures anew, with the defaults
    assert spanreplay.is_configured()
    assert (trace_dir / f"{first}.jsonl").exists()
    assert not (trace_dir / f"{second}.jsonl").exists()
    assert _line_count(tmp_path / "after-reset", second) == 3


AUTO_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import spanreplay
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    @spanreplay.tool
    def search(query: str) -> str:
        return query.upper()

    with spanreplay.record(agent="early") as run:   # no configure(): the defaults
        search("hi")
    app = TracerProvider()
    trace.set_tracer_provider(app)                  # the application sets its own later
    print(json.dumps({"run_id": run.run_id, "app_is_global": trace.get_tracer_provider() is app,
                      "configured": spanreplay.is_configured()}))
    """
)


def test_recording_before_configure_leaves_the_global_provider_to_the_application(tmp_path: Path) -> None:
    script = tmp_path / "auto.py"
    script.write_text(AUTO_SCRIPT)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANREPLAY_"))}
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**clean, "SPANREPLAY_TRACE_DIR": str(tmp_path / "traces")},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    import json

    facts = json.loads(done.stdout.strip().splitlines()[-1])
    assert facts == {"run_id": facts["run_id"], "app_is_global": True, "configured": True}
    assert "Overriding of current TracerProvider is not allowed" not in done.stderr
    assert [e.output for e in spanreplay.load(tmp_path / "traces", facts["run_id"])] == ["HI"]


def test_the_former_strict_names_still_work_and_say_what_they_are_now(
    tmp_path: Path, provider: TracerProvider, trace_dir: Path
) -> None:
    with pytest.warns(DeprecationWarning, match=r"configure\(raise_internal_errors=\)"):
        config = spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, strict=False)
    with pytest.warns(DeprecationWarning, match=r"Settings\.raise_internal_errors"):
        assert (config.raise_internal_errors, config.strict) == (False, False)
    with spanreplay.record() as run:
        search("x")
        search("y")
    with pytest.warns(DeprecationWarning, match=r"replay\(require_all_steps=\)"):
        replaying = spanreplay.replay(trace_dir, run.run_id, strict=False)
    with replaying:
        search("x")  # stops early: allowed, as with require_all_steps=False
    assert replaying.outcome == "completed"
    with pytest.raises(spanreplay.LeftoverEventsError), spanreplay.replay(trace_dir, run.run_id):
        search("x")


def test_the_file_processor_takes_its_former_strict_name_with_a_warning(tmp_path: Path) -> None:
    from spanreplay.exporters import DurableFileSpanProcessor

    with pytest.warns(DeprecationWarning, match=r"DurableFileSpanProcessor\(raise_internal_errors=\)"):
        processor = DurableFileSpanProcessor(tmp_path, strict=True)
    assert processor.raise_internal_errors is True
    with pytest.warns(DeprecationWarning, match=r"\.raise_internal_errors"):
        processor.strict = False
    assert processor.raise_internal_errors is False
    with pytest.warns(DeprecationWarning, match=r"\.raise_internal_errors"):
        assert processor.strict is False
    assert DurableFileSpanProcessor(tmp_path, raise_internal_errors=True).raise_internal_errors is True

"""spanreplay push: recorded trace files sent to an OTLP endpoint with their original ids and times.

Against local endpoints that keep the request bytes (OTLP/HTTP and a grpcio
server) and against Arize Phoenix, a real OTLP receiver read back through its
REST API.
"""

from __future__ import annotations

import contextlib
import struct
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

import spanreplay
from helpers.otlp_receivers import GrpcReceiver, HttpReceiver, closed_port, spans_in
from helpers.phoenix_receiver import assert_same_run, phoenix_for_tests
from spanreplay.cli import EXIT_BAD_INPUT, EXIT_OK, cli
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import iter_spans
from spanreplay.sources import build_log

phoenix = pytest.fixture(phoenix_for_tests, name="phoenix", scope="module")


def push(*args: str) -> Result:
    return CliRunner().invoke(cli, ["push", *args], prog_name="spanreplay")


@spanreplay.tool
def lookup(order: str, size: int = 100) -> dict[str, Any]:
    return {"order": order, "notes": "n" * size, "weight_kg": 1.25, "fragile": True, "big": 2**62}


@spanreplay.tool
def refund(order: str) -> str:
    raise PermissionError(f"refunds for {order} need a person")


def record(agent: str = "pusher", *, size: int = 100) -> str:
    with spanreplay.record(agent=agent) as run:
        lookup("1042", size=size)
        with contextlib.suppress(PermissionError):
            refund("1042")
        spanreplay.random()
    return run.run_id


def file_spans(source: Path, run_id: str | None = None) -> dict[tuple[str, str], SpanRecord]:
    """The spans of the trace files, one per id, the ended copy of each."""
    out: dict[tuple[str, str], SpanRecord] = {}
    for span in iter_spans(source):
        if run_id is not None and span.attributes.get("spanreplay.run.id") != run_id:
            continue
        if span.key not in out or span.end_ns > out[span.key].end_ns:
            out[span.key] = span
    return out


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return None if kind is None else getattr(value, kind)


def received(spans: list[tuple[Any, Span]]) -> dict[tuple[str, str], dict[str, Any]]:
    """What the endpoint got, span by span, as plain values."""
    out = {}
    for resource_spans, span in spans:
        key = (span.trace_id.hex(), span.span_id.hex())
        assert key not in out, f"span {key} sent twice"
        out[key] = {
            "parent": span.parent_span_id.hex() or None,
            "name": span.name,
            "kind": span.kind,
            "start": span.start_time_unix_nano,
            "end": span.end_time_unix_nano,
            "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
            "status": (span.status.code, span.status.message),
            "resource": {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes},
        }
    return out


def expected(spans: dict[tuple[str, str], SpanRecord]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        key: {
            "parent": s.parent_span_id,
            "name": s.name,
            "kind": s.kind,
            "start": s.start_ns,
            "end": s.end_ns,
            "attributes": s.attributes,
            "status": (s.status_code, s.status_message),
            "resource": s.resource,
        }
        for key, s in spans.items()
    }


def test_push_sends_every_span_once_with_its_ids_parents_times_and_attributes(trace_dir: Path) -> None:
    first, second = record(), record()
    with HttpReceiver() as receiver:
        result = push(str(trace_dir), "--endpoint", receiver.url)
    assert result.exit_code == EXIT_OK, result.output
    spans = file_spans(trace_dir)
    assert len(spans) == 2 * 4  # per run: the root, lookup, refund, random
    assert result.output == (
        f"pushed 8 span(s) of 2 run(s) from {trace_dir} to {receiver.url}/v1/traces in 1 request(s).\n"
    )
    assert received(list(spans_in(receiver.requests))) == expected(spans)
    [request] = receiver.requests
    assert request.path == "/v1/traces"
    assert request.headers["content-type"] == "application/x-protobuf"
    assert {first, second} == {s.attributes["spanreplay.run.id"] for s in spans.values()}


def test_pushed_spans_load_back_to_the_same_event_log(trace_dir: Path, tmp_path: Path) -> None:
    run_id = record(size=30_000)  # a chunked payload
    with HttpReceiver() as receiver:
        assert push(str(trace_dir), "--endpoint", receiver.url, "--batch-size", "2").exit_code == EXIT_OK
    assert len(receiver.requests) == 2
    # The request bodies, kept the way the Collector's file exporter keeps proto batches.
    exported = tmp_path / "exported.binpb"
    exported.write_bytes(b"".join(struct.pack(">I", len(r.body)) + r.body for r in receiver.requests))
    assert spanreplay.load(exported, run_id) == spanreplay.load(trace_dir, run_id)


def test_the_run_option_sends_only_that_run(trace_dir: Path) -> None:
    record()
    wanted = record()
    with HttpReceiver() as receiver:
        result = push(str(trace_dir), "--endpoint", receiver.url, "--run", wanted)
    assert result.exit_code == EXIT_OK, result.output
    assert "pushed 4 span(s) of 1 run(s)" in result.output
    assert received(list(spans_in(receiver.requests))) == expected(file_spans(trace_dir, wanted))


def test_a_crashed_run_is_pushed_with_the_root_span_it_started_with(trace_dir: Path) -> None:
    run_id = record()
    path = trace_dir / f"{run_id}.jsonl"
    # What SIGKILL leaves: the run's root as written when it started, never ended.
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    with HttpReceiver() as receiver:
        assert push(str(trace_dir), "--endpoint", receiver.url).exit_code == EXIT_OK
    got = received(list(spans_in(receiver.requests)))
    [root] = [s for s in got.values() if s["parent"] is None]
    assert root["attributes"]["spanreplay.run.status"] == "running"
    assert root["end"] == 0
    assert len(got) == 4
    log = spanreplay.load(trace_dir, run_id)
    assert log.run.status == "crashed"


def test_a_request_above_the_endpoints_limit_is_split_until_each_part_fits(trace_dir: Path) -> None:
    for _ in range(3):
        record(size=20_000)
    limit = 50_000
    with HttpReceiver(max_body=limit) as receiver:
        result = push(str(trace_dir), "--endpoint", receiver.url)
    assert result.exit_code == EXIT_OK, result.output
    assert receiver.attempts > len(receiver.requests) > 1  # refused first, then sent in parts
    assert all(len(r.body) <= limit for r in receiver.requests)
    assert received(list(spans_in(receiver.requests))) == expected(file_spans(trace_dir))


def test_push_over_grpc_splits_on_resource_exhausted(trace_dir: Path) -> None:
    for _ in range(3):
        record(size=20_000)
    with GrpcReceiver(max_receive=50_000) as receiver:
        result = push(str(trace_dir), "--endpoint", receiver.url, "--protocol", "grpc")
    assert result.exit_code == EXIT_OK, result.output
    assert receiver.attempts == len(receiver.requests) > 1  # grpc refuses before the servicer runs
    assert received(list(spans_in(receiver.requests))) == expected(file_spans(trace_dir))
    assert f"to 127.0.0.1:{receiver.port} in {len(receiver.requests)} request(s)" in result.output


def test_a_span_too_large_on_its_own_names_the_span_and_the_limit_to_raise(trace_dir: Path) -> None:
    record(size=200_000)
    with HttpReceiver(max_body=100_000) as receiver:
        result = push(str(trace_dir), "--endpoint", receiver.url)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "refused span 'execute_tool lookup'" in result.output
    assert "as too large on its own (HTTP 413" in result.output
    assert "max_request_body_size" in result.output


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_nothing_listening_is_one_sentence_with_the_fix(trace_dir: Path, protocol: str) -> None:
    record()
    result = push(str(trace_dir), "--endpoint", f"http://127.0.0.1:{closed_port()}", "--protocol", protocol)
    assert result.exit_code == EXIT_BAD_INPUT
    assert result.output.startswith("error: Could not push to ")
    assert "start the Collector (collector-config/: docker compose up -d) or check --endpoint" in result.output
    assert "Traceback" not in result.output


def test_a_refusing_endpoint_is_retried_and_then_reported(trace_dir: Path) -> None:
    record()
    with HttpReceiver("503") as receiver:
        result = push(str(trace_dir), "--endpoint", receiver.url, "--timeout", "1")
    assert result.exit_code == EXIT_BAD_INPUT
    assert receiver.attempts == 4
    assert "(HTTP 503 Service Unavailable: memory limiter refused the data)" in result.output


def test_an_unknown_run_lists_the_runs_there(trace_dir: Path) -> None:
    run_id = record()
    with HttpReceiver() as receiver:
        result = push(str(trace_dir), "--endpoint", receiver.url, "--run", "run_20200101_000000_deadbeef")
    assert result.exit_code == EXIT_BAD_INPUT
    assert f"Run run_20200101_000000_deadbeef is not in {trace_dir}" in result.output
    assert run_id in result.output
    assert receiver.attempts == 0


def test_headers_come_from_the_option_and_the_standard_variable(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-scope-orgid=team%20a")
    with HttpReceiver() as receiver:
        result = push(str(trace_dir), "--endpoint", f"{receiver.url}/v1/traces", "--header", "authorization=Bearer t")
    assert result.exit_code == EXIT_OK, result.output
    [request] = receiver.requests
    assert (request.headers["x-scope-orgid"], request.headers["authorization"]) == ("team a", "Bearer t")
    assert request.path == "/v1/traces"  # given in full, not doubled


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--endpoint", "localhost:4318"], "is not an http:// or https:// URL"),
        (["--endpoint", "http://localhost:4318", "--header", "no-equals-sign"], "is not NAME=VALUE"),
    ],
)
def test_bad_options_are_one_sentence(trace_dir: Path, args: list[str], message: str) -> None:
    record()
    result = push(str(trace_dir), *args)
    assert result.exit_code == EXIT_BAD_INPUT
    assert message in result.output


def test_an_empty_source_is_refused(tmp_path: Path) -> None:
    (tmp_path / "other.jsonl").write_text('{"resourceSpans": []}\n')
    with HttpReceiver() as receiver:
        result = push(str(tmp_path), "--endpoint", receiver.url)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "holds no spans to push" in result.output
    assert receiver.requests == []


@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_push_fills_phoenix_with_the_original_ids_and_the_same_event_log(
    phoenix: Any, trace_dir: Path, protocol: str
) -> None:
    run_id = record(agent=f"pushed-{protocol.replace('/', '-')}", size=30_000)
    endpoint = phoenix.url if protocol == "http/protobuf" else phoenix.grpc_url
    result = push(str(trace_dir), "--endpoint", endpoint, "--protocol", protocol, "--run", run_id)
    assert result.exit_code == EXIT_OK, result.output
    spans = file_spans(trace_dir, run_id)
    records = phoenix.span_records(run_id, len(spans))
    assert {r.key for r in records} == set(spans)  # the original trace and span ids
    for record_ in records:
        original = spans[record_.key]
        assert record_.parent_span_id == original.parent_span_id
        assert abs(record_.start_ns - original.start_ns) <= 1000  # Phoenix keeps microseconds
    assert_same_run(build_log(run_id, records, phoenix.url, damage=lambda: ""), spanreplay.load(trace_dir, run_id))

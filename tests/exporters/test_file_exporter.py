"""The durable trace file: one OTLP/JSON-lines file per run, a line per span as it ends, owner-only."""

from __future__ import annotations

import asyncio
import base64
import re
import stat
from pathlib import Path
from typing import Any

import orjson
import pytest
from google.protobuf.json_format import ParseDict
from opentelemetry import trace
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

import spanreplay
from spanreplay.exporters import DurableFileSpanProcessor


@spanreplay.tool
def search(query: str) -> dict[str, Any]:
    return {"hits": [query] * 3, "score": 0.5, "ok": True}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [span for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {kv["key"]: kv["value"] for kv in span["attributes"]}


# --- OTLP/JSON validity ------------------------------------------------------------

_ID_FIELDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}
_CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")
_INT64_FIELDS = {"startTimeUnixNano", "endTimeUnixNano", "timeUnixNano", "intValue"}


def _hex_ids_to_base64(node: Any) -> Any:
    """OTLP/JSON writes ids as hex; protobuf's json_format reads bytes as base64."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in _ID_FIELDS and isinstance(value, str):
                raw = bytes.fromhex(value)
                assert len(raw) == _ID_FIELDS[key], f"{key} {value!r} is not {_ID_FIELDS[key]} bytes of hex"
                out[key] = base64.b64encode(raw).decode()
            else:
                out[key] = _hex_ids_to_base64(value)
        return out
    if isinstance(node, list):
        return [_hex_ids_to_base64(v) for v in node]
    return node


def _check_spec_shapes(node: Any, path: str = "$") -> None:
    """int64 as strings, enums as integers, field names in lowerCamelCase."""
    if isinstance(node, dict):
        for key, value in node.items():
            assert _CAMEL.match(key), f"{path}.{key} is not lowerCamelCase"
            if key in _INT64_FIELDS:
                assert isinstance(value, str), f"{path}.{key} is an int64 and must be a JSON string"
                assert re.fullmatch(r"-?\d+", value), f"{path}.{key}={value!r}"
            if key in ("kind", "code"):
                assert type(value) is int, f"{path}.{key} is an enum and must be an integer"
            if key == "key":
                continue
            _check_spec_shapes(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            _check_spec_shapes(value, f"{path}[{i}]")


def assert_valid_otlp_json_line(doc: dict[str, Any]) -> TracesData:
    _check_spec_shapes(doc)
    message = TracesData()
    ParseDict(_hex_ids_to_base64(doc), message)  # strict: unknown fields and bad types raise
    return message


def test_every_line_is_otlp_json_that_the_official_protobuf_classes_accept(trace_dir: Path) -> None:
    tracer = trace.get_tracer("other-instrumentation", tracer_provider=spanreplay.settings().provider)

    def agent() -> None:
        search("naïve ☕ " * 300)  # chunked input: an arrayValue
        spanreplay.now()
        with tracer.start_as_current_span("http get", kind=SpanKind.CLIENT) as span:
            span.set_attribute("http.response.status_code", 200)
            span.set_attribute("ratio", 0.25)
            span.set_attribute("tags", ["a", "b"])
            span.add_event("retry", {"attempt": 2})
            span.add_link(span.get_span_context(), {"why": "self"})
            span.set_status(Status(StatusCode.ERROR, "upstream failed"))
        raise KeyError("missing field")

    with pytest.raises(KeyError), spanreplay.record(agent="valid") as run:
        agent()
    path = trace_dir / f"{run.run_id}.jsonl"
    docs = _lines(path)
    assert len(docs) == 5  # the running root copy, three spans, the ended root
    names = []
    for doc in docs:
        message = assert_valid_otlp_json_line(doc)
        spans = message.resource_spans[0].scope_spans[0].spans
        assert len(spans) == 1
        names.append(spans[0].name)
    assert names == ["invoke_agent valid", "execute_tool search", "clock now", "http get", "invoke_agent valid"]

    http = _spans(docs[3])[0]
    assert http["kind"] == 3  # SPAN_KIND_CLIENT is 3 in OTLP (the SDK's enum counts from 0)
    assert http["status"] == {"code": 2, "message": "upstream failed"}
    assert _attrs(http)["http.response.status_code"] == {"intValue": "200"}
    assert _attrs(http)["tags"] == {"arrayValue": {"values": [{"stringValue": "a"}, {"stringValue": "b"}]}}
    assert _attrs(http)["spanreplay.run.id"] == {"stringValue": run.run_id}
    assert http["events"][0]["attributes"] == [{"key": "attempt", "value": {"intValue": "2"}}]
    tool = _spans(docs[1])[0]
    chunks = _attrs(tool)["spanreplay.input"]["arrayValue"]["values"]
    assert len(chunks) > 1
    assert all(set(c) == {"stringValue"} for c in chunks)
    root = _spans(docs[-1])[0]
    assert root["status"]["code"] == 2
    assert "parentSpanId" not in root
    assert tool["parentSpanId"] == root["spanId"]
    assert tool["traceId"] == root["traceId"]
    assert re.fullmatch(r"[0-9a-f]{32}", root["traceId"])


def test_the_resource_and_scope_are_written_with_each_line(trace_dir: Path) -> None:
    with spanreplay.record(agent="res") as run:
        search("x")
    doc = _lines(trace_dir / f"{run.run_id}.jsonl")[1]
    resource = {kv["key"]: kv["value"] for kv in doc["resourceSpans"][0]["resource"]["attributes"]}
    assert resource["service.name"] == {"stringValue": "test-agent"}
    scope = doc["resourceSpans"][0]["scopeSpans"][0]["scope"]
    assert scope["name"] == "spanreplay"
    assert scope["version"] == spanreplay.__version__


# --- one file per run, written as spans end -----------------------------------------


def test_one_owner_only_file_per_run_in_the_trace_dir(trace_dir: Path) -> None:
    with spanreplay.record(agent="a") as first:
        search("a")
    with spanreplay.record(agent="b") as second:
        search("b")
    files = sorted(p.name for p in trace_dir.iterdir())
    assert files == sorted([f"{first.run_id}.jsonl", f"{second.run_id}.jsonl"])
    for name in files:
        assert stat.S_IMODE((trace_dir / name).stat().st_mode) == 0o600
    assert stat.S_IMODE(trace_dir.stat().st_mode) == 0o700


def test_each_span_is_on_disk_as_soon_as_it_ends(trace_dir: Path) -> None:
    with spanreplay.record(agent="live") as run:
        path = trace_dir / f"{run.run_id}.jsonl"
        running = _spans(_lines(path)[0])[0]
        assert _attrs(running)["spanreplay.run.status"] == {"stringValue": "running"}
        assert "endTimeUnixNano" not in running
        search("first")
        lines = _lines(path)
        assert len(lines) == 2
        assert _spans(lines[1])[0]["name"] == "execute_tool search"
        spanreplay.now()
        assert len(_lines(path)) == 3
    ended = _spans(_lines(path)[-1])[0]
    assert _attrs(ended)["spanreplay.run.status"] == {"stringValue": "ok"}


def test_concurrent_runs_write_their_own_files(trace_dir: Path) -> None:
    async def one(name: str) -> str:
        async with spanreplay.record(agent=name) as run:
            for _ in range(3):
                await asyncio.sleep(0)
                search(name)
            return run.run_id

    async def both() -> list[str]:
        return list(await asyncio.gather(one("left"), one("right")))

    ids = asyncio.run(both())
    for run_id, name in zip(ids, ("left", "right"), strict=True):
        log = spanreplay.load(trace_dir, run_id)
        assert [e.input for e in log] == [{"query": name}] * 3
        assert log.run.status == "ok"


def test_spans_outside_any_run_are_not_written(trace_dir: Path) -> None:
    tracer = spanreplay.settings().provider.get_tracer("other")
    with tracer.start_as_current_span("background job"):
        search("no run")
    assert not trace_dir.exists() or list(trace_dir.iterdir()) == []


def test_the_file_is_what_load_and_runs_read(trace_dir: Path) -> None:
    with spanreplay.record(agent="loop") as run:
        search("a")
        spanreplay.random()
    summaries = spanreplay.runs(trace_dir)
    assert [(s.run_id, s.agent, s.status, s.steps) for s in summaries] == [(run.run_id, "loop", "ok", 2)]
    log = spanreplay.load(trace_dir / f"{run.run_id}.jsonl")
    assert [e.call_id for e in log] == ["tool:search#0", "random:random#0"]


def test_fsync_mode_writes_the_same_lines(tmp_path: Path, provider: TracerProvider) -> None:
    spanreplay.configure(
        trace_dir=tmp_path / "synced", tracer_provider=provider, fsync=True, raise_internal_errors=True
    )
    with spanreplay.record(agent="sync") as run:
        search("x")
    assert len(_lines(tmp_path / "synced" / f"{run.run_id}.jsonl")) == 3


def test_a_run_id_that_cannot_name_a_file_is_not_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    processor = DurableFileSpanProcessor(tmp_path)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("evil", attributes={"spanreplay.run.id": "../escape"}):
        pass
    provider.shutdown()
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / "escape.jsonl").exists()
    assert "../escape" in caplog.text


def test_links_keep_their_ids_in_hex(tmp_path: Path) -> None:
    processor = DurableFileSpanProcessor(tmp_path)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("first") as first:
        target = first.get_span_context()
    with tracer.start_as_current_span("second", links=[Link(target)], attributes={"spanreplay.run.id": "r1"}):
        pass
    provider.shutdown()
    doc = _lines(tmp_path / "r1.jsonl")[0]
    assert_valid_otlp_json_line(doc)
    link = _spans(doc)[0]["links"][0]
    assert link["traceId"] == format(target.trace_id, "032x")
    assert link["spanId"] == format(target.span_id, "016x")


class _PublicOnly:
    """A span seen only through the public ReadableSpan interface (another SDK's layout)."""

    def __init__(self, span: Any) -> None:
        self._span = span

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._span, name)


def test_the_fast_encoding_path_matches_the_public_span_interface() -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from spanreplay.recording.exporters._otlp_dicts import span_dict

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span("plain", attributes={"a": 1}) as plain:
        target = plain.get_span_context()
    with tracer.start_as_current_span("rich", kind=SpanKind.CLIENT, links=[Link(target, {"l": True})]) as rich:
        rich.set_attributes({"s": "x", "f": 1.5, "b": False, "seq": [1, 2], "chunks": ("p", "q")})
        rich.add_event("e", {"n": 3})
        rich.set_status(Status(StatusCode.ERROR, "bad"))
    provider.shutdown()
    spans = exporter.get_finished_spans()
    assert len(spans) == 2
    for span in spans:
        assert span_dict(span) == span_dict(_PublicOnly(span))  # type: ignore[arg-type]

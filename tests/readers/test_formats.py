"""The Collector's other file layouts (zstd, proto, rotation) and Tempo's trace JSON, on real recordings.

Proto files are built from the spans the OpenTelemetry SDK exported, encoded by
the SDK's own OTLP protobuf encoder; zstd by the zstandard library; Tempo's JSON
by the documented shape (``tests/fixtures/backends.py``).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any
from unittest import mock

import msgspec
import orjson
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from fixtures.backends import tempo_v1, tempo_v2
from fixtures.recordings import lines, record_agent
from fixtures.tracedocs import document, line, span
from spanreplay import SpanReplayWarning, TraceFormatError
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import _base, _otlp_json, expand, iter_spans
from spanreplay.readers._base import MalformedTrace

AGENT_STEPS = [(1, "tool", "search"), (2, "clock", "now"), (3, "random", "random")] + [
    (seq, "tool", "lookup") for seq in (4, 5, 6)
]


def steps(log: spanreplay.EventLog) -> list[tuple[int, str, str]]:
    return [(e.seq, e.kind, e.key) for e in log]


def plain(spans: list[SpanRecord]) -> list[SpanRecord]:
    """Spans without where they were read from, in one order, for comparing across formats.

    The durable file also holds each run span as it started (status running); the
    exporters only ever see it ended. Like the loader, keep the copy that ended last.
    """
    latest: dict[tuple[str, str], SpanRecord] = {}
    for s in spans:
        if s.key not in latest or s.end_ns > latest[s.key].end_ns:
            latest[s.key] = msgspec.structs.replace(s, origin="")
    return [latest[key] for key in sorted(latest)]


def proto_records(exporter: InMemorySpanExporter, *, per_record: int = 2, zstd: bool = False) -> bytes:
    """The SDK's exported spans as the Collector's ``format: proto`` file (optionally ``compression: zstd``)."""
    finished = list(exporter.get_finished_spans())
    out = b""
    compressor = zstandard.ZstdCompressor()
    for start in range(0, len(finished), per_record):
        body = encode_spans(finished[start : start + per_record]).SerializeToString()
        if zstd:
            body = compressor.compress(body)
        out += len(body).to_bytes(4, "big") + body
    return out


@pytest.fixture
def recorded(trace_dir: Path) -> Path:
    record_agent("run_a")
    record_agent("run_b", big=True)
    return trace_dir


# --- zstd --------------------------------------------------------------------------------------


def test_whole_file_zstd_reads_like_the_plain_file(recorded: Path, tmp_path: Path) -> None:
    source = recorded / "run_b.jsonl"
    packed = tmp_path / "run_b.jsonl.zst"
    packed.write_bytes(zstandard.ZstdCompressor().compress(source.read_bytes()))
    assert plain(list(iter_spans(packed))) == plain(list(iter_spans(source)))
    assert steps(spanreplay.load(packed, "run_b"))[:3] == AGENT_STEPS[:3]


def test_zstd_stream_of_several_frames_reads_every_frame(recorded: Path, tmp_path: Path) -> None:
    compressor = zstandard.ZstdCompressor()
    packed = tmp_path / "both"
    packed.write_bytes(b"".join(compressor.compress(line) for line in lines(recorded / "run_a.jsonl")))
    assert steps(spanreplay.load(packed, "run_a")) == AGENT_STEPS


def test_zstd_cut_short_warns_and_keeps_what_came_before(tmp_path: Path) -> None:
    docs = b"".join(line(document([span(f"op{i}", span_id=f"{i + 1:016x}", attributes={"i": i})])) for i in range(3000))
    data = zstandard.ZstdCompressor(write_content_size=False).compress(docs)
    path = tmp_path / "cut.zst"
    path.write_bytes(data[: len(data) // 2])
    with pytest.warns(SpanReplayWarning, match=r"cut\.zst ends in the middle of its zstd stream"):
        got = [s.name for s in iter_spans(path)]
    assert 0 < len(got) < 3000
    assert got == [f"op{i}" for i in range(len(got))]


def test_damaged_zstd_fails_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"not really zstd" * 4)
    with pytest.raises(TraceFormatError, match=r"bad\.zst cannot be read \(.*\); if it is zstd it is damaged"):
        list(iter_spans(path))


def test_gzip_inside_is_not_confused_with_zstd(recorded: Path, tmp_path: Path) -> None:
    packed = tmp_path / "run_a.gz"
    packed.write_bytes(gzip.compress((recorded / "run_a.jsonl").read_bytes()))
    assert steps(spanreplay.load(packed, "run_a")) == AGENT_STEPS


def test_collector_json_with_per_record_zstd_reads(recorded: Path, tmp_path: Path) -> None:
    # format: json + compression: zstd -> each batch compressed and length-prefixed, no newlines.
    compressor = zstandard.ZstdCompressor()
    path = tmp_path / "traces.json"
    out = b""
    for raw in lines(recorded / "run_a.jsonl") + lines(recorded / "run_b.jsonl"):
        body = compressor.compress(raw.rstrip(b"\n"))
        out += len(body).to_bytes(4, "big") + body
    path.write_bytes(out)
    assert [r.run_id for r in spanreplay.runs(path)] == ["run_a", "run_b"]
    assert steps(spanreplay.load(path, "run_a")) == AGENT_STEPS
    assert spanreplay.load(path, "run_b").events[-1].output == "é☃x" * 3000


# --- the Collector's proto format --------------------------------------------------------------


@pytest.mark.parametrize("zstd", [False, True], ids=["proto", "proto+zstd"])
def test_collector_proto_file_gives_the_same_spans_as_json_lines(
    recorded: Path, memory_exporter: InMemorySpanExporter, tmp_path: Path, zstd: bool
) -> None:
    path = tmp_path / "traces.proto"
    path.write_bytes(proto_records(memory_exporter, zstd=zstd))
    from_json = list(iter_spans(recorded))
    from_proto = list(iter_spans(path))
    assert plain(from_proto) == plain(from_json)
    assert from_proto[0].origin == f"{path} record 1 (at byte 0)"
    big = spanreplay.load(path, "run_b")
    assert big.events[-1].output == "é☃x" * 3000
    assert steps(spanreplay.load(path, "run_a")) == AGENT_STEPS


def test_proto_records_without_the_run_are_skipped_undecoded(
    recorded: Path, memory_exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    # A damaged record is only an error when it could hold the run being loaded.
    junk = b"\x0a\xff\xff\xff\xff not a message"
    path = tmp_path / "traces.proto"
    path.write_bytes(len(junk).to_bytes(4, "big") + junk + proto_records(memory_exporter))
    assert steps(spanreplay.load(path, "run_a")) == AGENT_STEPS
    with pytest.raises(TraceFormatError, match=r"traces\.proto record 1 \(at byte 0\) is not a trace spanreplay can"):
        list(iter_spans(path))


def test_proto_file_cut_inside_a_record_warns_and_keeps_the_records_before(
    recorded: Path, memory_exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    data = proto_records(memory_exporter, per_record=1)
    path = tmp_path / "traces.proto"
    path.write_bytes(data[:-10])
    with pytest.warns(SpanReplayWarning, match=r"record \d+ ends after \d+ of its \d+ bytes \(the writer was stopped"):
        spans = list(iter_spans(path))
    assert len(spans) == len(memory_exporter.get_finished_spans()) - 1


def test_proto_record_claiming_an_absurd_length_fails_with_the_offset(tmp_path: Path) -> None:
    body = b"\x0a\x00"
    path = tmp_path / "traces.proto"
    path.write_bytes(len(body).to_bytes(4, "big") + body + b"\x7f\xff\xff\xff\x0a")
    with pytest.raises(TraceFormatError, match=r"at byte 6: record 2 claims 2147483647 bytes"):
        list(iter_spans(path))


# --- Tempo --------------------------------------------------------------------------------------


def test_tempo_v1_and_v2_trace_json_give_the_spans_of_the_recording(recorded: Path, tmp_path: Path) -> None:
    spans = list(iter_spans(recorded / "run_b.jsonl"))
    v1, v2 = tmp_path / "v1.json", tmp_path / "v2.json"
    v1.write_bytes(orjson.dumps(tempo_v1(spans)))
    v2.write_bytes(orjson.dumps(tempo_v2(spans)))
    assert '"SPAN_KIND_INTERNAL"' in v1.read_text()  # enum names and base64 ids, as Tempo writes them
    assert plain(list(iter_spans(v1))) == plain(spans)
    assert plain(list(iter_spans(v2))) == plain(spans)
    assert spanreplay.load(v2, "run_b").events[-1].output == "é☃x" * 3000


def test_tempo_partial_trace_fails_naming_max_bytes_per_trace(recorded: Path, tmp_path: Path) -> None:
    spans = list(iter_spans(recorded / "run_a.jsonl"))
    path = tmp_path / "partial.json"
    path.write_bytes(orjson.dumps(tempo_v2(spans[:3], partial=True)))
    with pytest.raises(TraceFormatError) as info:
        spanreplay.load(path, "run_a")
    message = str(info.value)
    assert message.startswith(f"{path}:1: Tempo returned this trace with status PARTIAL (Trace exceeds maximum size")
    assert "raise max_bytes_per_trace in Tempo's overrides" in message
    assert message.endswith(".")


def test_tempo_cut_at_its_default_2048_bytes_leaves_chunked_payloads_whole(recorded: Path, tmp_path: Path) -> None:
    spans = list(iter_spans(recorded / "run_b.jsonl"))
    path = tmp_path / "tempo.json"
    path.write_bytes(orjson.dumps(tempo_v2(spans, max_attribute_bytes=2048)))
    assert spanreplay.load(path, "run_b").events[-1].output == "é☃x" * 3000


# --- rotated files ---------------------------------------------------------------------------------


def test_a_collector_file_brings_its_rotated_backups_oldest_first(recorded: Path, tmp_path: Path) -> None:
    out = tmp_path / "otel"
    out.mkdir()
    run_lines = lines(recorded / "run_a.jsonl")
    # The run was written across two rotations: its spans are in three files.
    (out / "traces-2026-01-02T10-00-00.000.json").write_bytes(b"".join(run_lines[:2]))
    (out / "traces-2026-01-02T11-30-00.000.json.gz").write_bytes(gzip.compress(b"".join(run_lines[2:4])))
    (out / "traces.json").write_bytes(b"".join(run_lines[4:]))
    (out / "traces-old.json").write_text("not a backup name")
    (out / "other-2026-01-02T10-00-00.000.json").write_text("another file's backup")
    assert expand(out / "traces.json") == [
        str(out / "traces-2026-01-02T10-00-00.000.json"),
        str(out / "traces-2026-01-02T11-30-00.000.json.gz"),
        str(out / "traces.json"),
    ]
    assert steps(spanreplay.load(out / "traces.json", "run_a")) == AGENT_STEPS


def test_a_file_without_backups_is_read_alone(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(line(document([span("a")])))
    assert expand(path) == [str(path)]


# --- the fast path of the OTLP/JSON reader ------------------------------------------------------

_VALUES = st.one_of(
    st.builds(lambda v: {"stringValue": v}, st.one_of(st.text(max_size=5), st.integers())),
    st.builds(
        lambda v: {"intValue": v},
        st.one_of(st.integers(-(2**70), 2**70).map(str), st.sampled_from(["٣", "²", " 7", "1_0", "-0", ""])),
    ),
    st.builds(lambda v: {"boolValue": v}, st.one_of(st.booleans(), st.just("true"))),
    st.builds(lambda v: {"stringValue": "s", "intValue": v}, st.text(max_size=3)),
    st.builds(lambda v: {"doubleValue": v}, st.floats(allow_nan=False)),
)


def _decoded(decode: Any) -> Any:
    try:
        return decode()
    except MalformedTrace as exc:
        return ("MalformedTrace", str(exc))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.fixed_dictionaries({"key": st.one_of(st.text(max_size=4), st.integers()), "value": _VALUES})))
def test_attribute_fast_path_decodes_exactly_as_the_checked_path(items: list[dict[str, Any]]) -> None:
    def checked() -> dict[str, Any]:
        out: dict[str, Any] = {}
        for item in items:  # the checked path's own order: the value, then the key
            out[_base.text(item["key"], "an attribute key")] = _otlp_json.any_value(item["value"])
        return out

    assert _decoded(lambda: _otlp_json.key_values(items)) == _decoded(checked)


@settings(max_examples=200, deadline=None)
@given(
    st.fixed_dictionaries(
        {"traceId": st.sampled_from(["0af7651916cd43dd8448eb211c80319c", "0AF7651916CD43DD8448EB211C80319C", "Cvd"])},
        optional={
            "spanId": st.sampled_from(["b7ad6b7169203331", "", "zz"]),
            "parentSpanId": st.sampled_from(["", "00f067aa0ba902b7", None]),
            "name": st.one_of(st.text(max_size=3), st.none()),
            "kind": st.one_of(st.integers(-1, 6), st.just("SPAN_KIND_CLIENT")),
            "startTimeUnixNano": st.one_of(st.integers(0, 10**19).map(str), st.integers(0, 10)),
            "status": st.one_of(
                st.just({}), st.fixed_dictionaries({"code": st.integers(0, 2)}), st.just({"code": "x"})
            ),
            "flags": st.integers(0, 512),
            "events": st.just([]),
        },
    )
)
def test_span_fast_path_decodes_exactly_as_the_checked_path(span: dict[str, Any]) -> None:
    def decode() -> Any:
        return _otlp_json._span(span, {}, "", "", {}, "x")

    fast = _decoded(decode)
    with mock.patch.object(_otlp_json, "_plain_span", return_value=None):
        assert _decoded(decode) == fast

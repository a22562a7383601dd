"""``spanreplay convert``: every readable format out as OTLP/JSON and OTLP proto, and back, unchanged."""

from __future__ import annotations

import gzip
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec
import orjson
import pytest
import zstandard
from click.testing import CliRunner, Result

import spanreplay
from fixtures.backends import BackendServer, jaeger_trace, serving, tempo_v1, tempo_v2
from fixtures.recordings import lines, record_agent, record_failing
from helpers.paths import THIRD_PARTY
from spanreplay.cli import cli
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import iter_spans, writers

THIRD_PARTY_FILES = sorted(p for p in THIRD_PARTY.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl"))
TARGETS = [("otlp-json", False), ("otlp-json", True), ("otlp-proto", False), ("otlp-proto", True)]
TARGET_IDS = ["json", "json+zstd", "proto", "proto+zstd"]


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="spanreplay")


def same_spans(spans: list[SpanRecord]) -> list[SpanRecord]:
    """The spans without their origin, as a sorted multiset (duplicates kept)."""
    return sorted((msgspec.structs.replace(s, origin="") for s in spans), key=lambda s: (s.key, s.end_ns, repr(s)))


def convert(source: Path | str, out: Path, target: str, zstd: bool, *extra: str) -> Path:
    result = invoke("convert", str(source), "--to", target, "-o", str(out), *(["--zstd"] if zstd else []), *extra)
    assert result.exit_code == 0, result.output
    return out


# Each way spanreplay can be handed a recording: the name, and how to write it from the durable file.
def _jaeger(data: bytes) -> bytes:
    spans = list(iter_spans_of(data))
    return orjson.dumps({"data": [jaeger_trace(spans)]})


def _records(data: bytes, *, compress: bool) -> bytes:
    compressor = zstandard.ZstdCompressor()
    out = b""
    for raw in data.splitlines():
        body = compressor.compress(raw) if compress else raw
        out += len(body).to_bytes(4, "big") + body
    return out


def iter_spans_of(data: bytes) -> list[SpanRecord]:
    path = Path(_SCRATCH[0]) / "scratch.jsonl"
    path.write_bytes(data)
    return list(iter_spans(path))


_SCRATCH: list[str] = []
RECORDING_FORMATS: dict[str, Callable[[bytes], bytes]] = {
    "json-lines": lambda d: d,
    "gzip": gzip.compress,
    "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
    "json+zstd-records": lambda d: _records(d, compress=True),
    "proto": lambda d: b"".join(writers.proto_records(iter_spans_of(d), zstd=False)),
    "proto+zstd": lambda d: b"".join(writers.proto_records(iter_spans_of(d), zstd=True)),
    "jaeger": _jaeger,
    "tempo-v1": lambda d: orjson.dumps(tempo_v1(iter_spans_of(d))),
    "tempo-v2": lambda d: orjson.dumps(tempo_v2(iter_spans_of(d))),
}


@pytest.fixture
def recording(trace_dir: Path, tmp_path: Path) -> bytes:
    _SCRATCH[:] = [str(tmp_path)]
    record_agent("run_b", big=True)
    return (trace_dir / "run_b.jsonl").read_bytes()


@pytest.mark.parametrize(("target", "zstd"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("path", THIRD_PARTY_FILES, ids=lambda p: p.name)
def test_third_party_files_convert_and_read_back_to_the_same_spans(
    path: Path, target: str, zstd: bool, tmp_path: Path
) -> None:
    original = list(iter_spans(path))
    if not original:  # the logs example: valid OTLP, no spans
        result = invoke("convert", str(path), "--to", target, "-o", str(tmp_path / "out"))
        assert result.exit_code == 2
        assert "holds no spans, so there is nothing to convert" in result.stderr
        assert not (tmp_path / "out").exists()
        return
    out = convert(path, tmp_path / "out", target, zstd)
    assert same_spans(list(iter_spans(out))) == same_spans(original)


@pytest.mark.parametrize(("target", "zstd"), TARGETS, ids=TARGET_IDS)
@pytest.mark.parametrize("form", sorted(RECORDING_FORMATS))
def test_a_recording_in_every_format_converts_and_replays_the_same(
    recording: bytes, form: str, target: str, zstd: bool, tmp_path: Path
) -> None:
    source = tmp_path / f"source.{form}"
    source.write_bytes(RECORDING_FORMATS[form](recording))
    original = list(iter_spans(source))
    out = convert(source, tmp_path / "converted", target, zstd)
    assert same_spans(list(iter_spans(out))) == same_spans(original)
    before, after = spanreplay.load(source, "run_b"), spanreplay.load(out, "run_b")
    assert [(e.seq, e.call_id, e.input_json, e.output_json) for e in after] == [
        (e.seq, e.call_id, e.input_json, e.output_json) for e in before
    ]
    assert after.events[-1].output == "é☃x" * 3000


@pytest.mark.parametrize(("target", "zstd"), [("otlp-json", False), ("otlp-proto", False)], ids=["json", "proto"])
def test_converting_a_converted_file_gives_the_same_bytes(
    recording: bytes, target: str, zstd: bool, tmp_path: Path
) -> None:
    source = tmp_path / "run.jsonl"
    source.write_bytes(recording)
    once = convert(source, tmp_path / "once", target, zstd)
    twice = convert(once, tmp_path / "twice", target, zstd)
    assert once.read_bytes() == twice.read_bytes()


def test_run_option_keeps_only_that_runs_spans(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    record_failing("run_c")
    out = convert(trace_dir, tmp_path / "c.jsonl", "otlp-json", False, "--run", "run_c")
    assert {s.attributes["spanreplay.run.id"] for s in iter_spans(out)} == {"run_c"}
    assert [r.run_id for r in spanreplay.runs(out)] == ["run_c"]
    missing = invoke("convert", str(trace_dir), "--to", "otlp-json", "-o", str(tmp_path / "x"), "--run", "run_zz")
    assert missing.exit_code == 2
    assert "Run run_zz is not in" in missing.stderr
    assert not (tmp_path / "x").exists()


def test_converted_lines_are_what_the_collector_writes(recording: bytes, tmp_path: Path) -> None:
    source = tmp_path / "run.jsonl"
    source.write_bytes(recording)
    out = convert(source, tmp_path / "out.jsonl", "otlp-json", False)
    for raw in lines(out):
        doc = orjson.loads(raw)
        assert set(doc) == {"resourceSpans"}
        span = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        assert len(span["traceId"]) == 32
        assert isinstance(span["startTimeUnixNano"], str)


def test_a_failed_conversion_leaves_the_existing_output_alone(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"resourceSpans": []}\n{not json\n')
    out = tmp_path / "out.jsonl"
    out.write_bytes(b"previous")
    result = invoke("convert", str(bad), "--to", "otlp-json", "-o", str(out))
    assert result.exit_code == 2
    assert "bad.jsonl:2: not valid JSON" in result.stderr
    assert out.read_bytes() == b"previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl", "out.jsonl"]


def test_convert_from_a_backend_needs_a_run_and_writes_it(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    server = BackendServer("tempo")
    server.add(iter_spans(trace_dir))
    with serving(server):
        url = f"tempo+{server.url}"
        no_run = invoke("convert", url, "--to", "otlp-proto", "-o", str(tmp_path / "x"))
        assert no_run.exit_code == 2
        assert "name the run to convert with --run RUN" in no_run.stderr
        out = convert(url, tmp_path / "a.proto", "otlp-proto", False, "--run", "run_a")
    assert [e.key for e in spanreplay.load(out, "run_a")][:2] == ["search", "now"]


def test_convert_to_stdout_pipes_into_another_spanreplay(recording: bytes, tmp_path: Path) -> None:
    source = tmp_path / "run.jsonl"
    source.write_bytes(recording)
    converted = subprocess.run(
        [sys.executable, "-m", "spanreplay.cli", "convert", str(source), "--to", "otlp-proto", "-o", "-"],
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert converted.stdout[4:5] == b"\x0a"  # a length prefix, then a TracesData message
    listed = subprocess.run(
        [sys.executable, "-m", "spanreplay.cli", "runs", "-", "--json"],
        input=converted.stdout,
        capture_output=True,
        timeout=60,
        check=True,
    )
    assert [r["run_id"] for r in orjson.loads(listed.stdout)] == ["run_b"]

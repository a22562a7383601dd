"""Payloads across the limits of the SDK and the backends: what passes whole, and what is caught when cut.

The layout (inline up to 2000 bytes, else an array of chunks of at most 2000
bytes; length and sha256 beside) must pass Tempo's default 2048-byte string cut,
the SDK's 128-attribute limit and Jaeger's tag mapping unchanged. Each cut is
simulated the way it happens (the SDK's own span limits, Tempo's byte cut of
string values, attributes dropped on the way) and must end in an error that names
the run, the seq, the attribute and the setting to raise, never in a replay.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider

import spanreplay
from fixtures.backends import jaeger_trace, tempo_v2
from fixtures.recordings import lines
from spanreplay import PayloadIntegrityError, TraceFormatError
from spanreplay.model.payloads import CHUNK_BYTES, INLINE_MAX_BYTES, payload_attributes
from spanreplay.readers import iter_spans

TEMPO_DEFAULT_MAX_ATTRIBUTE_BYTES = 2048
SDK_DEFAULT_ATTRIBUTE_COUNT = 128
# Text that Go's JSON encoder escapes (Jaeger writes arrays as JSON text with it), and multibyte characters.
AWKWARD = "<tag a='1'>&amp;</tag> é☃𝄞 \u2028 \"quoted\" \\ "


def awkward_payload(size: int) -> str:
    return (AWKWARD * (size // len(AWKWARD.encode()) + 1))[: size // 2]


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Any]:
    """Configure spanreplay on a provider with the given SDK span limits."""
    providers: list[TracerProvider] = []

    def configure(**limits: int) -> Path:
        provider = TracerProvider(
            resource=Resource.create({"service.name": "limits"}), span_limits=SpanLimits(**limits)
        )
        providers.append(provider)
        directory = tmp_path / "traces"
        spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
        return directory

    yield configure
    for provider in providers:
        provider.shutdown()


def record_fetch(output: str, *, extra: dict[str, Any] | None = None) -> None:
    with spanreplay.record(agent="limits", run_id="run_l"):
        spanreplay.boundary("tool", "search", {"q": "a"}, lambda: {"hits": 1})
        spanreplay.boundary("tool", "fetch", {"url": "https://example.test"}, lambda: output, attributes=extra)


# --- what passes whole ----------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=9000))
def test_every_payload_attribute_fits_under_tempos_default_cut(text: str) -> None:
    data = orjson.dumps(text)
    attributes = payload_attributes("spanreplay.output", data)
    value = attributes["spanreplay.output"]
    pieces = [value] if isinstance(value, str) else list(value)
    assert all(len(piece.encode()) <= TEMPO_DEFAULT_MAX_ATTRIBUTE_BYTES for piece in pieces)
    assert "".join(pieces).encode() == data
    assert len(attributes) == 3  # one payload costs three attributes, whatever its size


def test_the_inline_threshold_and_chunk_size_stay_under_the_cut() -> None:
    assert INLINE_MAX_BYTES <= TEMPO_DEFAULT_MAX_ATTRIBUTE_BYTES
    assert CHUNK_BYTES <= TEMPO_DEFAULT_MAX_ATTRIBUTE_BYTES


def test_a_megabyte_payload_stays_far_under_the_sdk_attribute_count(trace_dir: Path) -> None:
    record_fetch(awkward_payload(1_000_000))
    spans = [s for s in iter_spans(trace_dir) if s.attributes.get("spanreplay.key") == "fetch"]
    assert spans
    assert all(len(s.attributes) < 20 and s.dropped_attributes_count == 0 for s in spans)
    assert spanreplay.load(trace_dir, "run_l").events[-1].output == awkward_payload(1_000_000)


def test_a_span_full_of_other_attributes_loses_those_not_the_payload(limited: Any) -> None:
    # Past 128 the SDK evicts the oldest attributes; the boundary's own come last.
    directory = limited(max_span_attributes=SDK_DEFAULT_ATTRIBUTE_COUNT)
    extra = {f"app.attribute.{i}": i for i in range(SDK_DEFAULT_ATTRIBUTE_COUNT)}
    record_fetch(awkward_payload(50_000), extra=extra)
    span = next(s for s in iter_spans(directory) if s.attributes.get("spanreplay.key") == "fetch" and s.ended)
    assert span.dropped_attributes_count > 0
    assert spanreplay.load(directory, "run_l").events[-1].output == awkward_payload(50_000)


def test_jaeger_arrays_as_go_json_text_give_the_payload_back(trace_dir: Path, tmp_path: Path) -> None:
    record_fetch(awkward_payload(30_000))
    spans = list(iter_spans(trace_dir))
    jaeger = jaeger_trace(spans)
    tags = {t["key"]: t for s in jaeger["spans"] for t in s["tags"] if t["key"] == "spanreplay.output"}
    text = tags["spanreplay.output"]["value"]
    assert tags["spanreplay.output"]["type"] == "string"
    assert text.startswith('["')
    assert "\\u003c" in text
    path = tmp_path / "jaeger.json"
    path.write_bytes(orjson.dumps({"data": [jaeger]}))
    assert spanreplay.load(path, "run_l").events[-1].output == awkward_payload(30_000)


def test_a_payload_that_itself_looks_like_a_json_array_is_not_mistaken_for_chunks(
    trace_dir: Path, tmp_path: Path
) -> None:
    with spanreplay.record(agent="limits", run_id="run_l"):
        spanreplay.boundary("tool", "list", {}, lambda: ["a", "b"])
    path = tmp_path / "jaeger.json"
    path.write_bytes(orjson.dumps({"data": [jaeger_trace(list(iter_spans(trace_dir)))]}))
    assert spanreplay.load(path, "run_l").events[0].output == ["a", "b"]


# --- what is caught when cut ----------------------------------------------------------------------


def assert_names_the_cut(exc: PayloadIntegrityError, attribute: str, *settings_named: str) -> None:
    message = str(exc)
    assert (exc.run_id, exc.seq, exc.attribute) == ("run_l", 2, attribute)
    assert message.startswith(f"Run run_l seq 2: attribute {attribute} ")
    assert "nothing was replayed from it" in message.lower()
    for name in settings_named:
        assert name in message


def test_sdk_value_length_limit_is_caught_naming_the_variable(limited: Any) -> None:
    directory = limited(max_attribute_length=1000)
    record_fetch(awkward_payload(20_000))
    with pytest.raises(PayloadIntegrityError) as info:
        spanreplay.load(directory, "run_l")
    assert_names_the_cut(info.value, "spanreplay.output", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT")
    assert info.value.expected_size == len(orjson.dumps(awkward_payload(20_000)))
    assert 0 < info.value.found_size < info.value.expected_size
    assert f"{info.value.expected_size} bytes expected, {info.value.found_size} found" in str(info.value)


def test_tempo_byte_cut_below_the_inline_size_is_caught_naming_max_attribute_bytes(
    trace_dir: Path, tmp_path: Path
) -> None:
    # Tempo cuts string values and leaves arrays alone: a lowered max_attribute_bytes
    # reaches the payloads written inline, never the chunked ones.
    record_fetch("x" * 1500)
    path = tmp_path / "tempo.json"
    path.write_bytes(orjson.dumps(tempo_v2(list(iter_spans(trace_dir)), max_attribute_bytes=1024)))
    with pytest.raises(PayloadIntegrityError) as info:
        spanreplay.load(path, "run_l")
    assert_names_the_cut(info.value, "spanreplay.output", "Tempo's max_attribute_bytes")


def test_a_cut_that_keeps_the_length_is_caught_by_the_digest(trace_dir: Path) -> None:
    record_fetch("a" * 5000)
    path = trace_dir / "run_l.jsonl"
    path.write_bytes(path.read_bytes().replace(b"aaaa", b"aaab", 1))
    with pytest.raises(PayloadIntegrityError, match="but their sha256 does not match the recorded one") as info:
        spanreplay.load(path, "run_l")
    assert_names_the_cut(info.value, "spanreplay.output")


@pytest.mark.parametrize(
    ("dropped", "attribute", "fix"),
    [
        ("spanreplay.output", "spanreplay.output", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"),
        ("spanreplay.output.sha256", "spanreplay.output", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"),
        ("spanreplay.input", "spanreplay.input", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"),
    ],
)
def test_dropped_payload_attributes_are_caught(trace_dir: Path, dropped: str, attribute: str, fix: str) -> None:
    # As a Collector attributes processor, or a backend's own limit, drops them on the way.
    record_fetch(awkward_payload(6000))
    path = trace_dir / "run_l.jsonl"
    kept = []
    for raw in lines(path):
        doc = orjson.loads(raw)
        for resource_spans in doc["resourceSpans"]:
            for scope_spans in resource_spans["scopeSpans"]:
                for span in scope_spans["spans"]:
                    if any(a["value"].get("stringValue") == "fetch" for a in span["attributes"]):
                        span["attributes"] = [a for a in span["attributes"] if a["key"] != dropped]
                        span["droppedAttributesCount"] = 1
        kept.append(orjson.dumps(doc) + b"\n")
    path.write_bytes(b"".join(kept))
    with pytest.raises(PayloadIntegrityError) as info:
        spanreplay.load(path, "run_l")
    assert_names_the_cut(info.value, attribute, fix)


def test_spans_evicted_from_the_run_by_the_sdk_count_limit_are_reported_with_the_limit(limited: Any) -> None:
    # So low a limit evicts the oldest attributes, the run id among them: the span leaves the run.
    directory = limited(max_span_attributes=12)
    record_fetch(awkward_payload(6000))
    with pytest.raises(TraceFormatError, match=r"missing the spans at seq .*OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"):
        spanreplay.load(directory, "run_l")

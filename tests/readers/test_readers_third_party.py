"""The readers against trace files written by other projects (tests/fixtures/third_party).

Each test checks concrete decoded values against the file's text, so a reader
that loses a field, swaps an enum or misreads an id fails here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

import spanreplay
from helpers.paths import THIRD_PARTY
from spanreplay.model.spans import SpanEventRecord, SpanLinkRecord, SpanRecord
from spanreplay.readers import iter_spans
from spanreplay.readers._otlp_json import any_value, key_values

ALL_FILES = sorted(p for p in THIRD_PARTY.rglob("*") if p.is_file() and p.name != "SOURCES.md")
# The one file that holds model calls of another instrumentation: a foreign run (spanreplay.sources.foreign).
GENAI = THIRD_PARTY / "jaeger-ui" / "genaiTestTrace.json"
NO_RUNS = [p for p in ALL_FILES if p != GENAI]


def spans_of(relative: str) -> list[SpanRecord]:
    return list(iter_spans(THIRD_PARTY / relative))


def normalized(span: SpanRecord) -> SpanRecord:
    """The span without where it was read from, for comparing across formats."""
    return msgspec.structs.replace(span, origin="")


def test_every_listed_source_file_is_present() -> None:
    listed = (THIRD_PARTY / "SOURCES.md").read_text()
    names = {str(p.relative_to(THIRD_PARTY)) for p in ALL_FILES}
    assert len(names) == 10
    for name in names:
        assert f"`{name}`" in listed


@pytest.mark.parametrize("path", NO_RUNS, ids=lambda p: str(p.relative_to(THIRD_PARTY)))
def test_third_party_file_reads_and_holds_no_spanreplay_runs(path: Path) -> None:
    spans = list(iter_spans(path))
    assert all(span.origin.startswith(str(path)) for span in spans)
    assert spanreplay.runs(path) == []


def test_the_genai_agent_trace_is_a_run_named_by_its_trace_id() -> None:
    (run,) = spanreplay.runs(GENAI)
    assert run.run_id == run.trace_id == "4a1b2c3d4e5f60718293a4b5c6d7e8f9"
    assert run.agent == "genai"
    log = spanreplay.load(GENAI, run.run_id)
    assert run.steps == len(log) == 11
    assert [e.kind for e in log].count("model") == run.model_calls == 5
    assert log.events[1].call_id == "tool:list_dashboards#0"
    assert log.events[1].output == {"status": "ok", "rows": 12}
    # Its summarize_findings span holds no result: said up front, and no step of the run.
    assert log.run.gaps == ("tool summarize_findings: no recorded result, will run live",)
    assert "summarize_findings" not in {e.key for e in log}


@pytest.mark.parametrize("path", NO_RUNS, ids=lambda p: str(p.relative_to(THIRD_PARTY)))
def test_loading_a_third_party_file_says_it_holds_no_runs(path: Path) -> None:
    with pytest.raises(spanreplay.RunNotFoundError, match="holds no spanreplay runs"):
        spanreplay.load(path)


def test_the_whole_third_party_directory_reads_as_one_source() -> None:
    total = sum(len(list(iter_spans(p))) for p in ALL_FILES)
    with pytest.warns(spanreplay.SpanReplayWarning, match=r"Skipped .*SOURCES\.md: not a trace file"):
        assert len(list(iter_spans(THIRD_PARTY))) == total == 84
    with pytest.warns(spanreplay.SpanReplayWarning, match="SOURCES.md"):
        assert [r.run_id for r in spanreplay.runs(THIRD_PARTY)] == ["4a1b2c3d4e5f60718293a4b5c6d7e8f9"]


# --- opentelemetry-proto -------------------------------------------------------------


def test_otlp_proto_example_trace_decodes_every_field() -> None:
    (span,) = spans_of("opentelemetry-proto/trace.json")
    assert normalized(span) == SpanRecord(
        trace_id="5b8efff798038103d269b633813fc60c",  # the file writes uppercase hex
        span_id="eee19b7ec3c1b174",
        parent_span_id="eee19b7ec3c1b173",
        name="I'm a server span",
        kind=2,
        start_ns=1544712660000000000,
        end_ns=1544712661000000000,
        attributes={"my.span.attr": "some value"},
        resource={"service.name": "my.service"},
        scope_name="my.library",
        scope_version="1.0.0",
        scope_attributes={"my.scope.attribute": "some scope attribute"},
    )


def log_record_attributes() -> list[Any]:
    doc = orjson.loads((THIRD_PARTY / "opentelemetry-proto/logs.json").read_bytes())
    (record,) = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    attributes: list[Any] = record["attributes"]
    return attributes


def test_key_values_decodes_every_any_value_shape_of_the_upstream_logs_example() -> None:
    decoded = key_values(log_record_attributes())
    assert decoded == {
        "string.attribute": "some string",
        "boolean.attribute": True,
        "int.attribute": 10,
        "double.attribute": 637.704,
        "array.attribute": ["many", "values"],
        "map.attribute": {"some.map.key": "some value"},
    }
    assert type(decoded["int.attribute"]) is int  # intValue is a JSON string in the file
    assert type(decoded["double.attribute"]) is float


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("string.attribute", "some string"),
        ("boolean.attribute", True),
        ("int.attribute", 10),
        ("double.attribute", 637.704),
        ("array.attribute", ["many", "values"]),
        ("map.attribute", {"some.map.key": "some value"}),
    ],
)
def test_any_value_decodes_each_shape_alone(key: str, expected: Any) -> None:
    by_key = {item["key"]: item["value"] for item in log_record_attributes()}
    assert any_value(by_key[key]) == expected


def test_logs_file_is_valid_otlp_without_spans() -> None:
    assert spans_of("opentelemetry-proto/logs.json") == []


# --- opentelemetry-specification: the Collector file exporter's format ----------------


def test_file_exporter_example_decodes_empty_ids_events_links_status_and_dropped_counts() -> None:
    spans = spans_of("opentelemetry-specification/file-exporter-traces-example.jsonl")
    assert [s.name for s in spans] == ["operationA", "operationB"] * 4
    assert [s.origin.rsplit(":", 1)[1] for s in spans] == ["1", "1", "2", "2", "3", "3", "4", "4"]
    first_a, first_b = spans[0], spans[1]
    assert (first_a.trace_id, first_a.span_id, first_a.parent_span_id) == ("", "", None)
    assert first_a.resource == {"resource-attr": "resource-attr-val-1"}
    assert (first_a.scope_name, first_a.scope_version) == ("", "")
    assert (first_a.start_ns, first_a.end_ns) == (1581452772000000321, 1581452773000000789)
    assert first_a.kind == 0  # no kind in the file: SPAN_KIND_UNSPECIFIED
    assert (first_a.status_code, first_a.status_message) == (2, "status-cancelled")
    assert first_a.dropped_attributes_count == 1
    assert first_a.dropped_events_count == 1
    assert first_a.events == (
        SpanEventRecord(
            name="event-with-attr",
            time_ns=1581452773000000123,
            attributes={"span-event-attr": "span-event-attr-val"},
            dropped_attributes_count=2,
        ),
        SpanEventRecord(name="event", time_ns=1581452773000000123, dropped_attributes_count=2),
    )
    assert first_b.status_code == 0
    assert first_b.dropped_links_count == 3
    assert first_b.links == (
        SpanLinkRecord(
            trace_id="", span_id="", attributes={"span-link-attr": "span-link-attr-val"}, dropped_attributes_count=4
        ),
        SpanLinkRecord(trace_id="", span_id="", dropped_attributes_count=1),
    )
    assert spans[7].end_ns == 1581452772000012924
    assert spans[7].dropped_links_count == 5


# --- Jaeger ----------------------------------------------------------------------------


def test_jaeger_apiv3_get_trace_unwraps_result_and_reads_omitted_fields_as_defaults() -> None:
    (span,) = spans_of("jaeger/apiv3_GetTrace.json")
    assert normalized(span) == SpanRecord(
        trace_id="00000000000000000000000000000001",
        span_id="0000000000000002",
        name="foobar",
        kind=2,
        status_code=2,
    )


def test_jaeger_otel_traces_fixture_decodes_bytes_links_trace_state_and_scopes() -> None:
    spans = spans_of("jaeger/otel_traces_01.json")
    assert [(s.name, s.kind, s.scope_name, s.scope_version) for s in spans] == [
        ("test-general-conversion-2", 2, "testing-library-2", "1.1.1"),
        ("test-general-conversion-3", 3, "testing-library-2", "1.1.1"),
        ("test-general-conversion-4", 4, "testing-library-3", "1.1.2"),
        ("test-general-conversion-5", 5, "testing-library-3", "1.1.2"),
    ]
    first = spans[0]
    assert first.trace_id == "00000000000000010000000000000000"
    assert first.parent_span_id == "0000000000000003"
    assert first.trace_state == "state.2"
    assert first.attributes == {
        "peer.service": "service-y",
        "peer.ipv4": 23456,
        "blob": b"\x00\x0009",
        "temperature": 72.5,
    }
    assert first.scope_attributes == {"scope.attributes.2": "attribute-y"}
    assert first.events[1] == SpanEventRecord(name="", time_ns=1485467191639875000, attributes={"x": "y"})
    assert first.links[1] == SpanLinkRecord(
        trace_id="00000000000000ff0000000000000000",
        span_id="00000000000000ff",
        attributes={"opentracing.ref_type": "child_of"},
    )
    assert first.status_code == 2
    assert spans[3].resource == {"service.name": "service-x"}


def test_jaeger_transform_input_and_output_give_the_same_spans() -> None:
    otlp = [normalized(s) for s in spans_of("jaeger/otlp2jaeger-in.json")]
    jaeger = [normalized(s) for s in spans_of("jaeger/otlp2jaeger-out.json")]
    assert otlp == jaeger
    # The input holds the same span twice (same span id): readers keep both; the loader dedupes.
    assert len(otlp) == 2
    assert otlp[0] == otlp[1]
    assert otlp[0] == SpanRecord(
        trace_id="83a9efd15c1c98a977e0711cc93ee28b",
        span_id="e127af99e3b3e074",
        parent_span_id="909541b92cf05311",
        name="okey-dokey-0",
        kind=2,
        start_ns=1706678909209712000,
        end_ns=1706678909209835000,
        attributes={"net.peer.ip": "1.2.3.4", "peer.service": "telemetrygen-client"},
        resource={"service.name": "telemetrygen"},
        scope_name="telemetrygen",
    )


def test_jaeger_ui_trace_decodes_every_tag_type() -> None:
    spans = spans_of("jaeger/ui_01.json")
    tagged = spans[1]
    assert tagged.attributes == {
        "peer.service": "service-y",
        "peer.ipv4": 23456,
        "temperature": 72.5,
        "javascript_limit": 9223372036854775222,  # beyond 2^53: a JSON string in the file
        "blob": b"\x00\x0009",
    }
    # error=true is how Jaeger writes an error status; it becomes the status again.
    assert tagged.status_code == 2


def test_jaeger_ui_trace_pads_64_bit_trace_ids_and_converts_microseconds() -> None:
    spans = spans_of("jaeger/ui_01.json")
    assert {s.trace_id for s in spans} == {"00000000000000000000000000000001"}
    assert [s.span_id for s in spans] == [
        "0000000000000002",
        "0000000000000002",
        "0000000000000003",
        "0000000000000004",
        "0000000000000005",
    ]
    assert (spans[0].start_ns, spans[0].end_ns) == (1485467191639875000, 1485467191639880000)
    assert spans[4].end_ns - spans[4].start_ns == 4000
    assert [s.resource for s in spans] == [{"service.name": "service-x"}] * 2 + [{"service.name": "service-y"}] * 3


def test_jaeger_ui_trace_turns_logs_into_events() -> None:
    spans = spans_of("jaeger/ui_01.json")
    assert spans[0].events == (
        SpanEventRecord(name="some-event", time_ns=1485467191639875000),
        SpanEventRecord(name="", time_ns=1485467191639875000, attributes={"x": "y"}),
    )


def test_jaeger_references_become_parent_and_links_as_jaeger_converts_them() -> None:
    spans = spans_of("jaeger/ui_01.json")
    assert spans[2].parent_span_id == "0000000000000002"
    assert spans[2].links == ()
    reference_test = spans[3]
    # The parent is the first CHILD_OF reference inside the same trace; a CHILD_OF into
    # another trace and a FOLLOWS_FROM stay links, tagged with their reference type.
    assert reference_test.parent_span_id == "0000000000000002"
    assert reference_test.links == (
        SpanLinkRecord(
            trace_id="000000000000000000000000000000ff",
            span_id="00000000000000ff",
            attributes={"opentracing.ref_type": "child_of"},
        ),
        SpanLinkRecord(
            trace_id="00000000000000000000000000000001",
            span_id="0000000000000002",
            attributes={"opentracing.ref_type": "follows_from"},
        ),
    )
    assert spans[0].parent_span_id is None


def test_jaeger_ui_genai_trace_reads_all_57_spans_past_its_comment_key() -> None:
    spans = spans_of("jaeger-ui/genaiTestTrace.json")
    assert len(spans) == 57
    assert len({s.span_id for s in spans}) == 57
    assert {s.trace_id for s in spans} == {"4a1b2c3d4e5f60718293a4b5c6d7e8f9"}
    agent, chat = spans[3], spans[4]
    assert agent.name == "invoke_agent triage-agent"
    assert agent.resource == {"service.name": "coding-agent"}
    assert chat.name == "chat model-a"
    assert chat.kind == 3
    assert chat.parent_span_id == "0000000000000004"
    assert (chat.start_ns, chat.end_ns) == (1770000000005000000, 1770000001805000000)  # 1.8 s in microseconds
    assert chat.attributes["gen_ai.usage.input_tokens"] == 1840
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 920
    assert "span.kind" not in chat.attributes
    messages = orjson.loads(chat.attributes["gen_ai.input.messages"])  # a JSON string in Jaeger
    assert messages[0]["role"] == "user"
    failing = spans[16]
    assert (failing.name, failing.status_code, failing.kind) == ("GET /api/v1/pods", 2, 2)
    assert "error" not in failing.attributes
    assert failing.attributes["http.response.status_code"] == 500
    tool = spans[6]
    assert (tool.name, tool.kind) == ("execute_tool list_dashboards", 1)
    assert tool.attributes["gen_ai.tool.call.id"] == "call_list_dashboards"


def test_jaeger_ui_multi_line_otlp_file_reads_one_span_per_line() -> None:
    spans = spans_of("jaeger-ui/otlp2jaeger-multi-in.jsonl")
    assert len(spans) == 4
    assert {s.trace_id for s in spans} == {"c620759e5d60fafb8ee0922b30e06bc6"}
    assert spans[0].span_id == "26f5ef9dbb885479"
    assert spans[0].parent_span_id == "49b8e9efa1e8a3b1"
    assert (spans[0].start_ns, spans[0].end_ns) == (1711138246978000000, 1711138247024460625)
    assert spans[0].scope_name == "ohboy"
    assert spans[0].resource["telemetry.sdk.language"] == "nodejs"

"""The typed fast path for OTLP/JSON lines gives what orjson and the checked reader give, or stands aside.

``line_spans`` either returns exactly the spans that ``orjson.loads`` followed by
the checked reader returns for the same bytes, or None (and the checked reader
reads the line). Pinned over the third-party fixtures, real recordings,
generated documents in every variant the reader accepts, damaged documents and
damaged bytes; and the fast path must take the common shapes, or it would
pass these checks by refusing everything.
"""

from __future__ import annotations

import base64
import tempfile
import warnings
from pathlib import Path
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fixtures.garbage import ANY_VALUE, INT64, dumps, mutated
from fixtures.recordings import lines, record_agent
from fixtures.tracedocs import document, span
from helpers.paths import THIRD_PARTY
from spanreplay import SpanReplayError, SpanReplayWarning
from spanreplay.readers import _otlp_json_typed, read_file
from spanreplay.readers._base import MalformedTrace
from spanreplay.readers._otlp_json import MAX_DEPTH
from spanreplay.readers._otlp_json_typed import line_spans
from spanreplay.readers.documents import document_spans

THIRD_PARTY_LINES = [
    raw
    for path in sorted(THIRD_PARTY.rglob("*.json*"))
    for raw in ([path.read_bytes()] if path.suffix == ".json" else path.read_bytes().splitlines())
]
THIRD_PARTY_DOCS = [orjson.loads(raw) for raw in THIRD_PARTY_LINES]
PROFILE = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ORIGIN = "t.jsonl:3"


def checked(line: bytes) -> str:
    """What ``orjson.loads`` and the checked reader make of a line, as text that tells every value apart."""
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        return "not JSON"
    try:
        return repr(list(document_spans(doc, ORIGIN)))
    except MalformedTrace as exc:
        return f"refused: {exc}"


def agrees(line: bytes) -> bool:
    """Whether the fast path took the line; fails the test if it took it and read it otherwise."""
    fast = line_spans(line, ORIGIN)
    if fast is None:
        return False
    # repr tells 1 from 1.0 and True, -0.0 from 0.0, and keeps the attributes' order.
    assert repr(fast) == checked(line)
    return True


# --- documents in the variants the reader accepts ---------------------------------------------

HEX = "0123456789abcdef"


def hex_text(size: int) -> st.SearchStrategy[str]:
    return st.text(alphabet=HEX + HEX.upper(), min_size=size, max_size=size)


def ids(size: int) -> st.SearchStrategy[str]:
    """An id as producers write it: hex (either case), base64 (Tempo), or a 64-bit Jaeger trace id."""
    variants = [hex_text(size * 2), st.binary(min_size=size, max_size=size).map(lambda b: base64.b64encode(b).decode())]
    if size == 16:
        variants.append(hex_text(16))
    return st.one_of(*variants)


def int64(value: int) -> st.SearchStrategy[Any]:
    return st.sampled_from([str(value), value])


SCALAR_VALUES = st.one_of(
    st.builds(lambda s: {"stringValue": s}, st.text(max_size=12)),
    INT64.flatmap(lambda i: int64(i).map(lambda v: {"intValue": v})),
    st.builds(lambda b: {"boolValue": b}, st.booleans()),
    st.builds(lambda f: {"doubleValue": f}, st.floats(allow_nan=False, allow_infinity=False) | INT64),
    st.sampled_from([{"doubleValue": "NaN"}, {"doubleValue": "-Infinity"}, {"doubleValue": "2.5"}]),
    st.builds(lambda b: {"bytesValue": base64.b64encode(b).decode()}, st.binary(max_size=12)),
    st.just({}),
)


def several(values: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """AnyValues with one field set, or several (which one counts is the reader's to choose)."""
    return st.lists(values, min_size=1, max_size=3).map(lambda found: {k: v for d in found for k, v in d.items()})


ANY_VALUES: st.SearchStrategy[Any] = st.recursive(
    several(SCALAR_VALUES),
    lambda inner: several(
        st.one_of(
            SCALAR_VALUES,
            st.builds(lambda vs: {"arrayValue": {"values": vs}}, st.lists(inner, max_size=3)),
            st.builds(
                lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}},
                st.lists(st.tuples(st.text(max_size=4), inner), max_size=3),
            ),
        )
    ),
    max_leaves=8,
)
ATTRIBUTES = st.lists(st.tuples(st.sampled_from(["a", "b", "run.id", ""]), ANY_VALUES), max_size=5).map(
    lambda kvs: [{"key": k, "value": v} for k, v in kvs]
)
KINDS = st.integers(min_value=0, max_value=5).flatmap(
    lambda k: st.sampled_from([k, "SPAN_KIND_CLIENT", "SPAN_KIND_INTERNAL"])
)
STATUSES = st.one_of(
    st.just({}),
    st.fixed_dictionaries({}, optional={"code": st.sampled_from([0, 1, 2, "STATUS_CODE_ERROR"]), "message": st.text()}),
)
COUNTS = st.integers(min_value=0, max_value=2**32)
# Times are zero or more: a negative one is refused (test_a_negative_time_is_refused_by_both_paths).
TIMES = st.integers(min_value=0, max_value=2**63 - 1).flatmap(int64)
EVENTS = st.lists(
    st.fixed_dictionaries(
        {"name": st.text(max_size=6), "timeUnixNano": TIMES},
        optional={"attributes": ATTRIBUTES, "droppedAttributesCount": COUNTS},
    ),
    max_size=2,
)
LINKS = st.lists(
    st.fixed_dictionaries(
        {"traceId": ids(16), "spanId": ids(8)},
        optional={"attributes": ATTRIBUTES, "traceState": st.text(max_size=6), "flags": COUNTS},
    ),
    max_size=2,
)
SPANS = st.fixed_dictionaries(
    {"traceId": ids(16), "spanId": ids(8), "name": st.text(max_size=10)},
    optional={
        "parentSpanId": st.one_of(ids(8), st.just(""), st.none()),
        "kind": KINDS,
        "startTimeUnixNano": TIMES,
        "endTimeUnixNano": TIMES,
        "attributes": ATTRIBUTES,
        "status": STATUSES | st.none(),
        "traceState": st.text(max_size=8),
        "flags": COUNTS,
        "events": EVENTS,
        "links": LINKS,
        "droppedAttributesCount": COUNTS,
        "droppedEventsCount": COUNTS,
        "droppedLinksCount": COUNTS,
    },
)
SCOPES = st.fixed_dictionaries(
    {}, optional={"name": st.text(max_size=6), "version": st.text(max_size=4), "attributes": ATTRIBUTES}
)


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A TracesData in any of the shapes producers write: old field names, Tempo's batches, nulls."""
    scope_spans = [
        {
            **draw(st.fixed_dictionaries({}, optional={"scope": SCOPES | st.none(), "instrumentationLibrary": SCOPES})),
            "spans": draw(st.lists(SPANS, max_size=3)),
        }
        for _ in range(draw(st.integers(min_value=0, max_value=2)))
    ]
    names = draw(
        st.sampled_from(
            [["scopeSpans"], ["instrumentationLibrarySpans"], ["scopeSpans", "instrumentationLibrarySpans"]]
        )
    )
    resource_spans = {
        "resource": draw(st.one_of(st.none(), st.fixed_dictionaries({}, optional={"attributes": ATTRIBUTES}))),
        **{name: scope_spans[: draw(st.integers(min_value=0, max_value=2))] for name in names},
        "schemaUrl": "https://opentelemetry.io/schemas/1.21.0",
    }
    return {draw(st.sampled_from(["resourceSpans", "batches"])): [resource_spans]}


@PROFILE
@given(documents())
def test_generated_documents_read_alike_and_the_fast_path_takes_them(doc: dict[str, Any]) -> None:
    assert agrees(orjson.dumps(doc) + b"\n")


@PROFILE
@given(
    st.sampled_from(["startTimeUnixNano", "endTimeUnixNano", "timeUnixNano"]),
    st.integers(min_value=-(2**63), max_value=-1).flatmap(int64),
)
def test_a_negative_time_is_refused_by_both_paths(field: str, time: Any) -> None:
    span: dict[str, Any] = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "s"}
    if field == "timeUnixNano":
        span["events"] = [{"name": "e", field: time}]
    else:
        span[field] = time
    line = orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}) + b"\n"
    assert line_spans(line, ORIGIN) is None
    assert checked(line).startswith("refused: span 0 's': expected ")
    assert checked(line).endswith(f" (zero or more), found {int(time)}")


def test_third_party_lines_read_alike_and_the_otlp_ones_take_the_fast_path() -> None:
    taken = [raw for raw in THIRD_PARTY_LINES if agrees(raw)]
    otlp = [raw for raw in THIRD_PARTY_LINES if orjson.loads(raw).keys() == {"resourceSpans"}]
    assert taken == otlp
    assert len(taken) >= 5


def test_recorded_runs_take_the_fast_path(trace_dir: Path) -> None:
    record_agent("run_a", big=True)
    recorded = lines(next(trace_dir.glob("*.jsonl")))
    assert recorded
    assert all(agrees(raw) for raw in recorded)


NESTINGS = {
    "array": ('{"arrayValue":{"values":[', "]}}"),
    "kvlist": ('{"kvlistValue":{"values":[{"key":"k","value":', "}]}}"),
}


@pytest.mark.parametrize("depth", [1, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, 300, 3000])
@pytest.mark.parametrize("shape", NESTINGS)
@pytest.mark.parametrize("leaf", ['{"stringValue":"x"}', "{}"])
def test_nested_values_read_alike_at_every_depth(depth: int, shape: str, leaf: str) -> None:
    opening, closing = NESTINGS[shape]
    value = opening * depth + leaf + closing * depth
    # Within the limit the fast path reads it (an empty value is allowed one level more, as
    # any_value allows it); past it, or past orjson's own limit, the checked reader words the refusal.
    assert agrees(spans_line(b"", attributes=f'[{{"key":"deep","value":{value}}}]'.encode())) == (
        depth < MAX_DEPTH or (leaf == "{}" and depth == MAX_DEPTH)
    )


# --- the edges of JSON (where msgspec and orjson could differ) and of the OTLP mapping ------------

SPAN = orjson.dumps(span())[1:-1]


def spans_line(fields: bytes, *, attributes: bytes = b"[]") -> bytes:
    """A line of one span, raw bytes added to its fields (a key already there appears twice)."""
    fields = SPAN.replace(b'"attributes":[]', b'"attributes":' + attributes) + fields
    return b'{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[{' + fields + b"}]}]}]}"


@pytest.mark.parametrize(
    "line",
    [
        spans_line(b',"flags":1e400'),  # orjson: infinity
        spans_line(b',"flags":' + b"9" * 400),
        spans_line(b',"flags":18446744073709551615'),  # uint64: beyond msgspec's int64 bounds
        spans_line(b',"kind":9223372036854775808'),
        spans_line(b',"kind":-9223372036854775809'),  # orjson: a float
        spans_line(b',"startTimeUnixNano":123456789012345678901234567890'),
        spans_line(b"", attributes=b'[{"key":"n","value":{"intValue":99999999999999999999}}]'),
        spans_line(b"", attributes=b'[{"key":"d","value":{"doubleValue":1e999}}]'),
        spans_line(b"", attributes=b'[{"key":"d","value":{"doubleValue":1.7976931348623159e308}}]'),
        spans_line(b"", attributes=b'[{"key":"d","value":{"doubleValue":2.2250738585072011e-308}}]'),
        spans_line(b"", attributes=b'[{"key":"d","value":{"doubleValue":0.1000000000000000055511151231257827}}]'),
        spans_line(b"", attributes=b'[{"key":"d","value":{"doubleValue":-0.0}}]'),
        spans_line(b',"name":"\\ud800"'),  # a lone surrogate
        spans_line(b',"name":"\\ud83d\\ude00"'),
        spans_line(b',"x":"\xff"'),  # not UTF-8, in a field the checked reader ignores
        spans_line(b',"traceState":"\xff"'),
        spans_line(b',"traceState":"\xed\xa0\x80"'),  # a surrogate in UTF-8
        spans_line(b',"\xff":1'),
        spans_line(b',"traceState":"a\\u0000b"'),
        spans_line(b',"traceState":"a\x01b"'),
        spans_line(b',"\\u006eame":"escaped key"'),
        spans_line(b',"name":"second of two"'),  # a duplicate key: the last one counts
        spans_line(b',"traceId":5'),
        spans_line(b',"extra":{"deep":' + b"[" * 2000 + b"]" * 2000 + b"}"),
        spans_line(b',"status":0'),
        spans_line(b',"status":[]'),
        spans_line(b',"status":{"code":"STATUS_CODE_OK","message":"m","deprecatedCode":1}'),
        spans_line(b',"parentSpanId":null'),
        spans_line(b',"droppedLinksCount":-1'),
        spans_line(b',"droppedLinksCount":"3"'),
        spans_line(b',"droppedLinksCount":3.0'),
        spans_line(b',"droppedLinksCount":null'),
        # Several fields set: the checked reader's order decides which counts.
        spans_line(b"", attributes=b'[{"key":"b","value":{"intValue":"5","stringValue":"s"}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":{"doubleValue":1.5,"boolValue":true}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":{"kvlistValue":{},"arrayValue":{"values":[]}}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":{"bytesValue":"AA==","doubleValue":2}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":{"stringValue":"s","bogus":1}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":{"bogus":1}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":null}]'),
        spans_line(b"", attributes=b'[{"key":"b"}]'),
        spans_line(b"", attributes=b'[{"value":{"boolValue":true}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":{"boolValue":"true"}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":{"bytesValue":"!!"}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":{"arrayValue":null}}]'),
        spans_line(b"", attributes=b'[{"key":"b","value":{"arrayValue":{}}}]'),
        spans_line(b"", attributes=b'[{"key":"a","value":{"intValue":"1"}},{"key":"a","value":{"stringValue":"2"}}]'),
        b'{"resourceSpans":[],"resourceSpans":[{"scopeSpans":[{"spans":[{' + SPAN + b"}]}]}]}",
        b'{"resourceSpans":[{"scopeSpans":null,"instrumentationLibrarySpans":[{"spans":[{}]}]}]}',
        b'{"resourceSpans":[{"scopeSpans":[{"scope":null,"instrumentationLibrary":{"name":"n"},"spans":[{}]}]}]}',
        b'{"resourceSpans":[{"scopeSpans":[{"instrumentationLibrary":{"name":"n"},"spans":[{}]}]}]}',
        b'{"resourceSpans":null,"batches":[{}]}',
        b'{"resourceSpans":[{"scopeSpans":[{"spans":[{}]}]}],"data":[]}',
        b'{"result":{"resourceSpans":[]}}',
        b'[{"resourceSpans":[]}]',
        b' {"resourceSpans":[]} \r\n',
        b'{"resourceSpans":[]}\x0c',
        b'\xef\xbb\xbf{"resourceSpans":[]}',
        b'{"resourceSpans":[]} {}',
        b'{"resourceSpans":[],}',
    ],
)
def test_json_edge_cases_read_alike(line: bytes) -> None:
    agrees(line)


@pytest.mark.parametrize(
    "fields",
    [
        b',"traceId":"' + b"z" * 32 + b'"',
        b',"traceId":"' + b"0" * 31 + b' "',
        b',"traceId":"0x' + b"0" * 30 + b'"',
        b',"traceId":"' + b"A" * 32 + b'"',  # uppercase hex
        b',"traceId":"' + b"0123456789abcdef" + b'"',  # a 64-bit trace id
        b',"traceId":"' + b"A" * 32 + b'=="',  # base64, of 24 bytes
        b',"traceId":""',
        b',"spanId":"+123456789abcdef"',
        b',"spanId":"0123456789abcde\\u0066"',
        ',"spanId":"\uff10123456789abcde"'.encode(),  # a fullwidth digit, in UTF-8
        b',"parentSpanId":"' + b"0" * 32 + b'"',
        b',"parentSpanId":"AAAAAAAAAAA="',
    ],
)
def test_ids_read_alike(fields: bytes) -> None:
    agrees(spans_line(fields))


@PROFILE
@given(st.integers(min_value=-(2**70), max_value=2**70), st.sampled_from(["kind", "flags", "startTimeUnixNano"]))
def test_integers_of_any_size_read_alike(number: int, field: str) -> None:
    agrees(spans_line(f',"{field}":{number}'.encode()))
    agrees(spans_line(b"", attributes=f'[{{"key":"n","value":{{"intValue":{number}}}}}]'.encode()))


@PROFILE
@given(
    st.from_regex(r"-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,40})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
)
@example("2.2250738585072011e-308")
@example("4.9406564584124654e-324")
@example("17976931348623158" + "0" * 292)  # past the largest double: orjson refuses it
def test_number_text_reads_alike(text: str) -> None:
    agrees(spans_line(b"", attributes=f'[{{"key":"d","value":{{"doubleValue":{text}}}}}]'.encode()))


@PROFILE
@given(documents().map(orjson.dumps), st.data())
def test_damaged_bytes_read_alike(line: bytes, data: st.DataObject) -> None:
    at = data.draw(st.integers(min_value=0, max_value=len(line)))
    cut = data.draw(st.integers(min_value=0, max_value=4))
    agrees(line[:at] + data.draw(st.binary(max_size=4)) + line[at + cut :])


@PROFILE
@given(mutated(THIRD_PARTY_DOCS))
def test_damaged_documents_read_alike(doc: Any) -> None:
    agrees(dumps(doc))


@PROFILE
@given(ANY_VALUE)
def test_odd_attribute_values_read_alike(value: Any) -> None:
    agrees(dumps(document([{**span(), "attributes": [{"key": "odd", "value": value}]}])))


# --- a whole file: the same spans, or the same error, with the fast path and without -------------


def read(path: Path) -> str:
    """The spans ``read_file`` gives, or its error and message; warnings too, as they would be shown."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SpanReplayWarning)
        try:
            result = repr(list(read_file(str(path))))
        except SpanReplayError as exc:
            result = f"{type(exc).__name__}: {exc}"
    return result + "".join(f"\nwarning: {w.message}" for w in caught)


@PROFILE
@given(st.lists(documents().map(orjson.dumps) | mutated(THIRD_PARTY_DOCS).map(dumps), min_size=1, max_size=4))
def test_a_file_reads_the_same_with_the_fast_path_and_without(docs: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in [orjson.dumps(document([span()])), *docs]))
        with mock.patch.object(_otlp_json_typed, "line_spans", return_value=None):
            without = read(path)
        assert read(path) == without

"""Opening and sniffing sources: files, gzip, directories, globs, stdin, and their failures."""

from __future__ import annotations

import gzip
import io
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spanreplay
from fixtures.tracedocs import document, line, span, write_lines
from helpers.paths import THIRD_PARTY
from spanreplay import SpanReplayWarning, TraceFormatError
from spanreplay.readers import _lines, expand, iter_spans, read_file


def names(path: Path | str, **kwargs: bytes) -> list[str]:
    return [s.name for s in iter_spans(path, **kwargs)]


def numbered_docs(n: int) -> list[dict[str, object]]:
    return [document([span(f"op{i}", span_id=f"{i + 1:016x}")]) for i in range(n)]


# --- sniffing ------------------------------------------------------------------------


def test_json_lines_file_with_a_first_line_longer_than_any_peek_reads_line_by_line(tmp_path: Path) -> None:
    big = document([span(f"op{i}", span_id=f"{i + 1:016x}", attributes={"pad": "x" * 1000}) for i in range(200)])
    path = tmp_path / "collector.jsonl"
    path.write_bytes(line(big) + line(document([span("last")])))
    assert len(line(big)) > 150_000
    assert names(path) == [f"op{i}" for i in range(200)] + ["last"]


def test_pretty_printed_document_reads_as_one_document(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(document([span("a"), span("b")]), option=orjson.OPT_INDENT_2))
    spans = list(iter_spans(path))
    assert [s.name for s in spans] == ["a", "b"]
    assert spans[0].origin == str(path)  # a document has no line to name


def test_one_line_document_without_final_newline_reads(tmp_path: Path) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(orjson.dumps(document([span("only")])))
    assert names(path) == ["only"]


def test_byte_order_mark_and_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf\n\n" + line(document([span("a")])) + b"\n   \n" + line(document([span("b")])))
    spans = list(iter_spans(path))
    assert [(s.name, s.origin) for s in spans] == [("a", f"{path}:3"), ("b", f"{path}:6")]


def test_crlf_line_endings_read(tmp_path: Path) -> None:
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b"".join(orjson.dumps(d) + b"\r\n" for d in numbered_docs(3)))
    assert names(path) == ["op0", "op1", "op2"]


def test_top_level_array_of_jaeger_traces_reads(tmp_path: Path) -> None:
    trace = orjson.loads((THIRD_PARTY / "jaeger/ui_01.json").read_bytes())
    path = tmp_path / "traces.json"
    path.write_bytes(orjson.dumps([trace, trace]))
    assert len(list(iter_spans(path))) == 10


def test_tempo_variants_base64_ids_enum_names_and_batches_read(tmp_path: Path) -> None:
    doc = {
        "batches": [
            {
                "resource": {"attributes": []},
                "instrumentationLibrarySpans": [
                    {
                        "instrumentationLibrary": {"name": "old-lib", "version": "0.1"},
                        "spans": [
                            {
                                "traceId": "AAAAAAAAAAAAAAAAAAAAAQ==",
                                "spanId": "AAAAAAAAAAI=",
                                "name": "tempo",
                                "kind": "SPAN_KIND_CLIENT",
                                "startTimeUnixNano": 5,
                                "status": {"code": "STATUS_CODE_ERROR"},
                            }
                        ],
                    }
                ],
            }
        ]
    }
    path = tmp_path / "tempo.json"
    path.write_bytes(orjson.dumps({"trace": doc}))
    (s,) = iter_spans(path)
    assert (s.trace_id, s.span_id) == ("00000000000000000000000000000001", "0000000000000002")
    assert (s.kind, s.status_code, s.start_ns, s.scope_name, s.scope_version) == (3, 2, 5, "old-lib", "0.1")


# --- gzip --------------------------------------------------------------------------------


def test_gzip_json_lines_read_like_the_plain_file(tmp_path: Path) -> None:
    plain = write_lines(tmp_path / "t.jsonl", numbered_docs(50))
    zipped = tmp_path / "t.jsonl.gz"
    zipped.write_bytes(gzip.compress(plain.read_bytes()))
    assert names(zipped) == names(plain)
    assert names(zipped, contains=b'"op7"') == ["op7"]


def test_gzip_document_reads(tmp_path: Path) -> None:
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress((THIRD_PARTY / "jaeger/ui_01.json").read_bytes()))
    assert len(list(iter_spans(path))) == 5


def test_gzip_cut_short_warns_and_keeps_what_came_before(tmp_path: Path) -> None:
    data = b"".join(line(d) for d in numbered_docs(2000))
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(gzip.compress(data)[: len(gzip.compress(data)) // 2])
    with pytest.warns(SpanReplayWarning, match=r"cut\.jsonl\.gz ends in the middle of its gzip stream"):
        got = names(path)
    assert 0 < len(got) < 2000
    assert got == [f"op{i}" for i in range(len(got))]


def test_damaged_gzip_fails_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.gz"
    path.write_bytes(b"\x1f\x8b" + b"not really gzip at all" * 4)
    with pytest.raises(TraceFormatError, match=r"bad\.gz cannot be read \(.*\); if it is gzip it is damaged") as info:
        list(iter_spans(path))
    assert info.value.source == str(path)


# --- bad files ---------------------------------------------------------------------------


def test_malformed_line_fails_naming_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(numbered_docs(1)[0]) + b'{"resourceSpans": [}\n' + line(numbered_docs(1)[0]))
    with pytest.raises(
        TraceFormatError, match=r"t\.jsonl:2: not valid JSON .*, so remove or repair that line\.$"
    ) as info:
        list(iter_spans(path))
    assert (info.value.source, info.value.line) == (str(path), 2)


def test_truncated_last_line_warns_and_keeps_every_line_before_it(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", numbered_docs(3))
    path.write_bytes(path.read_bytes() + line(numbered_docs(1)[0])[:40])
    with pytest.warns(SpanReplayWarning, match=r"t\.jsonl:4: the last line is cut short"):
        assert names(path) == ["op0", "op1", "op2"]


def test_last_line_without_newline_that_is_wrong_not_short_is_an_error(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", numbered_docs(2))
    path.write_bytes(path.read_bytes() + b'{"resourceSpans": ]}')
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:3: not valid JSON"):
        list(iter_spans(path))


def test_only_line_cut_short_warns_and_yields_nothing(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(numbered_docs(1)[0])[:50])
    with pytest.warns(SpanReplayWarning, match=r"t\.jsonl:1: the only line is cut short"):
        assert names(path) == []


def test_malformed_document_fails_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text('{\n  "resourceSpans": [\n    {"resource": }\n  ]\n}\n')
    with pytest.raises(TraceFormatError, match=r"t\.json:3: not valid JSON") as info:
        list(iter_spans(path))
    assert info.value.line == 3


def test_non_json_file_fails_saying_what_spanreplay_reads(tmp_path: Path) -> None:
    path = tmp_path / "notes.csv"
    path.write_text("run,status\nr1,ok\n")
    with pytest.raises(
        TraceFormatError,
        match=r"notes\.csv is not a trace file \(it starts with b'run,status.*\); spanreplay reads OTLP/JSON",
    ):
        list(iter_spans(path))


def test_json_that_is_not_a_trace_fails_naming_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "package.json"
    path.write_text('{"name": "x", "version": "1.0"}\n')
    with pytest.raises(
        TraceFormatError,
        match=r"package\.json:1 is not a trace: its top-level keys are name, version, neither OTLP's resourceSpans",
    ):
        list(iter_spans(path))


def test_scalar_json_file_is_not_a_trace(tmp_path: Path) -> None:
    path = tmp_path / "n.json"
    path.write_text("[1, 2, 3]")
    with pytest.raises(TraceFormatError, match="array of something other than trace objects"):
        list(iter_spans(path))


def test_empty_file_fails_saying_it_is_empty(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    with pytest.raises(
        TraceFormatError, match=r"empty\.jsonl is empty, so it holds no trace; pass the file a run was written to\.$"
    ):
        list(iter_spans(path))


def test_non_utf8_bytes_fail_as_a_format_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(line(numbered_docs(1)[0]).replace(b"op0", b"op\xe9"))
    with pytest.raises(TraceFormatError, match=r"latin1\.jsonl:1: not valid JSON \(str is not valid UTF-8"):
        list(iter_spans(path))


def test_wrong_field_type_fails_naming_the_span_and_what_was_expected(tmp_path: Path) -> None:
    doc = document([span("fine"), span("broken")])
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["startTimeUnixNano"] = "soon"
    path = write_lines(tmp_path / "t.jsonl", [doc])
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:1 .*span 1 'broken': expected startTimeUnixNano"):
        list(iter_spans(path))


@pytest.mark.parametrize(
    ("span_id", "reason"),
    [("abc", "neither 16 hex digits nor 8 bytes"), ("zzzzzzzzzzzzzzzz", "neither 16 hex digits")],
)
def test_bad_ids_fail_naming_the_id(tmp_path: Path, span_id: str, reason: str) -> None:
    path = write_lines(tmp_path / "t.jsonl", [document([span(span_id=span_id)])])
    with pytest.raises(TraceFormatError, match=reason):
        list(iter_spans(path))


def test_attribute_values_nested_past_the_limit_fail_cleanly(tmp_path: Path) -> None:
    nested: dict[str, object] = {"stringValue": "x"}
    for _ in range(70):
        nested = {"arrayValue": {"values": [nested]}}
    doc = document([span()])
    doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"] = [{"key": "deep", "value": nested}]
    path = write_lines(tmp_path / "t.jsonl", [doc])
    with pytest.raises(TraceFormatError, match="nest deeper than 64 levels"):
        list(iter_spans(path))


def test_json_nested_past_the_parser_limit_fails_cleanly(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_bytes(b"[" * 5000 + b"]" * 5000)
    with pytest.raises(TraceFormatError, match=r"deep\.json:1: not valid JSON"):
        list(iter_spans(path))


# --- directories, globs, paths --------------------------------------------------------


def test_directory_reads_its_trace_files_in_name_order_and_recursively(tmp_path: Path) -> None:
    write_lines(tmp_path / "b.jsonl", [document([span("b")])])
    write_lines(tmp_path / "a.jsonl", [document([span("a")])])
    (tmp_path / "sub").mkdir()
    write_lines(tmp_path / "sub" / "c.jsonl", [document([span("c")])])
    write_lines(tmp_path / ".hidden.jsonl", [document([span("hidden")])])
    assert names(tmp_path) == ["a", "b", "c"]


def test_directory_skips_files_that_are_not_traces_with_a_warning(tmp_path: Path) -> None:
    write_lines(tmp_path / "run.jsonl", [document([span("a")])])
    (tmp_path / "README.txt").write_text("traces live here\n")
    (tmp_path / "settings.json").write_text('{"retention": 7}')
    (tmp_path / "zero.jsonl").write_bytes(b"")
    with pytest.warns(SpanReplayWarning) as record:
        assert names(tmp_path) == ["a"]
    messages = sorted(str(w.message) for w in record)
    assert messages == [
        f"Skipped {tmp_path / 'README.txt'}: not a trace file (it does not start with JSON).",
        f"Skipped {tmp_path / 'settings.json'}: its top-level keys are retention, neither OTLP's resourceSpans "
        "nor Jaeger's data and spans, so it is not a trace file.",
        f"Skipped {tmp_path / 'zero.jsonl'}: it is empty.",
    ]
    assert all(w.filename == __file__ for w in record)  # the warning points at the caller


def test_a_broken_trace_in_a_directory_still_fails(tmp_path: Path) -> None:
    write_lines(tmp_path / "a.jsonl", [document([span("a")])])
    (tmp_path / "b.jsonl").write_bytes(line(document([span("b")])) + b"{oops\n")
    with pytest.raises(TraceFormatError, match=r"b\.jsonl:2: not valid JSON"):
        list(iter_spans(tmp_path))


def test_empty_directory_fails_with_one_sentence(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=r"^Directory .* holds no trace files; record a run first"):
        expand(tmp_path)


def test_glob_reads_matching_files_only(tmp_path: Path) -> None:
    write_lines(tmp_path / "x1.jsonl", [document([span("x1")])])
    write_lines(tmp_path / "x2.jsonl", [document([span("x2")])])
    write_lines(tmp_path / "y.jsonl", [document([span("y")])])
    assert names(str(tmp_path / "x*.jsonl")) == ["x1", "x2"]


def test_glob_without_matches_and_missing_path_fail_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match="matches no files; check the path and quote the pattern"):
        expand(str(tmp_path / "*.jsonl"))
    with pytest.raises(TraceFormatError, match=r"No such file or directory: .*nope; pass a trace file"):
        expand(tmp_path / "nope")


def test_unreadable_file_fails_naming_it() -> None:
    # Root reads any file, so as root the reader runs in a child that drops to nobody;
    # the directory is world-traversable so only the file itself is off limits.
    with tempfile.TemporaryDirectory() as directory:
        os.chmod(directory, 0o755)
        path = write_lines(Path(directory) / "locked.jsonl", numbered_docs(1))
        path.chmod(0)
        if os.geteuid() != 0:
            with pytest.raises(TraceFormatError, match=r"Cannot open .*locked\.jsonl: Permission denied"):
                list(iter_spans(path))
            return
        # The interpreter lives under /root, so the child imports first, then drops to nobody.
        code = (
            "import os, sys, spanreplay, spanreplay.readers as r\n"
            "os.setgid(65534)\nos.setuid(65534)\n"
            "try:\n    list(r.iter_spans(sys.argv[1]))\n"
            "except spanreplay.TraceFormatError as exc:\n    print(exc)\n"
        )
        done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
        assert re.search(r"Cannot open .*locked\.jsonl: Permission denied", done.stdout), done.stdout + done.stderr


def test_read_file_stops_cleanly_when_the_caller_stops(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", numbered_docs(10))
    spans = read_file(str(path))
    assert next(spans).name == "op0"
    spans.close()  # closes the file: no ResourceWarning (an error under this test suite)


# --- stdin ---------------------------------------------------------------------------------


def test_stdin_reads_plain_and_gzip_lines(tmp_path: Path) -> None:
    data = b"".join(line(d) for d in numbered_docs(3))
    code = "import spanreplay.readers as r; print(','.join(s.name for s in r.iter_spans('-')))"
    for payload in (data, gzip.compress(data)):
        done = subprocess.run([sys.executable, "-c", code], input=payload, capture_output=True, check=True)
        assert done.stdout.decode().strip() == "op0,op1,op2"


def test_stdin_errors_name_stdin() -> None:
    code = "import spanreplay.readers as r; list(r.iter_spans('-'))"
    done = subprocess.run([sys.executable, "-c", code], input=b"{oops\n{}\n", capture_output=True)
    assert done.returncode == 1
    assert "TraceFormatError: <stdin>:1: not valid JSON" in done.stderr.decode()


# --- the line filter -------------------------------------------------------------------------


def test_line_filter_never_parses_lines_without_the_needle(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(document([span("keep")])) + b"not json at all\n" + line(document([span("other")])))
    assert names(path, contains=b'"keep"') == ["keep"]
    with pytest.raises(TraceFormatError, match=r":2: not valid JSON"):
        names(path)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.sampled_from([b"", b"a", b"needle", b"xneedlex", b"nee", b"dle", b"x" * 50]), max_size=40),
    last_newline=st.booleans(),
    block=st.integers(min_value=1, max_value=64),
    head_lines=st.integers(min_value=0, max_value=2),
)
def test_matching_lines_equals_a_naive_line_filter(
    lines: list[bytes], last_newline: bool, block: int, head_lines: int
) -> None:
    data = b"\n".join(lines) + (b"\n" if last_newline and lines else b"")
    naive, at = [], 0
    for text in io.BytesIO(data):
        naive.append((at, text))
        at += len(text)
    expected = [(offset, text) for offset, text in naive if b"needle" in text]
    stream = io.BytesIO(data)
    head = stream.readline() if head_lines else b""  # a line the sniffer already read
    original = _lines.BLOCK_BYTES
    _lines.BLOCK_BYTES = block  # small blocks put lines across block edges
    try:
        got = list(_lines.matching_lines(stream, b"needle", head=head))
        numbers = [_lines.line_number(io.BytesIO(data), offset) for offset, _ in got]
    finally:
        _lines.BLOCK_BYTES = original
    assert got == expected
    assert numbers == [data[:offset].count(b"\n") + 1 for offset, _ in got]


def test_spans_found_through_the_filter_name_their_byte_offset(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", numbered_docs(5))
    offset = len(b"".join(line(d) for d in numbered_docs(5)[:3]))
    (found,) = iter_spans(path, contains=b'"op3"')
    assert found.origin == f"{path} at byte {offset}"
    assert [s.origin for s in iter_spans(path)][3] == f"{path}:4"


def test_errors_on_filtered_lines_still_name_the_line_number(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(line(d) for d in numbered_docs(1000)) + b'{"op": "wanted" !!\n')
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:1001: not valid JSON") as info:
        names(path, contains=b'"wanted"')
    assert info.value.line == 1001
    zipped = tmp_path / "t.jsonl.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    with pytest.raises(TraceFormatError, match=r"t\.jsonl\.gz:1001: not valid JSON"):
        names(zipped, contains=b'"wanted"')


def test_spanreplay_load_of_a_non_trace_file_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(TraceFormatError) as info:
        spanreplay.load(path)
    assert str(info.value).count(". ") <= 1


def test_truncated_last_line_cut_inside_a_multibyte_character_still_warns(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", numbered_docs(2))
    torn = line(document([span("naïve ☃☃☃")]))
    cut = torn[: torn.index("☃".encode()) + 1]  # one byte of a three-byte character
    path.write_bytes(path.read_bytes() + cut)
    with pytest.warns(SpanReplayWarning, match=r"t\.jsonl:3: the last line is cut short"):
        assert names(path) == ["op0", "op1"]


def test_filter_skips_a_broken_first_line_of_another_run(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"other run" oops\n' + line(document([span("keep")])))
    assert names(path, contains=b'"keep"') == ["keep"]
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:1: not valid JSON"):
        names(path)


def test_filter_applies_to_the_first_line_too(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "t.jsonl", numbered_docs(3))
    assert names(path, contains=b'"op2"') == ["op2"]
    assert names(path, contains=b'"op0"') == ["op0"]

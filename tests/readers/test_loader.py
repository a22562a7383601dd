"""The loader on files spanreplay recorded, and on the same spans as a Collector writes them."""

from __future__ import annotations

import gzip
import hashlib
import re
import shutil
import subprocess
import sys
import textwrap
import tracemalloc
import warnings
from pathlib import Path

import orjson
import pytest

import spanreplay
from fixtures.recordings import collector_lines, lines, record_agent, record_failing, seq_of
from fixtures.tracedocs import document, line, span
from helpers.paths import THIRD_PARTY
from spanreplay import (
    EventLog,
    RunNotFoundError,
    SchemaVersionError,
    SpanReplayWarning,
    TraceFormatError,
)


def steps(log: EventLog) -> list[tuple[int, str, str]]:
    return [(e.seq, e.kind, e.key) for e in log]


AGENT_STEPS = [
    (1, "tool", "search"),
    (2, "clock", "now"),
    (3, "random", "random"),
    (4, "tool", "lookup"),
    (5, "tool", "lookup"),
    (6, "tool", "lookup"),
]


# --- files spanreplay wrote ----------------------------------------------------------------


def test_load_of_a_recorded_run_gives_its_events_in_seq_order(trace_dir: Path) -> None:
    record_agent("run_a")
    log = spanreplay.load(trace_dir / "run_a.jsonl", "run_a")
    assert steps(log) == AGENT_STEPS
    assert log.events[0].input == {"q": "weather in Oslo"}
    assert log.events[0].output == {"hits": 3}
    assert [e.output for e in log.events[3:]] == [{"row": 0}, {"row": 1}, {"row": 4}]
    assert (log.run.run_id, log.run.status, log.run.agent, log.run.steps) == ("run_a", "ok", "support", 6)
    assert log.by_call_id("tool:lookup#2") is log.events[5]


def test_load_without_run_id_takes_the_only_run(trace_dir: Path) -> None:
    record_agent("run_a")
    assert spanreplay.load(trace_dir) == spanreplay.load(trace_dir, "run_a")


def test_load_of_a_failed_run_keeps_the_error_at_its_seq(trace_dir: Path) -> None:
    record_failing("run_f")
    log = spanreplay.load(trace_dir, "run_f")
    assert log.run.status == "error"
    assert log.run.error is not None
    assert log.run.error.type_name == "ToolFailed"
    last = log.events[-1]
    assert (last.seq, last.key, last.output_json) == (7, "pay", None)
    assert last.error is not None
    assert last.error.message == "card declined"


def test_chunked_payload_comes_back_whole(trace_dir: Path) -> None:
    record_agent("run_big", big=True)
    fetched = spanreplay.load(trace_dir, "run_big").events[-1]
    assert fetched.output == "é☃x" * 3000


def test_directory_of_runs_loads_the_one_named(trace_dir: Path) -> None:
    for run_id in ("run_a", "run_b", "run_c"):
        record_agent(run_id, calls=int(run_id[-1], 16) - 9)
    assert [len(spanreplay.load(trace_dir, r)) for r in ("run_a", "run_b", "run_c")] == [4, 5, 6]


def test_load_without_run_id_from_several_runs_lists_them(trace_dir: Path) -> None:
    for run_id in ("run_a", "run_b"):
        record_agent(run_id)
    with pytest.raises(RunNotFoundError, match=r"holds 2 runs, so name the one to load .*run_a, run_b") as info:
        spanreplay.load(trace_dir)
    assert info.value.available == ("run_a", "run_b")
    assert info.value.run_id is None


def test_unknown_run_id_lists_the_runs_that_are_there(trace_dir: Path) -> None:
    for run_id in ("run_a", "run_b"):
        record_agent(run_id)
    with pytest.raises(
        RunNotFoundError,
        match=r"^Run run_zz is not in .*traces, which holds 2 runs \(the latest: run_a, run_b\); pass one of those",
    ) as info:
        spanreplay.load(trace_dir, "run_zz")
    assert (info.value.run_id, info.value.available) == ("run_zz", ("run_a", "run_b"))


def test_runs_lists_status_steps_and_error(trace_dir: Path) -> None:
    record_agent("run_a")
    record_failing("run_b")
    summaries = {r.run_id: r for r in spanreplay.runs(trace_dir)}
    assert set(summaries) == {"run_a", "run_b"}
    assert (summaries["run_a"].status, summaries["run_a"].steps, summaries["run_a"].error) == ("ok", 6, None)
    assert summaries["run_b"].status == "error"
    assert "card declined" in (summaries["run_b"].error or "")
    assert summaries["run_a"].agent == "support"
    assert [r.run_id for r in spanreplay.runs(trace_dir)] == ["run_a", "run_b"]  # oldest first


def test_gzip_and_glob_sources_load_the_same_run(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    record_agent("run_b")
    expected = spanreplay.load(trace_dir, "run_a")
    zipped = tmp_path / "run_a.jsonl.gz"
    zipped.write_bytes(gzip.compress((trace_dir / "run_a.jsonl").read_bytes()))
    assert spanreplay.load(zipped) == expected
    assert spanreplay.load(str(trace_dir / "run_*.jsonl"), "run_a") == expected


def test_the_same_file_twice_dedupes_every_span(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    expected = spanreplay.load(trace_dir, "run_a")
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_bytes((trace_dir / "run_a.jsonl").read_bytes() * 2)
    assert spanreplay.load(doubled) == expected
    assert spanreplay.runs(doubled)[0].steps == 6


def test_two_recordings_under_one_run_id_are_refused(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    first = (trace_dir / "run_a.jsonl").read_bytes()
    (trace_dir / "run_a.jsonl").unlink()
    record_agent("run_a", calls=1)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(first + (trace_dir / "run_a.jsonl").read_bytes())
    with pytest.raises(TraceFormatError, match="two recordings share one run id"):
        spanreplay.load(mixed, "run_a")


# --- Collector-style files --------------------------------------------------------------------


@pytest.mark.parametrize(("seed", "per_line"), [(1, 1), (2, 3), (3, 7), (4, 50)])
def test_collector_file_of_interleaved_shuffled_retried_spans_loads_each_run(
    trace_dir: Path, tmp_path: Path, seed: int, per_line: int
) -> None:
    run_ids = ["run_a", "run_b", "run_c"]
    record_agent("run_a")
    record_failing("run_b")
    record_agent("run_c", big=True)
    expected = {r: spanreplay.load(trace_dir, r) for r in run_ids}
    export = tmp_path / "export.jsonl"
    export.write_bytes(
        b"".join(collector_lines([trace_dir / f"{r}.jsonl" for r in run_ids], seed=seed, per_line=per_line))
    )
    for run_id in run_ids:
        assert spanreplay.load(export, run_id) == expected[run_id]
    assert [r.run_id for r in spanreplay.runs(export)] == [r.run_id for r in spanreplay.runs(trace_dir)]


def test_collector_export_split_over_several_files_loads_from_the_directory(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    record_agent("run_b", big=True)
    expected = spanreplay.load(trace_dir, "run_b")
    packed = collector_lines([trace_dir / "run_a.jsonl", trace_dir / "run_b.jsonl"], seed=9, per_line=2)
    export = tmp_path / "export"
    export.mkdir()
    for i in range(3):
        (export / f"traces-{i}.jsonl").write_bytes(b"".join(packed[i::3]))
    assert spanreplay.load(export, "run_b") == expected
    assert spanreplay.load(str(export / "traces-*.jsonl"), "run_b") == expected


def test_collector_file_mixed_with_other_services_spans_loads(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    export = tmp_path / "export.jsonl"
    other = (THIRD_PARTY / "opentelemetry-specification/file-exporter-traces-example.jsonl").read_bytes()
    export.write_bytes(other + b"".join(collector_lines([trace_dir / "run_a.jsonl"], seed=5)) + other)
    assert spanreplay.load(export) == spanreplay.load(trace_dir, "run_a")


def test_a_broken_line_of_another_run_is_never_parsed(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_1")
    record_agent("run_10")  # its id holds "run_1": the filter must not confuse the two
    export = tmp_path / "export.jsonl"
    broken = b'{"resourceSpans":[{"key":"spanreplay.run.id","value":{"stringValue":"run_10"}} !!!\n'
    body = collector_lines([trace_dir / "run_1.jsonl", trace_dir / "run_10.jsonl"], seed=3)
    export.write_bytes(broken + b"".join(body[:4]) + broken + b"".join(body[4:]))
    assert spanreplay.load(export, "run_1") == spanreplay.load(trace_dir, "run_1")
    # The broken line names run_10: that run alone is refused, naming the line.
    with (
        pytest.warns(SpanReplayWarning, match=r"export\.jsonl:[16]: skipped a damaged line, not valid JSON"),
        pytest.raises(
            TraceFormatError, match=r"^Run run_10 cannot be loaded: the damaged lines .*export\.jsonl:1: not valid JSON"
        ) as info,
    ):
        spanreplay.load(export, "run_10")
    assert info.value.line == 1
    with pytest.warns(SpanReplayWarning, match=r"export\.jsonl:[16]: skipped a damaged line"):
        found = {r.run_id: r.damaged for r in spanreplay.runs(export)}
    assert found["run_1"] is None
    assert (found["run_10"] or "").startswith(f"Run run_10 cannot be loaded: the damaged lines {export}:1")


def test_filtering_one_run_keeps_memory_flat_as_the_file_grows(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_keep")
    record_agent("run_other", big=True)
    other = (trace_dir / "run_other.jsonl").read_bytes()
    keep = (trace_dir / "run_keep.jsonl").read_bytes()
    peaks = []
    for copies in (100, 800):  # about 3 MB and 25 MB of other runs' lines
        path = tmp_path / f"big{copies}.jsonl"
        with path.open("wb") as out:
            for i in range(copies):
                out.write(other)
                if i == copies // 2:
                    out.write(keep)
        tracemalloc.start()
        try:
            log = spanreplay.load(path, "run_keep")
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
        assert len(log) == 6
    assert path.stat().st_size > 20_000_000
    assert peaks[1] < 6_000_000
    assert peaks[1] < peaks[0] * 1.5


# --- stdin -------------------------------------------------------------------------------------


def run_python(code: str, stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], input=stdin, capture_output=True, timeout=60)


def test_stdin_loads_a_piped_run_with_and_without_run_id(trace_dir: Path) -> None:
    record_agent("run_a")
    data = (trace_dir / "run_a.jsonl").read_bytes()
    code = """
        import spanreplay, sys
        log = spanreplay.load("-", *sys.argv[1:])
        print(log.run_id, log.run.status, [e.seq for e in log])
    """
    for args in ([], ["run_a"]):
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code), *args], input=data, capture_output=True, timeout=60
        )
        assert done.returncode == 0, done.stderr.decode()
        assert done.stdout.decode().split("\n")[0] == "run_a ok [1, 2, 3, 4, 5, 6]"


def test_stdin_collector_stream_picks_the_named_run_and_lists_runs_otherwise(trace_dir: Path) -> None:
    record_agent("run_a")
    record_agent("run_b")
    data = b"".join(collector_lines([trace_dir / "run_a.jsonl", trace_dir / "run_b.jsonl"], seed=2))
    done = run_python(
        """
        import spanreplay
        print(len(spanreplay.load("-", "run_b")))
        """,
        data,
    )
    assert done.stdout.decode().strip() == "6", done.stderr.decode()
    done = run_python("import spanreplay; spanreplay.load('-')", data)
    assert (
        "RunNotFoundError: stdin holds 2 runs, so name the one to load (the latest: run_a, run_b)"
        in done.stderr.decode()
    )
    done = run_python("import spanreplay; spanreplay.load('-', 'run_zz')", data)
    assert (
        "RunNotFoundError: Run run_zz is not in stdin; spanreplay runs -, with the same input piped to it,"
        in done.stderr.decode()
    )


def test_stdin_runs_lists_the_piped_runs(trace_dir: Path) -> None:
    record_agent("run_a")
    done = run_python(
        "import spanreplay; print([(r.run_id, r.status, r.steps) for r in spanreplay.runs('-')])",
        gzip.compress((trace_dir / "run_a.jsonl").read_bytes()),
    )
    assert done.stdout.decode().strip() == "[('run_a', 'ok', 6)]", done.stderr.decode()


# --- lost spans, crashes, torn lines -----------------------------------------------------------


def without(path: Path, *, seqs: set[int] = frozenset(), root_end: bool = False, dest: Path) -> Path:
    """The file as it would be with those boundaries lost (and the run never ended)."""
    kept = []
    all_lines = lines(path)
    for i, raw in enumerate(all_lines):
        seq = seq_of(raw)
        if seq in seqs or (root_end and seq is None and i == len(all_lines) - 1):
            continue
        kept.append(raw)
    dest.write_bytes(b"".join(kept))
    return dest


def test_completed_run_with_missing_seqs_fails_naming_them(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    lost = without(trace_dir / "run_a.jsonl", seqs={2, 4}, dest=tmp_path / "lost.jsonl")
    with pytest.raises(
        TraceFormatError, match=r"^Run run_a in .*lost\.jsonl is missing the spans at seq 2, 4 of 6, lost on the way"
    ):
        spanreplay.load(lost)


def test_completed_run_missing_its_last_seqs_fails_too(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    lost = without(trace_dir / "run_a.jsonl", seqs={5, 6}, dest=tmp_path / "lost.jsonl")
    with pytest.raises(TraceFormatError, match=r"missing the spans at seq 5, 6 of 6"):
        spanreplay.load(lost)


def test_many_missing_seqs_are_counted_not_all_listed(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a", calls=30)
    lost = without(trace_dir / "run_a.jsonl", seqs=set(range(2, 32)), dest=tmp_path / "lost.jsonl")
    with pytest.raises(TraceFormatError, match=r"seq 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 20 more of 33"):
        spanreplay.load(lost)


def test_crashed_run_with_missing_seqs_only_warns(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    crashed = without(trace_dir / "run_a.jsonl", seqs={3}, root_end=True, dest=tmp_path / "crashed.jsonl")
    with pytest.warns(
        SpanReplayWarning, match=r"Run run_a crashed; the boundaries at seq 3 were still running"
    ) as record:
        log = spanreplay.load(crashed)
    assert record[0].filename == __file__
    assert log.run.status == "crashed"
    assert [e.seq for e in log] == [1, 2, 4, 5, 6]
    assert spanreplay.runs(crashed)[0].status == "crashed"


def test_crashed_run_without_gaps_loads_quietly(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    crashed = without(trace_dir / "run_a.jsonl", seqs={5, 6}, root_end=True, dest=tmp_path / "crashed.jsonl")
    log = spanreplay.load(crashed)
    assert (log.run.status, [e.seq for e in log]) == ("crashed", [1, 2, 3, 4])


def test_truncated_last_line_warns_and_keeps_everything_before_it(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    crashed = without(trace_dir / "run_a.jsonl", seqs={6}, root_end=True, dest=tmp_path / "torn.jsonl")
    sixth = next(raw for raw in lines(trace_dir / "run_a.jsonl") if seq_of(raw) == 6)
    with crashed.open("ab") as out:
        out.write(sixth[: len(sixth) // 2])
    with pytest.warns(SpanReplayWarning, match=r"torn\.jsonl:\d+: the last line is cut short"):
        log = spanreplay.load(crashed, "run_a")
    assert [e.seq for e in log] == [1, 2, 3, 4, 5]
    assert log.run.status == "crashed"


def test_malformed_line_in_the_middle_fails_naming_file_and_line(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    raw = lines(trace_dir / "run_a.jsonl")
    raw[3] = raw[3][:100] + b"\n"
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(raw))
    # The cut line no longer holds the run id, so the run filter skips it; the lost
    # span is noticed, and the message names the damaged line as where it went.
    with pytest.raises(
        TraceFormatError,
        match=r"missing the spans at seq 3 of 6, .* damaged.*broken\.jsonl:4: not valid JSON \(unexpected end of "
        r"data at column 101\)",
    ):
        spanreplay.load(broken, "run_a")


def test_malformed_line_holding_the_run_id_fails_naming_file_and_line(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    raw = lines(trace_dir / "run_a.jsonl")
    raw[3] = raw[3].replace(b'"spanreplay.seq"', b'"spanreplay.seq" oops', 1)
    broken = tmp_path / "broken.jsonl"
    broken.write_bytes(b"".join(raw))
    with (
        pytest.warns(SpanReplayWarning, match=r"broken\.jsonl:4: skipped a damaged line, not valid JSON"),
        pytest.raises(
            TraceFormatError, match=r"^Run run_a cannot be loaded: the damaged line .*broken\.jsonl:4: not"
        ) as info,
    ):
        spanreplay.load(broken, "run_a")
    assert (info.value.source, info.value.line) == (str(broken), 4)
    # The listing says the same, rather than "ok".
    with pytest.warns(SpanReplayWarning, match=r"broken\.jsonl:4: skipped a damaged line"):
        (run,) = spanreplay.runs(broken)
    assert run.damaged is not None
    assert run.damaged.startswith(f"Run run_a cannot be loaded: the damaged line {broken}:4")


# --- bad input: one clear sentence each ------------------------------------------------------


def test_directory_without_traces(tmp_path: Path) -> None:
    with pytest.raises(TraceFormatError, match=r"^Directory .* holds no trace files; record a run first"):
        spanreplay.load(tmp_path)


def test_directory_with_only_other_files_holds_no_runs(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("nothing here\n")
    with (
        pytest.warns(SpanReplayWarning, match="Skipped"),
        pytest.raises(RunNotFoundError, match="holds no spanreplay runs"),
    ):
        spanreplay.load(tmp_path)


def test_non_otlp_json_file(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"model": "x", "temperature": 0.2}\n')
    with pytest.raises(
        TraceFormatError,
        match=r"config\.json:1 is not a trace: its top-level keys are model, temperature, neither OTLP",
    ):
        spanreplay.runs(path)


def test_file_of_other_spans_holds_no_runs(tmp_path: Path) -> None:
    path = tmp_path / "other.jsonl"
    path.write_bytes(line(document([span("GET /")])))
    assert spanreplay.runs(path) == []
    with pytest.raises(RunNotFoundError, match=r"^.*other\.jsonl holds no spanreplay runs; record one"):
        spanreplay.load(path)


def test_unknown_schema_version_says_to_upgrade(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    newer = tmp_path / "newer.jsonl"
    text = (trace_dir / "run_a.jsonl").read_bytes()
    newer.write_bytes(
        text.replace(
            b'"spanreplay.schema_version","value":{"intValue":"3"}',
            b'"spanreplay.schema_version","value":{"intValue":"99"}',
        )
    )
    assert newer.read_bytes() != text
    with pytest.raises(
        SchemaVersionError,
        match=r"schema version 99, and this release reads versions 1 to 3; upgrade spanreplay \(pip install -U "
        r"spanreplay\)",
    ):
        spanreplay.load(newer)


def test_seq_zero_is_refused(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    edited = tmp_path / "edited.jsonl"
    edited.write_bytes(
        (trace_dir / "run_a.jsonl")
        .read_bytes()
        .replace(b'"spanreplay.seq","value":{"intValue":"1"}', b'"spanreplay.seq","value":{"intValue":"0"}')
    )
    with pytest.raises(TraceFormatError, match="has a span with seq 0"):
        spanreplay.load(edited)


def test_payload_cut_by_a_backend_is_refused(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_a")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(
        (trace_dir / "run_a.jsonl").read_bytes().replace(b'{\\"q\\":\\"weather in Oslo\\"}', b'{\\"q\\":\\"weather')
    )
    with pytest.raises(spanreplay.PayloadIntegrityError, match=r"Run run_a seq 1: attribute spanreplay.input was cut"):
        spanreplay.load(cut)


def test_third_party_and_spanreplay_files_side_by_side(trace_dir: Path) -> None:
    record_agent("run_a")
    shutil.copy(THIRD_PARTY / "jaeger/ui_01.json", trace_dir / "jaeger.json")
    shutil.copy(THIRD_PARTY / "opentelemetry-proto/logs.json", trace_dir / "logs.json")
    assert [r.run_id for r in spanreplay.runs(trace_dir)] == ["run_a"]
    assert len(spanreplay.load(trace_dir)) == 6


# --- hand-edited values reach the codec: a clear error, never a crash ------------------------


def edit_attribute(path: Path, seq: int | None, key: str, value: dict[str, object], dest: Path) -> Path:
    """``path`` with attribute ``key`` of the span at ``seq`` (None: the ended run span) set to ``value``."""
    out = []
    raw_lines = lines(path)
    for i, raw in enumerate(raw_lines):
        if seq_of(raw) == seq and (seq is not None or i == len(raw_lines) - 1):
            doc = orjson.loads(raw)
            attributes = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"]
            attributes[:] = [a for a in attributes if a["key"] != key] + [{"key": key, "value": value}]
            raw = orjson.dumps(doc) + b"\n"
        out.append(raw)
    dest.write_bytes(b"".join(out))
    return dest


def with_payload(path: Path, seq: int | None, name: str, payload: bytes, dest: Path) -> Path:
    """``path`` with payload ``name`` replaced, its size and sha256 updated to match."""
    edit_attribute(path, seq, name, {"stringValue": payload.decode()}, dest)
    edit_attribute(dest, seq, name + ".size", {"intValue": str(len(payload))}, dest)
    return edit_attribute(dest, seq, name + ".sha256", {"stringValue": hashlib.sha256(payload).hexdigest()}, dest)


@pytest.mark.parametrize("value", [{"doubleValue": "Infinity"}, {"stringValue": "²"}, {"arrayValue": {}}])
def test_a_seq_that_is_no_integer_is_a_format_error(trace_dir: Path, tmp_path: Path, value: dict[str, object]) -> None:
    record_agent("run_a")
    edited = edit_attribute(trace_dir / "run_a.jsonl", 2, "spanreplay.seq", value, tmp_path / "e.jsonl")
    with pytest.raises(TraceFormatError, match=r"Attribute spanreplay\.seq is .*, not an integer"):
        spanreplay.load(edited)


@pytest.mark.parametrize("value", [{"doubleValue": "Infinity"}, {"stringValue": "many"}, {"stringValue": "9" * 5000}])
def test_a_payload_size_that_is_no_integer_is_a_format_error(
    trace_dir: Path, tmp_path: Path, value: dict[str, object]
) -> None:
    record_agent("run_a")
    edited = edit_attribute(trace_dir / "run_a.jsonl", 1, "spanreplay.input.size", value, tmp_path / "e.jsonl")
    with pytest.raises(TraceFormatError, match=r"spanreplay\.input\.size"):
        spanreplay.load(edited)


@pytest.mark.parametrize(
    "payload",
    [b'{"type": "E", "fields": "ab"}', b'{"type": "E", "fields": [1, 2]}', b"[1]", b'"text"', b"{"],
)
def test_an_error_payload_that_is_not_an_error_record_is_a_format_error(
    trace_dir: Path, tmp_path: Path, payload: bytes
) -> None:
    record_failing("run_f")
    edited = with_payload(trace_dir / "run_f.jsonl", 7, "spanreplay.error", payload, tmp_path / "e.jsonl")
    with pytest.raises(TraceFormatError, match="The recorded error payload is not the JSON object spanreplay writes"):
        spanreplay.load(edited)


@pytest.mark.parametrize("steps", [{"stringValue": "²"}, {"stringValue": "1" * 5000}, {"doubleValue": "NaN"}])
def test_a_step_count_that_is_no_integer_is_ignored(trace_dir: Path, tmp_path: Path, steps: dict[str, object]) -> None:
    record_agent("run_a")
    edited = edit_attribute(trace_dir / "run_a.jsonl", None, "spanreplay.run.steps", steps, tmp_path / "e.jsonl")
    log = spanreplay.load(edited)
    assert (log.run.steps, log.run.status, len(log)) == (None, "ok", 6)
    assert spanreplay.runs(edited)[0].status == "ok"


def bad_sources(trace_dir: Path, tmp: Path) -> dict[str, tuple[str, str | None]]:
    """Each kind of bad input of the issue: the source, the run id asked for."""
    record_agent("run_a")
    record_agent("run_b")
    (tmp / "empty_dir").mkdir(parents=True)
    (tmp / "notes.csv").write_text("run,status\n")
    (tmp / "config.json").write_text('{"model": "x"}\n')
    first, second = lines(trace_dir / "run_a.jsonl")[:2]
    (tmp / "malformed.jsonl").write_bytes(first + second.replace(b'"spanreplay.seq"', b'"spanreplay.seq" ]', 1))
    (tmp / "pretty.json").write_text('{\n  "resourceSpans": [\n    {"scopeSpans": }\n  ]\n}\n')
    (tmp / "empty.jsonl").write_bytes(b"")
    (tmp / "damaged.gz").write_bytes(b"\x1f\x8b" + b"\x00" * 40)
    (tmp / "newer.jsonl").write_bytes(
        (trace_dir / "run_a.jsonl")
        .read_bytes()
        .replace(b'"intValue":"3"}},{"key":"gen_ai', b'"intValue":"7"}},{"key":"gen_ai')
    )
    (tmp / "other.jsonl").write_bytes(line(document([span("GET /")])))
    return {
        "directory without traces": (str(tmp / "empty_dir"), None),
        "non-JSON file": (str(tmp / "notes.csv"), None),
        "non-OTLP JSON": (str(tmp / "config.json"), None),
        "malformed JSON line": (str(tmp / "malformed.jsonl"), "run_a"),
        "malformed JSON document": (str(tmp / "pretty.json"), None),
        "empty file": (str(tmp / "empty.jsonl"), None),
        "damaged gzip": (str(tmp / "damaged.gz"), None),
        "unknown schema version": (str(tmp / "newer.jsonl"), None),
        "run id not in the source": (str(trace_dir), "run_zz"),
        "several runs, none named": (str(trace_dir), None),
        "no spanreplay runs": (str(tmp / "other.jsonl"), None),
        "missing path": (str(tmp / "nope"), None),
        "glob matching nothing": (str(tmp / "*.nothing"), None),
    }


def test_every_kind_of_bad_input_is_one_sentence_naming_the_source(trace_dir: Path, tmp_path: Path) -> None:
    cases = bad_sources(trace_dir, tmp_path / "bad")
    assert (tmp_path / "bad" / "newer.jsonl").read_bytes() != (trace_dir / "run_a.jsonl").read_bytes()
    for what, (source, run_id) in cases.items():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SpanReplayWarning)  # the damaged line's, before the refusal
                spanreplay.load(source, run_id)
        except spanreplay.SpanReplayError as exc:
            message = str(exc)
        else:
            pytest.fail(f"{what}: load() raised nothing")
        shown = source.replace(str(tmp_path / "bad") + "/", "").replace(str(trace_dir), "traces")
        assert message.endswith("."), (what, message)
        assert not re.search(r"[.!?]\s+[A-Z]", message.replace(source, "SOURCE")), (what, message)
        assert source.rstrip("/") in message or Path(source).name in message, (what, shown, message)

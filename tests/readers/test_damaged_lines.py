"""A damaged line costs one warning and its own run, never the file or the directory.

A write cut short (ENOSPC half way through ``os.write``) leaves half a line, and
the next span is appended right after it; garbage bytes do the same. Each file
here is crafted by hand from real recordings: the other runs of the file and of
the directory still list and load as recorded, and the run that owned the damaged
line is refused with a sentence that names file:line and the run.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

import spanreplay
from fixtures.recordings import collector_lines, lines, record_agent, seq_of
from spanreplay import SpanReplayWarning, TraceFormatError
from spanreplay.readers import Damage, iter_spans


def loaded(source: Path, run_id: str) -> spanreplay.EventLog:
    return spanreplay.load(source, run_id)


@pytest.fixture
def pristine(trace_dir: Path, tmp_path: Path) -> Path:
    """Three runs, one file each, copied to a directory that the tests damage."""
    for run_id in ("run_alpha", "run_beta", "run_gamma"):
        record_agent(run_id)
    copy = tmp_path / "damaged"
    shutil.copytree(trace_dir, copy)
    return copy


def tear(path: Path, index: int, keep: int) -> int:
    """Cut line ``index`` to its first ``keep`` bytes and append the next line right after it.

    What a write cut short leaves: no newline after the half line. Returns the
    damaged line's number.
    """
    raw = lines(path)
    raw[index] = raw[index][:keep]
    path.write_bytes(b"".join(raw))
    return index + 1


def step_index(path: Path, seq: int) -> int:
    return next(i for i, raw in enumerate(lines(path)) if seq_of(raw) == seq)


def test_a_torn_line_naming_its_run_refuses_that_run_alone(pristine: Path, trace_dir: Path) -> None:
    path = pristine / "run_beta.jsonl"
    index = step_index(path, 3)
    cut = lines(path)[index].index(b"run_beta") + 40  # the run id survives the tear
    number = tear(path, index, cut)

    with pytest.warns(SpanReplayWarning) as caught:
        found = {run.run_id: run for run in spanreplay.runs(pristine)}
    assert [str(w.message) for w in caught] == [
        f"{path}:{number}: skipped a damaged line (the whole line written right after it on the same line was "
        f"read), not valid JSON ({_json_error(path, number)}); it held spans of run run_beta, which is refused "
        "when loaded (a replay would lack a step); the other runs are read; load that run from another copy of "
        "its trace, or repair or remove the line."
    ]
    assert found["run_alpha"].damaged is None
    assert found["run_gamma"].damaged is None
    assert found["run_beta"].status == "ok"  # what the recording says; the damage is said beside it
    refusal = found["run_beta"].damaged
    assert refusal is not None

    with (
        pytest.warns(SpanReplayWarning, match=rf"{path}:{number}: skipped a damaged line"),
        pytest.raises(TraceFormatError) as info,
    ):
        loaded(pristine, "run_beta")
    assert str(info.value) == refusal  # the listing and the load say the same
    assert str(info.value).startswith(f"Run run_beta cannot be loaded: the damaged line {path}:{number}: not valid")
    assert "load the run from another copy of its trace" in str(info.value)
    assert (info.value.source, info.value.line) == (str(path), number)

    for run_id in ("run_alpha", "run_gamma"):
        assert loaded(pristine, run_id) == loaded(trace_dir, run_id)


def _json_error(path: Path, number: int) -> str:
    import orjson

    raw = lines(path)[number - 1]
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        column = min(exc.pos, len(raw.decode(errors="replace").rstrip("\r\n"))) + 1
        return f"{exc.msg} at column {column}"
    raise AssertionError("the line is valid JSON")


def test_a_tear_before_the_run_id_is_found_by_the_missing_step_and_named(pristine: Path, trace_dir: Path) -> None:
    path = pristine / "run_beta.jsonl"
    number = tear(path, step_index(path, 2), 24)  # {"resourceSpans":[{"res: no run id left
    with pytest.warns(SpanReplayWarning, match=rf"{path}:{number}: skipped a damaged line .* it names no run whole"):
        found = {run.run_id: run for run in spanreplay.runs(pristine)}
    assert found["run_beta"].damaged is not None
    assert found["run_beta"].steps == 5  # the step after the torn one was read
    # The line after the tear holds the run id, so the filter meets the damaged line too.
    with pytest.warns(SpanReplayWarning, match=rf"{path}:{number}: skipped"), pytest.raises(TraceFormatError) as info:
        loaded(pristine, "run_beta")
    message = str(info.value)
    assert message.startswith(f"Run run_beta in {pristine} is missing the spans at seq 2 of 6")
    assert f"which may be where they went: {path}:{number}: not valid JSON" in message
    assert message == found["run_beta"].damaged
    for run_id in ("run_alpha", "run_gamma"):
        assert loaded(pristine, run_id) == loaded(trace_dir, run_id)


def test_the_whole_line_written_after_a_torn_one_is_read(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_alpha")
    record_agent("run_beta")
    export = tmp_path / "export.jsonl"
    body = collector_lines([trace_dir / "run_alpha.jsonl", trace_dir / "run_beta.jsonl"], seed=7, per_line=1)
    # A torn line of no run we can tell, with a whole span of each run appended after one.
    body[3] = b'{"resourceSpans":[{"scop' + body[3]
    body[6] = b"\x00\xff garbage \x1b[2J" + body[6]
    export.write_bytes(b"".join(body))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert loaded(export, "run_alpha") == loaded(trace_dir, "run_alpha")
        assert loaded(export, "run_beta") == loaded(trace_dir, "run_beta")
        assert [run.damaged for run in spanreplay.runs(export)] == [None, None]
    assert all("the whole line written right after it" in str(w.message) for w in caught)
    assert {str(w.message).split(": skipped")[0] for w in caught} == {f"{export}:4", f"{export}:7"}


def test_a_line_of_garbage_between_lines_costs_nothing(pristine: Path, trace_dir: Path) -> None:
    path = pristine / "run_gamma.jsonl"
    raw = lines(path)
    raw.insert(2, b"\x89PNG\r\n\x1a\n")  # two lines: it holds a newline
    raw.insert(0, b"not json at all\n")  # before the first span too
    path.write_bytes(b"".join(raw))
    with pytest.warns(SpanReplayWarning) as caught:
        assert [run.damaged for run in spanreplay.runs(pristine)] == [None, None, None]
    assert sorted(str(w.message).split(": skipped")[0] for w in caught) == [f"{path}:1", f"{path}:4", f"{path}:5"]
    # The run filter never meets a line without the run id: no warning (the suite makes one an error).
    assert loaded(pristine, "run_gamma") == loaded(trace_dir, "run_gamma")


def test_a_line_that_is_json_but_no_trace_is_damaged_too(pristine: Path, trace_dir: Path) -> None:
    path = pristine / "run_alpha.jsonl"
    raw = lines(path)
    index = step_index(path, 4)
    raw[index] = raw[index].replace(b'"spanId":"', b'"spanId":"zz', 1)  # the run id is whole
    path.write_bytes(b"".join(raw))
    with pytest.warns(SpanReplayWarning, match=r"skipped a damaged line, not a trace spanreplay can read"):
        found = {run.run_id: run.damaged for run in spanreplay.runs(pristine)}
    assert found["run_alpha"] is not None
    assert "the damaged line" in found["run_alpha"]
    assert found["run_beta"] is None


def test_a_reader_without_a_hook_still_stops_at_the_damaged_line(pristine: Path) -> None:
    # spanreplay convert and push copy spans out: they fail rather than skip.
    path = pristine / "run_beta.jsonl"
    number = tear(path, step_index(path, 3), 30)
    with pytest.raises(TraceFormatError, match=rf"^{path}:{number}: not valid JSON .* remove or repair that line"):
        list(iter_spans(path))
    seen: list[Damage] = []
    with pytest.warns(SpanReplayWarning):
        spans = list(iter_spans(path, damaged=seen.append))
    assert [(d.source, d.line, d.runs) for d in seen] == [(str(path), number, ())]
    assert len(spans) == len(lines(path)) - 1 + 1  # every other line, and the one appended after the tear


def test_stdin_refuses_the_run_its_damaged_line_names(pristine: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    path = pristine / "run_beta.jsonl"
    index = step_index(path, 3)
    tear(path, index, lines(path)[index].index(b"run_beta") + 40)
    data = path.read_bytes() + (pristine / "run_alpha.jsonl").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    with pytest.warns(SpanReplayWarning), pytest.raises(TraceFormatError, match=r"^Run run_beta cannot be loaded"):
        spanreplay.load("-", "run_beta")

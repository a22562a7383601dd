"""A run read as a stream (what `spanreplay show` walks) is exactly the run load() gives.

Files of one run are shuffled, repeated (exporter retries), cut short or damaged
line by line; whatever the file, the stream gives load()'s events in load()'s
order, or raises load()'s error with load()'s message.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanreplay
from helpers.tiny_spans import Templates, record_templates, write_runs
from spanreplay.errors import SpanReplayError
from spanreplay.sources.run_stream import stream_run

RUN = "run_streamed"


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    directory = tmp_path_factory.mktemp("stream")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        templates: Templates = record_templates(directory / "template")
    path = directory / "run.jsonl"
    write_runs(templates, path, [(RUN, 12), ("run_other", 3)])
    return path.read_bytes().splitlines(keepends=True)


def outcome(read: object) -> tuple[str, object]:
    try:
        return "ok", read() if callable(read) else read
    except SpanReplayError as exc:
        return type(exc).__name__, str(exc)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_streamed_run_is_the_loaded_run(lines: list[bytes], tmp_path: Path, data: st.DataObject) -> None:
    picked = data.draw(st.lists(st.sampled_from(range(len(lines))), max_size=2 * len(lines)), label="lines")
    cut = data.draw(st.sets(st.sampled_from(range(len(lines)))), label="damaged")
    written = [lines[i][: len(lines[i]) // 2] + b"\n" if i in cut else lines[i] for i in picked]
    path = tmp_path / "run.jsonl"
    path.write_bytes(b"".join(written))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = outcome(lambda: spanreplay.load(path, RUN).events)
        streamed = outcome(lambda: tuple(stream_run(str(path), RUN).events()))
    assert streamed == loaded


def test_damaged_lines_are_warned_of_once_when_the_stream_gives_way_to_load(lines: list[bytes], tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    # The second step's line cut short: the run is refused, and its line named once.
    path.write_bytes(b"".join([lines[0], lines[1], lines[2][:-100] + b"\n", *lines[3:]]))
    with pytest.warns(spanreplay.SpanReplayWarning) as seen, pytest.raises(SpanReplayError, match="cannot be loaded"):
        stream_run(str(path), RUN)
    assert len([w for w in seen if "run.jsonl:3" in str(w.message)]) == 1

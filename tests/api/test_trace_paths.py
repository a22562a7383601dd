"""Run ids read from traces as file names: a plain name inside its folder, or a sentence saying why not."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spanreplay import TraceFormatError, UnsafeTraceValueError
from spanreplay.model.run_ids import RUN_ID, checked_run_id, path_inside
from spanreplay.run.salts import SALT_DIR, salt_beside, salt_path

HOSTILE = ["/abs/path/victim", "../../outside/victim", "..", ".", "", "a/b", "run\n", "run\x00", "-rf", "x" * 202]


@pytest.mark.parametrize("run_id", HOSTILE)
def test_a_run_id_that_is_no_plain_name_is_refused_with_the_value_and_the_fix(run_id: str) -> None:
    with pytest.raises(UnsafeTraceValueError) as raised:
        checked_run_id(run_id, where="the trace file t.jsonl")
    message = str(raised.value)
    assert f"The run id {run_id!r}"[:60] in message
    assert "in the trace file t.jsonl cannot name a trace file" in message
    assert "give the run another id, or leave this trace out." in message
    assert isinstance(raised.value, TraceFormatError)  # readers' callers already handle it


@pytest.mark.parametrize("run_id", HOSTILE)
def test_a_salt_is_never_named_by_such_a_run_id(tmp_path: Path, run_id: str) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_text("")
    with pytest.raises(UnsafeTraceValueError):
        salt_path(tmp_path, run_id)
    with pytest.raises(UnsafeTraceValueError, match=re.escape(f"in the trace file {str(trace)!r}")):
        salt_beside(f"{trace}:1", run_id)


@given(st.text(max_size=210))
def test_any_text_is_a_run_id_that_names_a_file_inside_the_folder_or_is_refused(text: str) -> None:
    folder = Path("/srv/traces")
    try:
        run_id = checked_run_id(text, where="a test")
    except UnsafeTraceValueError:
        assert not RUN_ID.fullmatch(text)
        return
    path = path_inside(folder / SALT_DIR, f"{run_id}.salt")
    assert path.parent == folder / SALT_DIR
    assert path.resolve().parent == (folder / SALT_DIR).resolve()


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "traces").mkdir()
    (tmp_path / "traces" / "run_x.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(UnsafeTraceValueError, match="leads outside the folder"):
        path_inside(tmp_path / "traces", "run_x.jsonl")
    assert path_inside(tmp_path / "traces", "run_y.jsonl") == tmp_path / "traces" / "run_y.jsonl"

"""Names and text read from traces: run ids are checked whole, control characters never reach a terminal raw,
and a report is as private as the trace it was made from."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.cli import cli
from spanreplay.exporters import DurableFileSpanProcessor

# What a terminal acts on instead of showing: C0 but the line break, DEL, C1.
_RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("run_id", ["nightly-42\n", "nightly-42\r\n", "nightly\n-42", "\nnightly-42"])
def test_a_run_id_with_a_line_break_is_refused(trace_dir: Path, run_id: str) -> None:
    with pytest.raises(spanreplay.ConfigurationError, match="cannot name a trace file"):
        spanreplay.record(agent="a", run_id=run_id)
    assert not trace_dir.exists() or list(trace_dir.iterdir()) == []


def test_the_file_exporter_writes_no_file_for_a_run_id_ending_in_a_newline(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    processor = DurableFileSpanProcessor(tmp_path)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with provider.get_tracer("t").start_as_current_span("s", attributes={"spanreplay.run.id": "r1\n"}):
        pass
    provider.shutdown()
    assert list(tmp_path.iterdir()) == []
    assert "cannot name a trace file" in caplog.text


def _record(agent: str) -> str:
    with spanreplay.record(agent=agent) as run:
        spanreplay.boundary("tool", agent, {"q": agent}, lambda: agent)
    return run.run_id


def test_show_and_runs_print_an_ansi_escape_in_an_agent_name_as_text(trace_dir: Path) -> None:
    run_id = _record("\x1b[31mred\x1b]0;title\x07")
    for args in (["show", str(trace_dir), run_id], ["runs", str(trace_dir)]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.output
        assert "\x07" not in result.output
        assert "\\x1b[31mred\\x1b]0;title\\x07" in result.output


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(agent=st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=24))
def test_no_control_character_of_an_agent_name_reaches_the_terminal(trace_dir: Path, agent: str) -> None:
    run_id = _record(agent)
    for args in (["show", str(trace_dir), run_id], ["show", str(trace_dir), run_id, "--seq", "1"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert not _RAW_CONTROL.search(result.output), repr(result.output)


def test_report_writes_its_page_owner_only(trace_dir: Path, tmp_path: Path) -> None:
    run_id = _record("support")
    out = tmp_path / "run.html"
    umask = os.umask(0o022)
    try:
        result = CliRunner().invoke(cli, ["report", str(trace_dir), run_id, "-o", str(out)])
    finally:
        os.umask(umask)
    assert result.exit_code == 0, result.output
    assert out.stat().st_mode & 0o777 == 0o600
    assert (trace_dir / f"{run_id}.jsonl").stat().st_mode & 0o777 == 0o600  # as private as its trace

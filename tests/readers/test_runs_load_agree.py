"""``runs()`` and ``load()`` agree: a run that load refuses is not "ok" in the listing.

A file that two processes wrote under one run id listed as "ok, 1500 steps"
while load refused it. The listing now names in ``RunSummary.damaged`` the
sentence load raises (two recordings under one id, steps missing), and keeps
``status`` as recorded. The files are crafted by hand from real recordings.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanreplay
from fixtures.recordings import lines, record_agent, seq_of
from spanreplay import SpanReplayError, SpanReplayWarning, TraceFormatError
from spanreplay.cli import cli


def two_processes(trace_dir: Path, tmp_path: Path, run_id: str) -> Path:
    """One file of two recordings of ``run_id``, as two processes appending to it write it."""
    record_agent(run_id)
    first = (trace_dir / f"{run_id}.jsonl").read_bytes()
    (trace_dir / f"{run_id}.jsonl").unlink()
    record_agent(run_id)
    second = (trace_dir / f"{run_id}.jsonl").read_bytes()
    both = tmp_path / "shared.jsonl"
    both.write_bytes(first + second)
    return both


def refusal(path: Path, run_id: str) -> str | None:
    try:
        spanreplay.load(path, run_id)
    except SpanReplayError as exc:
        return str(exc)
    return None


def test_a_run_id_two_processes_wrote_is_damaged_in_the_listing_as_load_refuses_it(
    trace_dir: Path, tmp_path: Path
) -> None:
    path = two_processes(trace_dir, tmp_path, "run_twice")
    with pytest.raises(TraceFormatError, match=r"^Run run_twice holds two run spans .* so two recordings share"):
        spanreplay.load(path, "run_twice")
    (run,) = spanreplay.runs(path)
    assert run.status == "ok"
    assert run.damaged is not None
    assert run.damaged.startswith("Run run_twice holds two run spans (")
    assert "so two recordings share one run id; load each from its own file" in run.damaged
    result = CliRunner().invoke(cli, ["runs", str(path)])
    assert result.exit_code == 0, result.output
    assert "damaged" in result.stdout
    assert "1 run(s), 1 not ok (1 damaged: spanreplay load refuses them)" in result.stdout


def test_two_recordings_without_a_second_run_span_clash_on_a_seq(trace_dir: Path, tmp_path: Path) -> None:
    path = two_processes(trace_dir, tmp_path, "run_twice")
    # The second process died before it wrote its run span: only its steps are left.
    kept = [raw for index, raw in enumerate(lines(path)) if index < 8 or seq_of(raw) is not None]
    path.write_bytes(b"".join(kept))
    message = refusal(path, "run_twice")
    assert message is not None
    assert "two recordings share one run id" in message
    (run,) = spanreplay.runs(path)
    assert run.damaged is not None
    assert run.damaged.startswith("Run run_twice holds two spans at seq ")
    assert "two recordings share one run id" in run.damaged


def test_a_run_missing_a_step_is_refused_alike_word_for_word(trace_dir: Path, tmp_path: Path) -> None:
    record_agent("run_gap")
    path = tmp_path / "gap.jsonl"
    path.write_bytes(b"".join(raw for raw in lines(trace_dir / "run_gap.jsonl") if seq_of(raw) != 4))
    (run,) = spanreplay.runs(path)
    assert run.damaged == refusal(path, "run_gap")
    assert run.damaged is not None
    assert run.damaged.startswith(f"Run run_gap in {path} is missing the spans at seq 4 of 6")


# Two real runs in one file, reshuffled: any subset of their lines, in any order, some twice.
@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    from opentelemetry.sdk.trace import TracerProvider

    directory = tmp_path_factory.mktemp("agree")
    provider = TracerProvider()
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    record_agent("run_one")
    record_agent("run_two", calls=1)
    provider.shutdown()
    return lines(directory / "run_one.jsonl") + lines(directory / "run_two.jsonl")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_listing_and_load_agree_on_any_rearrangement(
    two_runs: list[bytes], tmp_path: Path, data: st.DataObject
) -> None:
    picked = data.draw(
        st.lists(st.sampled_from(range(len(two_runs))), min_size=1, max_size=2 * len(two_runs)), label="lines"
    )
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(two_runs[i] for i in picked))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpanReplayWarning)  # a crashed run's missing steps
        for run in spanreplay.runs(path):
            assert run.damaged == refusal(path, run.run_id), run

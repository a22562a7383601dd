"""Arbitrary garbage inserted into a valid file of several runs touches only the run it lands in.

Whatever the bytes and wherever they go (after the first byte, which decides the
format), listing and loading raise nothing but spanreplay's errors, every run
whose lines the garbage did not touch lists and loads exactly as recorded, and
the touched run is refused or loads (what garbage inside its own line changes
there that is not replayed, an attribute name, shows; payloads keep their digests).
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanreplay
from fixtures.recordings import lines, record_agent
from spanreplay import SpanReplayError, SpanReplayWarning

RUNS = ("run_alpha", "run_beta", "run_gamma")  # none is another with bytes inserted


class Recorded(tuple):  # type: ignore[type-arg]
    """The file, its lines and each run's log; shown short in a falsifying example."""

    def __repr__(self) -> str:
        return "<three recorded runs>"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    from opentelemetry.sdk.trace import TracerProvider

    directory = tmp_path_factory.mktemp("garbage")
    provider = TracerProvider()
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    for run_id in RUNS:
        record_agent(run_id, calls=1)
    provider.shutdown()
    raw = [line for run_id in RUNS for line in lines(directory / f"{run_id}.jsonl")]
    logs = {run_id: spanreplay.load(directory / f"{run_id}.jsonl") for run_id in RUNS}
    return Recorded((b"".join(raw), raw, logs))


def owner(line: bytes) -> str:
    return next(run_id for run_id in RUNS if f'"{run_id}"'.encode() in line)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(min_size=1, max_size=48), where=st.floats(min_value=0, max_value=1))
def test_garbage_touches_only_its_own_run(recorded: Recorded, tmp_path: Path, garbage: bytes, where: float) -> None:
    whole, raw, logs = recorded
    at = max(1, round(where * len(whole)))
    path = tmp_path / "runs.jsonl"
    path.write_bytes(whole[:at] + garbage + whole[at:])
    # The line the garbage lands in (at its end: a line of its own, touching none).
    start, touched = 0, None
    for line in raw:
        if start <= at < start + len(line):
            touched = owner(line)
        start += len(line)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpanReplayWarning)
        try:
            listed = {run.run_id: run for run in spanreplay.runs(path)}
        except SpanReplayError:
            listed = None
        for run_id in RUNS:
            if run_id == touched:
                # Refused, or loaded: bytes inside its own line may change what is not
                # replayed (an attribute name), while payloads are held by their digests.
                with contextlib.suppress(SpanReplayError):
                    spanreplay.load(path, run_id)
                continue
            assert spanreplay.load(path, run_id) == logs[run_id]
            assert listed is not None
            assert listed[run_id].damaged is None
            assert listed[run_id].steps == len(logs[run_id])

"""Exact checks of masked inputs: what the run's salt adds to recording and replaying.

A run masked without a key masks each input that holds personal data a second
time, with the salted twin of the masker, and records a check per value found;
replay does the same to each served call's input. Measured, in the same
process, for a tool call whose input holds an email and a phone number:

- recording with the checks (the default without a key) against recording
  with them switched off, every value new (the worst case: nothing is
  remembered) and every value repeated (a customer met again);
- replaying the same run from its trace file with the salt beside it against
  replaying it without the salt.

    python benchmarks/bench_masked_checks.py [--quick] [--json]
"""

from __future__ import annotations

import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from _common import Case, Figure, emit, interleaved, median, parse_args, timed
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.recording import recording_run as _recording
from spanreplay.recording.input_checks import InputChecks
from spanreplay.run.salts import salt_path

NAME = "masked_checks"


def send(i: int, repeat: bool) -> None:
    n = 7 if repeat else i
    spanreplay.boundary(
        "tool",
        "send",
        {"to": f"customer{n}@example.com", "body": f"Call +1 (415) 555-{n % 10000:04d} about order {i}", "n": i},
        lambda: "sent",
    )


def measure(*, calls: int, repeats: int) -> list[Figure]:
    root = Path(tempfile.mkdtemp(prefix="spanreplay-bench-checks-"))
    provider = TracerProvider()
    start: Callable[..., Any] = InputChecks.start
    try:

        def record(checks: bool, repeat: bool) -> Case:
            def case() -> int:
                directory = root / f"r{time.perf_counter_ns()}"
                _recording.InputChecks.start = start if checks else (lambda *_, **__: None)  # type: ignore[method-assign]
                spanreplay.configure(trace_dir=directory, tracer_provider=provider)
                with spanreplay.record(agent="bench"):
                    t = time.perf_counter_ns()
                    for i in range(calls):
                        send(i, repeat)
                    elapsed = time.perf_counter_ns() - t
                _recording.InputChecks.start = start  # type: ignore[method-assign]
                shutil.rmtree(directory)
                return elapsed

            return case

        directory = root / "replayed"
        spanreplay.configure(trace_dir=directory, tracer_provider=provider)
        with spanreplay.record(agent="bench") as run:
            for i in range(calls):
                send(i, False)
        log = spanreplay.load(directory, run.run_id)
        salt = salt_path(directory, run.run_id).read_bytes()
        unsalted = root / "unsalted"
        unsalted.mkdir()
        shutil.copy(directory / f"{run.run_id}.jsonl", unsalted)
        bare = spanreplay.load(unsalted, run.run_id)
        assert salt

        def replay(source: spanreplay.EventLog) -> Case:
            def case() -> int:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", spanreplay.SpanReplayWarning)
                    with spanreplay.replay(source):
                        t = time.perf_counter_ns()
                        for i in range(calls):
                            send(i, False)
                        return time.perf_counter_ns() - t

            return case

        samples = interleaved(
            {
                "new_on": record(True, False),
                "new_off": record(False, False),
                "same_on": record(True, True),
                "same_off": record(False, True),
                "replay_salted": replay(log),
                "replay_unsalted": replay(bare),
            },
            repeats=repeats,
        )
    finally:
        spanreplay.reset()
        provider.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    us = {name: [ns / calls / 1000 for ns in values] for name, values in samples.items()}

    def ratio(subject: str, baseline: str, metric: str) -> Figure:
        return Figure(NAME, metric, median(us[subject]) / median(us[baseline]), "x")

    return [
        timed(NAME, "record, every value new, checks on", us["new_on"]),
        timed(NAME, "record, every value new, checks off", us["new_off"]),
        ratio("new_on", "new_off", "ratio record on / off, every value new"),
        timed(NAME, "record, values repeated, checks on", us["same_on"]),
        timed(NAME, "record, values repeated, checks off", us["same_off"]),
        ratio("same_on", "same_off", "ratio record on / off, values repeated"),
        timed(NAME, "replay with the salt", us["replay_salted"]),
        timed(NAME, "replay without the salt", us["replay_unsalted"]),
        ratio("replay_salted", "replay_unsalted", "ratio replay salted / unsalted"),
        Figure(NAME, "calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    calls, repeats = (50, 2) if args.quick else (1000, 7)
    emit(measure(calls=calls, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

"""Replay cost per boundary of the 1 KB ``@spanreplay.tool`` call.

A run of N calls is recorded to a real trace file and loaded once; each repeat then
replays it under a fresh ``spanreplay.replay(log)`` and times the N calls: call id,
event lookup, input compare, output decode. Beside it: the same through
``spanreplay.boundary()``, the floor that no replay can avoid (encoding the input
and decoding the output with orjson), and agent-rewind replaying the same call.

    python benchmarks/bench_replay.py [--quick] [--json]
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import orjson
from _common import QUERY, Case, Figure, emit, interleaved, lookup_plain, median, noise, parse_args, peer_and_count
from opentelemetry.sdk.trace import TracerProvider

import spanreplay

GOAL_US = 10.0
NAME = "replay"


@spanreplay.tool(name="lookup")
def lookup(query: str) -> dict[str, str]:
    return lookup_plain(query)


def must_not_run() -> dict[str, str]:
    raise AssertionError("replay ran the real work")


def measure(*, calls: int, repeats: int) -> list[Figure]:
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-"))
    provider = TracerProvider()
    try:
        spanreplay.configure(trace_dir=workdir / "traces", tracer_provider=provider)
        with spanreplay.record(agent="bench") as run:
            for _ in range(calls):
                lookup(QUERY)
        log = spanreplay.load(workdir / "traces", run.run_id)
        assert len(log) == calls, log

        def replay_tool() -> int:
            with spanreplay.replay(log):
                start = time.perf_counter_ns()
                for _ in range(calls):
                    lookup(QUERY)
                return time.perf_counter_ns() - start

        def replay_boundary() -> int:
            with spanreplay.replay(log):
                start = time.perf_counter_ns()
                for _ in range(calls):
                    spanreplay.boundary("tool", "lookup", {"query": QUERY}, must_not_run)
                return time.perf_counter_ns() - start

        def replay_guarded() -> int:
            with spanreplay.replay(log, guard=True):
                start = time.perf_counter_ns()
                for _ in range(calls):
                    lookup(QUERY)
                return time.perf_counter_ns() - start

        recorded_output = log.events[0].output_json
        assert recorded_output is not None

        def floor() -> int:
            start = time.perf_counter_ns()
            for _ in range(calls):
                orjson.dumps({"query": QUERY}, option=orjson.OPT_SORT_KEYS)
                orjson.loads(recorded_output)
            return time.perf_counter_ns() - start

        cases: dict[str, Case] = {
            "tool": replay_tool,
            "guarded": replay_guarded,
            "boundary": replay_boundary,
            "floor": floor,
        }
        rewind_note = ""
        try:
            import rewind
        except ImportError:
            rewind_note = "agent-rewind is not installed (pip install agent-rewind)"
        else:
            rewind_lookup = rewind.tool(name="lookup")(lookup_plain)
            rewind_path = workdir / "run.rewind"
            with rewind.record(rewind_path):
                for _ in range(calls):
                    rewind_lookup(QUERY)

            def rewind_replay() -> int:
                with rewind.replay(rewind_path, require_full_consumption=True):
                    start = time.perf_counter_ns()
                    for _ in range(calls):
                        rewind_lookup(QUERY)
                    return time.perf_counter_ns() - start

            cases["agent_rewind"] = rewind_replay

        samples = interleaved(cases, repeats=repeats)
    finally:
        provider.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)

    us = {case: [ns / calls / 1000 for ns in values] for case, values in samples.items()}
    ours = median(us["tool"])
    figures = [
        Figure(
            NAME,
            "spanreplay @tool replay",
            ours,
            "us/call",
            goal=f"< {GOAL_US:g} us",
            met=ours < GOAL_US,
            note=noise(us["tool"]),
        ),
        Figure(
            NAME,
            "spanreplay.boundary() replay",
            median(us["boundary"]),
            "us/call",
            goal=f"< {GOAL_US:g} us",
            met=median(us["boundary"]) < GOAL_US,
            note=noise(us["boundary"]),
        ),
        Figure(
            NAME,
            "spanreplay @tool replay, guard=True",
            median(us["guarded"]),
            "us/call",
            note=f"{median(us['guarded']) / ours:.2f}x unguarded; {noise(us['guarded'])}",
        ),
        Figure(
            NAME,
            "floor: orjson encode input + decode output",
            median(us["floor"]),
            "us/call",
            note="work every replay must do",
        ),
    ]
    figures += peer_and_count(
        NAME, us, "tool", "agent-rewind @rewind.tool replay", rewind_note, calls=calls, repeats=repeats
    )
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    calls, repeats = (200, 3) if args.quick else (1000, 21)
    emit(measure(calls=calls, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

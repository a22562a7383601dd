"""Throughput (runs/s) of the whole ``spanreplay check`` command with -j 1, 2 and 4, and split in two shards.

The small agent of bench_check.py (ten boundaries a run) is recorded N times
(40) to real trace files. Each repeat then runs, interleaved, the command as CI
would (``python -m spanreplay.cli check DIR --entry ... --json``):

- ``-j 1``, ``-j 2`` and ``-j 4`` over all N runs;
- ``--shard 1/2`` then ``--shard 2/2`` (``-j 1``), one after the other, as two CI
  runners would run them on one machine: each shard's own figure, and the two
  together.

That is runs/s of the whole command: its start, the fork server's (which builds
the masker's hyperscan databases: most of the fixed cost), listing the source,
and every run. The replays alone are timed in this process too, as
bench_check.py does: ``_check_processes.replay_in_fresh_process`` over the runs
(all of them, or one shard's) from a thread pool of 1, 2 or 4, the fork server
started and ready before the clock starts. The load average of the machine
before and after is printed with the figures: on shared cores the -j figures
say as much about the other work as about check.

    python benchmarks/bench_check_shards.py [--quick] [--json]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import orjson
from _common import Case, Figure, emit, format_value, interleaved, median, parse_args, spread
from bench_check import AGENT
from opentelemetry.sdk.trace import TracerProvider

import spanreplay

NAME = "check_shards"
SRC = str(Path(spanreplay.__file__).resolve().parent.parent)
ENTRY = "bench_shards_agent:main"


def _record(workdir: Path, runs: int) -> Path:
    provider = TracerProvider()
    sys.path.insert(0, str(workdir))
    try:
        (workdir / "bench_shards_agent.py").write_text(AGENT)
        import bench_shards_agent as agent

        traces = workdir / "traces"
        spanreplay.configure(trace_dir=traces, tracer_provider=provider)
        for _ in range(runs):
            with spanreplay.record(agent="bench"):
                agent.main()
        spanreplay.reset()
        return traces
    finally:
        sys.path.remove(str(workdir))
        sys.modules.pop("bench_shards_agent", None)
        provider.shutdown()


def measure(*, runs: int, repeats: int, jobs: Sequence[int]) -> list[Figure]:
    from concurrent.futures import ThreadPoolExecutor

    from spanreplay.cli import _check_processes as processes
    from spanreplay.cli._check_shards import Shard, split_runs

    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-shards-"))
    cwd = os.getcwd()
    try:
        traces = _record(workdir, runs)
        listed = spanreplay.runs(traces)
        shards = {index: [run.run_id for run in split_runs(listed, Shard(index, 2))[0]] for index in (1, 2)}
        env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
        os.chdir(workdir)
        sys.path.insert(0, str(workdir))

        def command(*options: str) -> int:
            args = [sys.executable, "-m", "spanreplay.cli", "check", str(traces), "--entry", ENTRY, "--json"]
            start = time.perf_counter_ns()
            done = subprocess.run([*args, *options], cwd=workdir, env=env, capture_output=True, check=False)
            elapsed = time.perf_counter_ns() - start
            assert done.returncode == 0, done.stderr.decode()
            report = orjson.loads(done.stdout)
            assert report["totals"]["completed"] == len(report["runs"]), done.stdout.decode()
            return elapsed

        def replays(run_ids: list[str], count: int) -> Case:
            def one(number: int) -> None:
                scratch = workdir / "scratch" / str(number)
                scratch.mkdir(parents=True, exist_ok=True)
                done = processes.replay_in_fresh_process(str(traces), run_ids[number], ENTRY, (), None, scratch)
                assert done.verdict.outcome == "completed", done

            def case() -> int:
                with processes.fresh_processes(), ThreadPoolExecutor(count) as pool:
                    start = time.perf_counter_ns()
                    list(pool.map(one, range(len(run_ids))))
                    return time.perf_counter_ns() - start

            return case

        every = [run.run_id for run in listed]
        cases: dict[str, Case] = {}
        for count in jobs:
            cases[f"command j{count}"] = lambda count=count: command("-j", str(count))
            cases[f"replays j{count}"] = replays(every, count)
        cases["command shards"] = lambda: command("--shard", "1/2") + command("--shard", "2/2")
        for index in (1, 2):
            cases[f"replays shard{index}"] = replays(shards[index], 1)
        load_before = os.getloadavg()
        samples = interleaved(cases, repeats=repeats)
        load_after = os.getloadavg()
    finally:
        os.chdir(cwd)
        if str(workdir) in sys.path:
            sys.path.remove(str(workdir))
        shutil.rmtree(workdir, ignore_errors=True)

    def rate(case: str, count: int) -> list[float]:
        return [count / (ns / 1e9) for ns in samples[case]]

    def noise(rates: list[float]) -> str:  # the best repeat of a rate is its highest
        return f"best {format_value(max(rates))}, spread {spread(rates):.0%}"

    figures = []
    for count in jobs:
        for kind, what in (("command", "whole command"), ("replays", "replays alone")):
            values = rate(f"{kind} j{count}", runs)
            figures.append(Figure(NAME, f"check -j {count}, {what}", median(values), "runs/s", note=noise(values)))
    values = rate("command shards", runs)
    figures.append(
        Figure(
            NAME, "--shard 1/2 then 2/2, whole commands", median(values), "runs/s", note="-j 1 each; " + noise(values)
        )
    )
    for index in (1, 2):
        values = rate(f"replays shard{index}", len(shards[index]))
        note = f"{len(shards[index])} of the {runs} runs; " + noise(values)
        figures.append(Figure(NAME, f"--shard {index}/2, replays alone", median(values), "runs/s", note=note))
    load = f"load average (1, 5, 15 min) before {_load(load_before)}, after {_load(load_after)}; {os.cpu_count()} CPUs"
    figures.append(Figure(NAME, "runs x repeats", runs * repeats, "runs", note=load))
    return figures


def _load(values: tuple[float, float, float]) -> str:
    return "/".join(f"{v:.2f}" for v in values)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    runs, repeats = (6, 1) if args.quick else (40, 5)
    emit(measure(runs=runs, repeats=repeats, jobs=(1, 2, 4)), as_json=args.json)


if __name__ == "__main__":
    main()

"""Time per replayed run of ``spanreplay check`` against a plain replay of the same runs in one process.

A small agent (a clock read, a uuid, a random draw, six tools with 1 KB inputs,
ten boundaries a run) is recorded N times to real trace files. Each repeat then
times, interleaved:

- each run as check replays it, forked from check's server (``-j 1``, and two at a
  time as ``-j 2`` does): the loop of ``_check_processes.replay_in_fresh_process``
  over the N runs, the server started before the clock starts;
- the same with a new interpreter per run (``python -m spanreplay.cli._check_run``,
  what platforms without fork get);
- the plain replay: in this process, for every run, ``spanreplay.load`` and the
  entry called under ``spanreplay.replay`` (module state shared between runs,
  which is what check's process per run avoids);
- the whole command over the N runs (``python -m spanreplay.cli check DIR
  --entry agent:main --json``, -j 1): its start, its imports, the server's start,
  the listing, and every run.

    python benchmarks/bench_check.py [--quick] [--json]
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
from _common import QUERY, Case, Figure, emit, interleaved, median, noise, parse_args
from opentelemetry.sdk.trace import TracerProvider

import spanreplay

NAME = "check"
SRC = str(Path(spanreplay.__file__).resolve().parent.parent)

AGENT = f"""
import spanreplay

QUERY = {QUERY!r}


@spanreplay.tool
def search(query: str) -> dict:
    return {{"hits": [query[:200], query[200:400]], "total": 2}}


@spanreplay.tool
def lookup(query: str, page: int) -> dict:
    return {{"text": query, "page": page}}


@spanreplay.tool
def store(record: dict) -> str:
    return "stored"


def main():
    spanreplay.now()
    spanreplay.uuid4()
    found = search(QUERY)
    for page in range(4):
        lookup(QUERY, page)
    spanreplay.random()
    store({{"found": found["total"]}})
    return spanreplay.now().isoformat()
"""


def measure(*, runs: int, repeats: int) -> list[Figure]:
    from concurrent.futures import ThreadPoolExecutor

    from spanreplay.cli import _check_processes as processes

    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-check-"))
    provider = TracerProvider()
    sys.path.insert(0, str(workdir))
    cwd = os.getcwd()
    try:
        (workdir / "bench_check_agent.py").write_text(AGENT)
        import bench_check_agent as agent

        traces = workdir / "traces"
        spanreplay.configure(trace_dir=traces, tracer_provider=provider)
        run_ids = []
        for _ in range(runs):
            with spanreplay.record(agent="bench") as run:
                agent.main()
            run_ids.append(run.run_id)
        steps = len(spanreplay.load(traces, run_ids[0]))
        env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
        os.chdir(workdir)

        def each_run(fork: bool, jobs: int) -> Case:
            def one(number: int) -> None:
                scratch = workdir / "scratch" / str(number)
                scratch.mkdir(parents=True, exist_ok=True)
                done = processes.replay_in_fresh_process(
                    str(traces), run_ids[number], "bench_check_agent:main", (), None, scratch
                )
                assert done.verdict.outcome == "completed", done

            def case() -> int:
                processes.use_fork_server = fork
                with processes.fresh_processes(), ThreadPoolExecutor(jobs) as pool:
                    start = time.perf_counter_ns()
                    list(pool.map(one, range(runs)))
                    return time.perf_counter_ns() - start

            return case

        def command() -> int:
            args = [sys.executable, "-m", "spanreplay.cli", "check", str(traces), "--entry", "bench_check_agent:main"]
            start = time.perf_counter_ns()
            done = subprocess.run([*args, "--json"], cwd=workdir, env=env, capture_output=True, check=False)
            elapsed = time.perf_counter_ns() - start
            assert done.returncode == 0, done.stderr.decode()
            assert orjson.loads(done.stdout)["totals"]["completed"] == runs, done.stdout.decode()
            return elapsed

        def plain() -> int:
            start = time.perf_counter_ns()
            for run_id in run_ids:
                with spanreplay.replay(traces, run_id) as replaying:
                    agent.main()
                assert replaying.outcome == "completed"
            return time.perf_counter_ns() - start

        cases: dict[str, Case] = {
            "fork_j1": each_run(True, 1),
            "fork_j2": each_run(True, 2),
            "interpreter": each_run(False, 1),
            "plain": plain,
            "command": command,
        }
        samples = interleaved(cases, repeats=repeats)
    finally:
        os.chdir(cwd)
        sys.path.remove(str(workdir))
        sys.modules.pop("bench_check_agent", None)
        provider.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)

    ms = {case: [ns / runs / 1e6 for ns in values] for case, values in samples.items()}
    figures = [
        Figure(NAME, "each run, forked (check -j 1)", median(ms["fork_j1"]), "ms/run", note=noise(ms["fork_j1"])),
        Figure(
            NAME, "each run, forked, 2 at a time (-j 2)", median(ms["fork_j2"]), "ms/run", note=noise(ms["fork_j2"])
        ),
        Figure(
            NAME,
            "each run, a new interpreter (no fork)",
            median(ms["interpreter"]),
            "ms/run",
            note=noise(ms["interpreter"]),
        ),
        Figure(NAME, "plain replay in one process", median(ms["plain"]), "ms/run", note=noise(ms["plain"])),
        Figure(
            NAME,
            f"the whole check command over {runs} runs",
            median(ms["command"]),
            "ms/run",
            note="its start, the server's, listing: " + noise(ms["command"]),
        ),
    ]
    for case, label in (("fork_j1", "forked -j 1"), ("fork_j2", "forked -j 2"), ("interpreter", "new interpreter")):
        ratios = [a / b for a, b in zip(samples[case], samples["plain"], strict=True)]
        figures.append(Figure(NAME, f"ratio {label} / plain", median(ratios), "x", note=noise(ratios)))
    figures.append(Figure(NAME, "runs x repeats", runs * repeats, "runs", note=f"{runs} runs of {steps} steps"))
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    runs, repeats = (3, 1) if args.quick else (20, 7)
    emit(measure(runs=runs, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

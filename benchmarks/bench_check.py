"""Time per replayed run of ``spanreplay check`` against a plain replay of the same runs in one process.

A small agent (a clock read, a uuid, four tools with 1 KB payloads, about ten
boundaries a run) is recorded N times to real trace files. Each repeat then
times, interleaved:

- ``check -j 1`` and ``check -j 2``: the whole command (``python -m spanreplay.cli
  check DIR --entry agent:main --json``), which lists the runs and replays each
  in a fresh process, over N runs and over 2N: the difference is what each run
  costs, the rest what the command costs once;
- the plain replay: in this process, for every run, ``spanreplay.load`` and the
  entry called under ``spanreplay.replay`` (module state shared between runs,
  which is what check's process per run avoids);
- a new interpreter per run: ``python -c "import spanreplay.cli._check_run"``
  (the interpreter and spanreplay's imports, no replay), which is what each run
  would cost if check did not fork its runs from a server that imported them once.

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
# New interpreters started per repeat for the figure without the forkserver (each takes about a second).
FLOOR_PROCESSES = 5
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
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-check-"))
    provider = TracerProvider()
    sys.path.insert(0, str(workdir))
    try:
        (workdir / "bench_check_agent.py").write_text(AGENT)
        import bench_check_agent as agent

        # traces/a holds ``runs`` runs, traces/b as many again: check over traces/ replays both.
        run_ids = []
        for half in ("a", "b"):
            spanreplay.configure(trace_dir=workdir / "traces" / half, tracer_provider=provider)
            for _ in range(runs):
                with spanreplay.record(agent="bench") as run:
                    agent.main()
                run_ids.append(run.run_id)
        traces = workdir / "traces"
        steps = len(spanreplay.load(traces, run_ids[0]))
        env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}

        def check(source: Path, jobs: int, expected: int) -> Case:
            command = [sys.executable, "-m", "spanreplay.cli", "check", str(source)]
            command += ["--entry", "bench_check_agent:main", "-j", str(jobs), "--json"]

            def case() -> int:
                start = time.perf_counter_ns()
                done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, check=False)
                elapsed = time.perf_counter_ns() - start
                assert done.returncode == 0, done.stderr.decode()
                assert orjson.loads(done.stdout)["totals"]["completed"] == expected, done.stdout.decode()
                return elapsed

            return case

        def plain() -> int:
            start = time.perf_counter_ns()
            for run_id in run_ids:
                with spanreplay.replay(traces, run_id) as replaying:
                    agent.main()
                assert replaying.outcome == "completed"
            return time.perf_counter_ns() - start

        def interpreter_floor() -> int:
            start = time.perf_counter_ns()
            for _ in range(FLOOR_PROCESSES):
                subprocess.run(
                    [sys.executable, "-c", "import spanreplay.cli._check_run"], cwd=workdir, env=env, check=True
                )
            return time.perf_counter_ns() - start

        cases: dict[str, Case] = {
            "j1_half": check(traces / "a", 1, runs),
            "j1_all": check(traces, 1, 2 * runs),
            "j2_half": check(traces / "a", 2, runs),
            "j2_all": check(traces, 2, 2 * runs),
            "plain": plain,
            "floor": interpreter_floor,
        }
        samples = interleaved(cases, repeats=repeats)
    finally:
        sys.path.remove(str(workdir))
        sys.modules.pop("bench_check_agent", None)
        provider.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)

    def ms(values: list[int], count: int) -> list[float]:
        return [ns / count / 1e6 for ns in values]

    # What one more run adds (the command's own start and listing cancel out), per repeat.
    per_run = {
        jobs: [(b - a) / runs / 1e6 for a, b in zip(samples[f"{jobs}_half"], samples[f"{jobs}_all"], strict=True)]
        for jobs in ("j1", "j2")
    }
    fixed = [h / 1e6 - runs * p for h, p in zip(samples["j1_half"], per_run["j1"], strict=True)]
    plain_ms = ms(samples["plain"], 2 * runs)
    floor_ms = ms(samples["floor"], FLOOR_PROCESSES)
    all_in = ms(samples["j1_all"], 2 * runs)
    figures = [
        Figure(NAME, "check -j 1, each run", median(per_run["j1"]), "ms/run", note=noise(per_run["j1"])),
        Figure(NAME, "check -j 2, each run", median(per_run["j2"]), "ms/run", note=noise(per_run["j2"])),
        Figure(NAME, "check, once per command", median(fixed), "ms", note="start, imports, forkserver, listing"),
        Figure(NAME, f"check -j 1 over {2 * runs} runs, all in, per run", median(all_in), "ms/run", note=noise(all_in)),
        Figure(NAME, "plain replay in one process, each run", median(plain_ms), "ms/run", note=noise(plain_ms)),
        Figure(
            NAME,
            "a new interpreter importing spanreplay",
            median(floor_ms),
            "ms/run",
            note="what each run would cost without the forkserver; " + noise(floor_ms),
        ),
    ]
    for jobs, label in (("j1", "-j 1"), ("j2", "-j 2")):
        ratios = [p / q for p, q in zip(per_run[jobs], plain_ms, strict=True)]
        figures.append(Figure(NAME, f"ratio check {label} / plain, each run", median(ratios), "x", note=noise(ratios)))
    figures.append(
        Figure(NAME, "runs x repeats", 2 * runs * repeats, "runs", note=f"{runs} + {runs} runs of {steps} steps")
    )
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    runs, repeats = (3, 1) if args.quick else (20, 7)
    emit(measure(runs=runs, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

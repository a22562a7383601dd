"""``spanreplay runs`` and ``spanreplay show`` on a file of many tiny spans: time and peak memory.

The file holds one run of ``--steps`` tiny steps among ``--others`` runs of ten
steps, written from a run recorded once with spanreplay's file exporter (the
generator is tests/helpers/tiny_spans.py, which the tests use too). Each command
runs in a fresh interpreter, so its peak RSS (``resource.getrusage``) is its own;
show's output goes to a file, 200 columns wide. The file goes to a temporary
directory (``--dir``, default the system's) that is deleted afterwards.

    python benchmarks/bench_scale.py [--quick] [--steps 1000000] [--others 10] [--commands runs,show,load]
        [--with postgres,check] [--json]

``--with`` adds, in the same output, the Postgres fill of 90 days
(``bench_postgres_partitions.py``) and the sharded gate (``bench_check_shards.py``),
each run in a fresh interpreter (``--quick`` passed on to them).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import Figure, emit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers.tiny_spans import record_templates, write_runs

NAME = "scale"
MB = 1_000_000
BIG_RUN = "run_many_tiny_steps"
GOAL_RATIO = 0.5  # spanreplay runs reads the file at half the raw read speed or better
GOAL_SHOW_MB = 200  # show's peak RSS on a run of a million steps


def child(command: str, path: str) -> None:
    """Run one CLI command in this process; print its seconds and this process's peak RSS."""
    import spanreplay
    from spanreplay.cli._app import cli

    base_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    if command == "load":
        log = spanreplay.load(path, BIG_RUN)
    else:
        args = {"runs": ["runs", path], "show": ["show", path, BIG_RUN]}[command]
        with open(os.devnull, "w") as sink:
            stdout, sys.stdout = sys.stdout, sink
            try:
                cli.main(args, standalone_mode=False)
            finally:
                sys.stdout = stdout
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    figures = {"seconds": seconds, "peak_rss_mb": peak_kib * 1024 / MB, "base_rss_mb": base_kib * 1024 / MB}
    if command == "load":
        figures["events"] = len(log)
    print(json.dumps(figures))


def raw_read_mbps(path: Path, rounds: int = 3) -> float:
    """The file's bytes read in 1 MiB ``read()`` chunks from the page cache, after a warm-up read:
    the best of ``rounds``, in MB/s (the baseline of the listing's goal)."""
    best = float("inf")
    for round_ in range(rounds + 1):
        started = time.perf_counter()
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass
        if round_:  # the first round is the warm-up
            best = min(best, time.perf_counter() - started)
    return path.stat().st_size / best / MB


# The other figures of a fleet's scale: the script that measures each.
OTHERS = {"postgres": "bench_postgres_partitions.py", "check": "bench_check_shards.py"}


def other_figures(name: str, *, quick: bool) -> list[Figure]:
    """The figures another benchmark prints as JSON, run in a fresh interpreter."""
    script = Path(__file__).resolve().parent / OTHERS[name]
    command = [sys.executable, str(script), "--json", *(["--quick"] if quick else [])]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return [Figure(**figure) for figure in json.loads(out.splitlines()[-1])]


def measure(command: str, path: Path) -> dict[str, float]:
    env = {**os.environ, "COLUMNS": "200"}
    out = subprocess.run(
        [sys.executable, __file__, "--child", command, str(path)], check=True, capture_output=True, text=True, env=env
    ).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--others", type=int, default=10)
    parser.add_argument("--commands", default="runs,show,load", help="which to measure, comma-separated")
    parser.add_argument("--dir", default=None, help="where to write the file (deleted afterwards)")
    parser.add_argument("--with", dest="also", metavar="NAMES", default="", help="also postgres,check")
    parser.add_argument("--quick", action="store_true", help="2,000 steps: a smoke run, not a measurement")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("COMMAND", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.quick:
        args.steps = 2_000
    workdir = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=args.dir))
    try:
        templates = record_templates(workdir / "template")
        path = workdir / "tiny.jsonl"
        runs = [(f"run_other_{i:04d}", 10) for i in range(args.others)]
        runs.insert(len(runs) // 2, (BIG_RUN, args.steps))
        size = write_runs(templates, path, runs)
        figures = [Figure(NAME, "file size", size / MB, "MB", note=f"{args.steps} steps in one run")]
        for command in args.commands.split(","):
            result = measure(command, path)
            figures.append(Figure(NAME, f"{command} time", result["seconds"], "s"))
            peak = result["peak_rss_mb"]
            if command == "show":
                figures.append(Figure(NAME, "show peak RSS", peak, "MB", goal="< 200", met=peak < GOAL_SHOW_MB))
            else:
                figures.append(Figure(NAME, f"{command} peak RSS", peak, "MB"))
            if command == "runs":
                raw = raw_read_mbps(path)
                speed = size / result["seconds"] / MB
                figures.append(Figure(NAME, "runs speed", speed, "MB/s"))
                figures.append(Figure(NAME, "raw read, 1 MiB chunks", raw, "MB/s", note="same file, just after"))
                ratio = speed / raw
                figures.append(
                    Figure(NAME, "ratio runs / raw read", ratio, "x", goal=">= 0.5", met=ratio >= GOAL_RATIO)
                )
            if command == "load":
                held = (peak - result["base_rss_mb"]) / result["events"] * 1000
                figures.append(Figure(NAME, "load RSS per 1,000 events", held, "MB", note="peak less the imports"))
            figures.append(Figure(NAME, f"{command} time per step", result["seconds"] / args.steps * 1e6, "us"))
        for name in filter(None, args.also.split(",")):
            figures.extend(other_figures(name, quick=args.quick))
        emit(figures, as_json=args.json)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()

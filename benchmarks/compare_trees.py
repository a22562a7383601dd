"""Two source trees of spanreplay, the same benchmarks, interleaved: their ratios side by side.

    python benchmarks/compare_trees.py BEFORE_SRC AFTER_SRC [--rounds 3] [--quick]
        [--bench bench_record.py --bench bench_replay.py]

BEFORE_SRC and AFTER_SRC are ``src`` folders (of a git worktree at each commit). Each
round runs every benchmark once per tree, in a fresh interpreter with that tree first on
``PYTHONPATH``, alternating which tree goes first, so a busy moment of the machine hits
both alike. The figures compared are the benchmarks' own ratios against their in-process
baselines (a bare OTel span, ...) and their per-call times (run side by side, so a slow
moment of the machine hits both trees alike): the medians over the rounds, and after/before.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = ("bench_record.py", "bench_replay.py")


def run(script: str, src: Path, quick: bool) -> dict[str, float]:
    """The ratio (``x``) and per-call (``us/call``) figures one benchmark prints, run against the tree at ``src``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, str(HERE / script), "--json", *(["--quick"] if quick else [])]
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{script} failed against {src} (exit {done.returncode}):\n{done.stderr}")
    return {
        f"{item['benchmark']}: {item['metric']} ({item['unit']})": item["value"]
        for item in json.loads(done.stdout)
        if item["unit"] in ("x", "us/call") and item["value"] == item["value"]  # NaN: a peer not installed
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="the src folder of the tree before")
    parser.add_argument("after", type=Path, help="the src folder of the tree after")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bench", action="append", help="a benchmark script (default: record and replay)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run, not a measurement")
    args = parser.parse_args(argv)
    for src in (args.before, args.after):
        if not (src / "spanreplay" / "__init__.py").is_file():
            parser.error(f"{src} holds no spanreplay package: give the src folder of a checkout")

    figures: dict[str, dict[str, list[float]]] = {}
    for round_ in range(args.rounds):
        trees = (("before", args.before), ("after", args.after))
        for script in args.bench or DEFAULT:
            for name, src in trees if round_ % 2 == 0 else trees[::-1]:
                for metric, value in run(script, src, args.quick).items():
                    figures.setdefault(metric, {"before": [], "after": []})[name].append(value)

    width = max(map(len, figures), default=10)
    print(f"{'figure':<{width}}  {'before':>9}  {'after':>9}  {'after/before':>12}")
    for metric, sides in figures.items():
        if not sides["before"] or not sides["after"]:
            continue
        before, after = statistics.median(sides["before"]), statistics.median(sides["after"])
        change = after / before if before else float("nan")
        print(f"{metric:<{width}}  {before:>9.3f}  {after:>9.3f}  {change:>11.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run every benchmark, each in its own interpreter, and print one table of figures.

    python benchmarks/run_all.py [--quick] [--json]

Each benchmark runs in a fresh process so that one's global state (a configured
tracer provider, a warmed cache, a grown heap) cannot flatter or burden the next.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from _common import Figure, table

HERE = Path(__file__).resolve().parent
BENCHMARKS = (
    "bench_record.py",
    "bench_replay.py",
    "bench_loader.py",
    "bench_formats.py",
    "bench_masking.py",
    "bench_masked_checks.py",
    "bench_otlp.py",
    "bench_postgres.py",  # needs PostgreSQL at 127.0.0.1:5432 or SPANREPLAY_TEST_PG_DSN
    "bench_postgres_volume.py",  # needs PostgreSQL too
    "bench_effects.py",  # needs PostgreSQL too
    "bench_cost.py",
    "bench_anthropic.py",  # needs vcrpy (the bench extra)
    "bench_check.py",
    "bench_check_shards.py",
    "bench_error_rebuild.py",
    "bench_langchain.py",  # needs langchain-core (the langchain extra)
    "bench_mcp.py",  # needs mcp (the mcp extra)
    "bench_pydantic_ai.py",  # needs pydantic-ai-slim (the pydantic-ai extra)
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke-run every benchmark with tiny sizes")
    parser.add_argument("--json", action="store_true", help="print all figures as one JSON list")
    args = parser.parse_args(argv)

    figures: list[Figure] = []
    failed: list[str] = []
    for script in BENCHMARKS:
        command = [sys.executable, str(HERE / script), "--json"] + (["--quick"] if args.quick else [])
        print(f"running {script} ...", file=sys.stderr, flush=True)
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            failed.append(script)
            print(f"{script} failed (exit {done.returncode}):\n{done.stderr}", file=sys.stderr)
            continue
        figures.extend(Figure(**item) for item in json.loads(done.stdout))
        print(f"  done in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    if args.json:
        json.dump([vars(f) for f in figures], sys.stdout, indent=1)
        print()
    else:
        print(
            f"spanreplay benchmarks on {platform.python_implementation()} {platform.python_version()}, "
            f"{platform.machine()}{' (quick: not a measurement)' if args.quick else ''}"
        )
        print(table(figures))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

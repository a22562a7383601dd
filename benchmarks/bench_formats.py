"""Trace formats: filtering a large Collector export, full parses, proto against JSON, conversation size.

A Collector export is generated the way bench_loader builds one (real recordings
replicated with fresh ids, many runs in flight, several spans per line, a few
spans twice), by default 1 GB. Measured, each pair in the same process:

- ``spanreplay.load(file, run_id)`` filtering one run, against reading the raw
  bytes in 1 MiB chunks (goal: at least 0.5x), and its peak RSS in a fresh
  interpreter (goal: under 150 MB);
- a full parse of every span of a smaller slice (``iter_spans``), against
  ``orjson.loads`` of each of its lines (goal: at least 0.7x);
- the same spans written as the Collector's ``format: proto`` (and with
  per-record zstd): full-parse throughput in spans/s against the JSON reader,
  file sizes, and filtering one run out of the proto file;
- bytes recorded for a 50-turn conversation (each model call's input holding
  the whole conversation so far), with inputs stored as references to the
  previous call's messages against naive full inputs.

The files go to a temporary directory that is deleted afterwards.

    python benchmarks/bench_formats.py [--quick] [--json] [--size-mb 1000] [--small-mb 150]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import Case, Figure, emit, interleaved, median
from bench_loader import build_export, measure_memory, orjson_lines, read_chunks

import spanreplay
from spanreplay.readers import iter_spans, writers

NAME = "formats"
MB = 1_000_000
RSS_GOAL_MB = 150
FILTER_GOAL = 0.5
PARSE_GOAL = 0.7


def _timed(fn: object) -> Case:
    def case() -> int:
        start = time.perf_counter_ns()
        fn()  # type: ignore[operator]
        return time.perf_counter_ns() - start

    return case


def _drain(path: Path) -> int:
    count = 0
    for _span in iter_spans(path):
        count += 1
    return count


def measure_export(*, size_mb: int, small_mb: int, repeats: int, workdir: Path) -> list[Figure]:
    export = build_export(workdir, size_mb, small_mb)
    big, small, run_id, boundaries = export.big, export.small, export.run_id, export.boundaries
    big_size, small_size = export.big_size, export.small_size
    if len(spanreplay.load(big, run_id)) != boundaries:
        raise AssertionError(f"load({run_id}) did not find the run's {boundaries} events")

    # Filtering one run out of the whole export, against the raw read. The warm-up round matters: the
    # first read of pages just written runs at about 60% of the speed of later reads, and timing it
    # puts that slow read into the baseline of one round (a ratio of ~1.1x in that round, ~0.7x after).
    filtering = interleaved(
        {"chunks": lambda: read_chunks(big), "load": _timed(lambda: spanreplay.load(big, run_id))},
        repeats=repeats,
        warmup=1,
    )
    filter_ratio = median([c / load for c, load in zip(filtering["chunks"], filtering["load"], strict=True)])
    memory = measure_memory(big, run_id)

    # Full parse of every span against orjson.loads per line, on the slice.
    spans_in_small = _drain(small)
    # The plain loop opens the file as plain code does; the readers open it with a 1 MiB
    # buffer, so the plain loop with that buffer is shown too (the parse alone compared).
    parsing = interleaved(
        {
            "parse": _timed(lambda: _drain(small)),
            "orjson": lambda: orjson_lines(small),
            "orjson_1m": lambda: orjson_lines(small, 1 << 20),
        },
        repeats=repeats,
    )
    parse_ratio = median([o / p for p, o in zip(parsing["parse"], parsing["orjson"], strict=True)])
    parse_ratio_1m = median([o / p for p, o in zip(parsing["parse"], parsing["orjson_1m"], strict=True)])

    # The same spans as the Collector's proto files.
    proto, proto_zstd, json_zstd = workdir / "small.proto", workdir / "small.proto.zst", workdir / "small.json.zst"
    with open(proto, "wb") as out:
        out.writelines(writers.proto_records(iter_spans(small)))
    with open(proto_zstd, "wb") as out:
        out.writelines(writers.proto_records(iter_spans(small), zstd=True))
    with open(json_zstd, "wb") as out:
        out.writelines(writers.json_records_zstd(iter_spans(small)))
    if _drain(proto) != spans_in_small:
        raise AssertionError("the proto file does not hold the JSON file's spans")
    formats = interleaved(
        {
            "json": _timed(lambda: _drain(small)),
            "proto": _timed(lambda: _drain(proto)),
            "proto+zstd": _timed(lambda: _drain(proto_zstd)),
            "json+zstd": _timed(lambda: _drain(json_zstd)),
            "load json": _timed(lambda: spanreplay.load(small, run_id)),
            "load proto": _timed(lambda: spanreplay.load(proto, run_id)),
        },
        repeats=repeats,
    )
    spans_per_s = {k: [spans_in_small / (ns / 1e9) for ns in v] for k, v in formats.items()}
    proto_ratio = median([p / j for p, j in zip(spans_per_s["proto"], spans_per_s["json"], strict=True)])

    note = f"{big_size / MB:,.0f} MB, {export.runs:,} runs; generated in {export.generated_s:.0f} s"
    chunk_mbps = median([big_size / MB / (ns / 1e9) for ns in filtering["chunks"]])
    load_mbps = median([big_size / MB / (ns / 1e9) for ns in filtering["load"]])
    return [
        Figure(NAME, "export: raw read, 1 MiB chunks", chunk_mbps, "MB/s", note=note),
        Figure(NAME, "export: load(file, run_id)", load_mbps, "MB/s", note=f"{boundaries} events of one run"),
        Figure(
            NAME,
            "export: ratio load / raw read",
            filter_ratio,
            "x",
            goal=f">= {FILTER_GOAL}x",
            met=filter_ratio >= FILTER_GOAL,
        ),
        Figure(
            NAME,
            "export: load peak RSS (process)",
            memory["rss_peak_mb"],
            "MB",
            goal=f"< {RSS_GOAL_MB} MB",
            met=memory["rss_peak_mb"] < RSS_GOAL_MB,
            note=f"growth over imports {memory['rss_growth_mb']:.0f} MB",
        ),
        Figure(
            NAME,
            "parse: iter_spans, every span",
            median([small_size / MB / (ns / 1e9) for ns in parsing["parse"]]),
            "MB/s",
            note=f"{small_size / MB:.0f} MB, {spans_in_small:,} spans",
        ),
        Figure(
            NAME,
            "parse: orjson.loads per line",
            median([small_size / MB / (ns / 1e9) for ns in parsing["orjson"]]),
            "MB/s",
        ),
        Figure(
            NAME,
            "parse: ratio iter_spans / orjson.loads",
            parse_ratio,
            "x",
            goal=f">= {PARSE_GOAL}x",
            met=parse_ratio >= PARSE_GOAL,
            note="the plain loop opens the file with Python's default buffer",
        ),
        Figure(
            NAME,
            "parse: orjson.loads per line, 1 MiB buffer",
            median([small_size / MB / (ns / 1e9) for ns in parsing["orjson_1m"]]),
            "MB/s",
        ),
        Figure(
            NAME,
            "parse: ratio iter_spans / orjson.loads, both with a 1 MiB buffer",
            parse_ratio_1m,
            "x",
            note="the parse alone: the readers' buffer given to the plain loop too",
        ),
        *(
            Figure(NAME, f"spans/s, {name}", median(values), "spans/s")
            for name, values in spans_per_s.items()
            if not name.startswith("load")
        ),
        Figure(NAME, "ratio proto / JSON reader (spans/s)", proto_ratio, "x", note="same spans, full parse"),
        Figure(
            NAME,
            "load one run: proto / JSON",
            median([j / p for j, p in zip(formats["load json"], formats["load proto"], strict=True)]),
            "x",
            note="speed ratio, filtering by the run id",
        ),
        Figure(NAME, "size: proto / JSON lines", proto.stat().st_size / small_size, "x"),
        Figure(NAME, "size: proto+zstd / JSON lines", proto_zstd.stat().st_size / small_size, "x"),
        Figure(NAME, "size: json+zstd records / JSON lines", json_zstd.stat().st_size / small_size, "x"),
    ]


def _converse(turns: int) -> None:
    """An agent loop: each model call sends the whole conversation, as the Messages API wants it."""
    messages: list[dict[str, str]] = [{"role": "user", "content": "Plan a trip to Oslo, step by step."}]
    for turn in range(turns):
        request = {"model": "claude-x", "max_tokens": 1024, "messages": list(messages)}
        answer = spanreplay.boundary("model", "claude-x", request, lambda turn=turn: f"Step {turn}: " + "detail " * 60)
        messages.append({"role": "assistant", "content": answer})
        messages.append({"role": "user", "content": f"Thanks. What comes after step {turn}? " + "context " * 20})


def measure_conversation(turns: int, workdir: Path) -> list[Figure]:
    from opentelemetry.sdk.trace import TracerProvider

    provider = TracerProvider()
    spanreplay.configure(trace_dir=workdir / "conversation", tracer_provider=provider)
    sizes: dict[str, tuple[int, int, float]] = {}
    previous = os.environ.get("SPANREPLAY_INPUT_REFS")
    try:
        for mode, switch in (("references", "1"), ("whole inputs", "0")):
            os.environ["SPANREPLAY_INPUT_REFS"] = switch
            run_id = f"run_conv_{switch}"
            with spanreplay.record(agent="planner", run_id=run_id):
                _converse(turns)
            path = workdir / "conversation" / f"{run_id}.jsonl"
            stored = sum(
                int(s.attributes["spanreplay.input.size"])
                for s in iter_spans(path)
                if s.attributes.get("spanreplay.kind") == "model" and s.ended
            )
            started = time.perf_counter()
            spanreplay.load(path, run_id)
            sizes[mode] = (path.stat().st_size, stored, time.perf_counter() - started)
    finally:
        if previous is None:
            os.environ.pop("SPANREPLAY_INPUT_REFS", None)
        else:
            os.environ["SPANREPLAY_INPUT_REFS"] = previous
        provider.shutdown()
    (file_refs, input_refs, load_refs), (file_whole, input_whole, load_whole) = (
        sizes["references"],
        sizes["whole inputs"],
    )
    return [
        Figure(NAME, f"{turns}-turn run: input bytes, references", input_refs, "bytes"),
        Figure(NAME, f"{turns}-turn run: input bytes, whole inputs", input_whole, "bytes"),
        Figure(NAME, f"{turns}-turn run: file, references", file_refs, "bytes", note=f"load {load_refs * 1000:.0f} ms"),
        Figure(
            NAME, f"{turns}-turn run: file, whole inputs", file_whole, "bytes", note=f"load {load_whole * 1000:.0f} ms"
        ),
        Figure(
            NAME,
            f"{turns}-turn run: file ratio whole / references",
            file_whole / file_refs,
            "x",
            note=f"inputs alone {input_whole / input_refs:.1f}x",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (for run_all.py)")
    parser.add_argument("--quick", action="store_true", help="small files and one repeat: a smoke run")
    parser.add_argument("--size-mb", type=int, default=1000)
    parser.add_argument("--small-mb", type=int, default=150)
    args = parser.parse_args(argv)
    size_mb, small_mb, repeats = (30, 15, 1) if args.quick else (args.size_mb, args.small_mb, 3)
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-formats-"))
    try:
        figures = measure_conversation(50, workdir)
        figures += measure_export(size_mb=size_mb, small_mb=small_mb, repeats=repeats, workdir=workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())

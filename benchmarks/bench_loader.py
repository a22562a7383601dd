"""Loader throughput and peak memory on a large OTLP/JSON-lines file with many runs.

A few real runs are recorded with spanreplay, then their spans are replicated with
fresh run ids, trace ids and span ids, interleaved across many runs in flight and
packed several spans per line (one TracesData per line, some spans written twice),
the way the Collector's file exporter writes them, until the file reaches the
target size. Measured, in the same process:

- ``spanreplay.load(file, run_id)`` filtering one run, against reading the file's
  bytes (1 MiB ``read`` chunks, and line iteration), as MB/s and a ratio;
- peak memory of that load on a 50 MB and on the full file, each in its own
  subprocess (peak RSS growth over the imports, and tracemalloc's peak);
- a full parse of every span against ``orjson.loads`` of every line.

The files go to a temporary directory that is deleted afterwards.

    python benchmarks/bench_loader.py [--quick] [--json] [--size-mb 200] [--small-mb 50]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import orjson
from _common import Case, Figure, emit, interleaved, median, text_of_size
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.readers import iter_spans

NAME = "loader"
GOAL_RATIO = 0.5
MB = 1_000_000
IN_FLIGHT = 16  # runs recording at the same time, interleaved in the file
DUPLICATE_RATE = 0.01  # spans written twice, as after an exporter retry


# --- the runs that get replicated -----------------------------------------------------------


@spanreplay.tool
def search(query: str, limit: int = 5) -> list[dict[str, str]]:
    return [{"title": f"{query} #{i}", "snippet": text_of_size(300, seed=i)} for i in range(limit)]


@spanreplay.tool
def fetch(url: str) -> str:
    # Above the 2,000-byte inline limit: stored as an array of chunks.
    return text_of_size(6000, seed=len(url))


@spanreplay.tool
def flaky(attempt: int) -> str:
    if attempt % 3 == 2:
        raise TimeoutError(f"upstream timed out on attempt {attempt}")
    return "ok"


def agent(steps: int, fail: bool) -> None:
    for step in range(steps):
        spanreplay.now()
        hits = search(f"question {step}")
        fetch(f"https://example.test/doc/{step}/{len(hits)}")
        try:
            flaky(step)
        except TimeoutError:
            spanreplay.random()
    if fail:
        raise RuntimeError("the agent gave up after too many timeouts")


def record_templates(trace_dir: Path) -> None:
    provider = TracerProvider()
    spanreplay.configure(service_name="bench-agent", trace_dir=trace_dir, tracer_provider=provider)
    for steps, fail in ((6, False), (10, True), (8, False)):
        try:
            with spanreplay.record(agent="research"):
                agent(steps, fail)
        except RuntimeError:
            pass
    provider.shutdown()


# --- replication ------------------------------------------------------------------------------


@dataclass
class Template:
    run_id: bytes
    trace_id: bytes
    spans: list[bytes]  # each span's JSON, in the order the durable file wrote them
    span_ids: list[tuple[bytes, bytes | None]]  # (span id, parent span id) per span
    boundaries: int


@dataclass
class InFlight:
    template: Template
    run_id: bytes
    trace_id: bytes
    ids: dict[bytes, bytes] = field(default_factory=dict)
    next: int = 0


def read_templates(trace_dir: Path) -> tuple[bytes, list[Template]]:
    """The resource/scope envelope and the spans of each recorded run."""
    head = b""
    templates = []
    for path in sorted(trace_dir.glob("*.jsonl")):
        spans, ids, boundaries = [], [], 0
        run_id = trace_id = b""
        for line in path.read_bytes().splitlines():
            doc = orjson.loads(line)
            rs = doc["resourceSpans"][0]
            ss = rs["scopeSpans"][0]
            head = b'{"resourceSpans":[{"resource":' + orjson.dumps(rs["resource"])
            head += b',"scopeSpans":[{"scope":' + orjson.dumps(ss["scope"]) + b',"spans":['
            for span in ss["spans"]:
                attributes = {a["key"]: a["value"] for a in span["attributes"]}
                run_id = attributes["spanreplay.run.id"]["stringValue"].encode()
                trace_id = span["traceId"].encode()
                boundaries += "spanreplay.call_id" in attributes
                spans.append(orjson.dumps(span))
                parent = span.get("parentSpanId")
                ids.append((span["spanId"].encode(), parent.encode() if parent else None))
        templates.append(Template(run_id, trace_id, spans, ids, boundaries))
    return head, templates


TAIL = b"]}]}]}\n"


def generate(
    templates: list[Template], head: bytes, big: Path, small: Path, size: int, small_size: int, seed: int = 7
) -> tuple[str, int, int]:
    """Write ``big`` (``size`` bytes or a little more) and its first ``small_size`` bytes as ``small``.

    Returns the run id to filter (a run that started about a tenth into the file, so
    both files hold all of it), its number of boundaries, and how many runs were written.
    """
    rng = random.Random(seed)
    used: set[bytes] = set()

    def fresh_hex(bits: int) -> bytes:
        while True:
            value = f"{rng.getrandbits(bits):0{bits // 4}x}".encode()
            if value not in used:
                used.add(value)
                return value

    def start(n: int) -> InFlight:
        template = templates[n % len(templates)]
        prefix = template.run_id[: -len(b"a1b2c3d4")]
        return InFlight(template, prefix + fresh_hex(32), fresh_hex(128))

    def emit_span(run: InFlight) -> bytes:
        template = run.template
        span = template.spans[run.next]
        span_id, parent = template.span_ids[run.next]
        run.next += 1
        for old in (span_id, parent):
            if old is not None:
                if old not in run.ids:
                    run.ids[old] = fresh_hex(64)
                span = span.replace(old, run.ids[old])
        return span.replace(template.trace_id, run.trace_id).replace(template.run_id, run.run_id)

    started = 0
    in_flight = [start(started + i) for i in range(IN_FLIGHT)]
    started += IN_FLIGHT
    target: InFlight | None = None
    target_done_at = 0
    retries: list[bytes] = []
    written = 0
    with open(big, "wb") as out_big, open(small, "wb") as out_small:
        small_out: BinaryIO | None = out_small
        while written < size:
            batch = retries[:1]
            del retries[:1]
            for _ in range(rng.randint(1, 8)):
                slot = rng.randrange(IN_FLIGHT)
                run = in_flight[slot]
                span = emit_span(run)
                batch.append(span)
                if rng.random() < DUPLICATE_RATE:
                    retries.append(span)
                if run.next == len(run.template.spans):
                    if run is target:
                        target_done_at = written
                    in_flight[slot] = start(started)
                    started += 1
                    if target is None and written >= size // 10:
                        target = in_flight[slot]
            line = head + b",".join(batch) + TAIL
            out_big.write(line)
            written += len(line)
            if small_out is not None:
                small_out.write(line)
                if written >= small_size:
                    small_out = None
    if target is None or not 0 < target_done_at < small_size:
        raise AssertionError("the run to filter must lie wholly in both files; make the small file larger")
    return target.run_id.decode(), target.template.boundaries, started


# --- measurements -----------------------------------------------------------------------------


def read_chunks(path: Path) -> int:
    start = time.perf_counter_ns()
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass
    return time.perf_counter_ns() - start


def read_lines(path: Path) -> int:
    start = time.perf_counter_ns()
    with open(path, "rb") as f:
        for _line in f:
            pass
    return time.perf_counter_ns() - start


def orjson_lines(path: Path, buffering: int = -1) -> int:
    """The plain parse: ``orjson.loads`` of every line, the file opened as plain code opens it
    (``buffering=-1``, Python's default) or with the buffer given."""
    start = time.perf_counter_ns()
    with open(path, "rb", buffering=buffering) as f:
        for line in f:
            orjson.loads(line)
    return time.perf_counter_ns() - start


@dataclass(frozen=True)
class Export:
    """A generated Collector export (``big``), its slice (``small``) and the run measured in it."""

    big: Path
    small: Path
    run_id: str
    boundaries: int
    runs: int
    generated_s: float

    @property
    def big_size(self) -> int:
        return self.big.stat().st_size

    @property
    def small_size(self) -> int:
        return self.small.stat().st_size


def build_export(workdir: Path, size_mb: int, small_mb: int) -> Export:
    """Record the template runs into ``workdir`` and replicate them into a big file and a slice."""
    record_templates(workdir / "templates")
    head, templates = read_templates(workdir / "templates")
    big, small = workdir / "big.jsonl", workdir / "small.jsonl"
    started = time.perf_counter()
    run_id, boundaries, runs = generate(templates, head, big, small, size_mb * MB, small_mb * MB)
    return Export(big, small, run_id, boundaries, runs, time.perf_counter() - started)


def scan_lines(path: Path, needle: bytes) -> int:
    """The loader's floor by design: iterate lines, test each for the run id."""
    start = time.perf_counter_ns()
    hits = 0
    with open(path, "rb") as f:
        for line in f:
            if needle in line:
                hits += 1
    return time.perf_counter_ns() - start


def measure_memory(path: Path, run_id: str) -> dict[str, float]:
    """Peak memory of ``load(path, run_id)``, measured in fresh interpreters."""
    result: dict[str, float] = {}
    for mode in ("rss", "tracemalloc"):
        out = subprocess.run(
            [sys.executable, __file__, "--child", mode, str(path), run_id],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result.update(json.loads(out))
    return result


def child(mode: str, path: str, run_id: str) -> None:
    # The modules are imported before the first reading, so the growth is the load's own.
    if mode == "tracemalloc":
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        log = spanreplay.load(path, run_id)
        peak = tracemalloc.get_traced_memory()[1] - before
        print(json.dumps({"tracemalloc_peak_mb": peak / MB, "tracemalloc_events": len(log)}))
    else:
        reset_peak_rss()
        before = rss_kib("VmRSS")
        log = spanreplay.load(path, run_id)
        peak = rss_kib("VmHWM")
        print(
            json.dumps(
                {"rss_growth_mb": (peak - before) * 1024 / MB, "rss_peak_mb": peak * 1024 / MB, "events": len(log)}
            )
        )


def reset_peak_rss() -> None:
    """Reset the process's peak RSS (Linux 4.0+), so imports do not set the mark."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # the peak then includes start-up; still comparable between the two files


def rss_kib(field: str) -> int:
    """VmRSS (now) or VmHWM (peak) in KiB, from /proc; ru_maxrss where /proc is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def measure(*, size_mb: int, small_mb: int, repeats: int) -> list[Figure]:
    workdir = Path(tempfile.mkdtemp(prefix="spanreplay-bench-loader-"))
    try:
        export = build_export(workdir, size_mb, small_mb)
        big, small, run_id, boundaries = export.big, export.small, export.run_id, export.boundaries
        big_size, small_size = export.big_size, export.small_size

        log = spanreplay.load(big, run_id)
        if len(log) != boundaries:
            raise AssertionError(f"load({run_id}) found {len(log)} events, the run has {boundaries}")

        needle = run_id.encode()
        cases: dict[str, Case] = {
            "chunks": lambda: read_chunks(big),
            "lines": lambda: read_lines(big),
            "scan": lambda: scan_lines(big, needle),
        }

        def load() -> int:
            start = time.perf_counter_ns()
            spanreplay.load(big, run_id)
            return time.perf_counter_ns() - start

        cases["load"] = load
        samples = interleaved(cases, repeats=repeats)
        mbps = {case: [big_size / MB / (ns / 1e9) for ns in values] for case, values in samples.items()}

        def parse_all() -> int:
            start = time.perf_counter_ns()
            for _span in iter_spans(small):
                pass
            return time.perf_counter_ns() - start

        # The plain loop as plain code opens the file, and with the readers' 1 MiB buffer.
        parse = interleaved(
            {
                "parse": parse_all,
                "orjson": lambda: orjson_lines(small),
                "orjson_1m": lambda: orjson_lines(small, 1 << 20),
            },
            repeats=repeats,
        )
        parse_mbps = {case: [small_size / MB / (ns / 1e9) for ns in values] for case, values in parse.items()}

        memory_small = measure_memory(small, run_id)
        memory_big = measure_memory(big, run_id)
        for memory in (memory_small, memory_big):
            if memory["events"] != boundaries or memory["tracemalloc_events"] != boundaries:
                raise AssertionError(f"a memory probe loaded {memory} events of {run_id}, not {boundaries}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    load_mbps, chunk_mbps = median(mbps["load"]), median(mbps["chunks"])
    ratio_chunks = median([a / b for a, b in zip(mbps["load"], mbps["chunks"], strict=True)])
    ratio_lines = median([a / b for a, b in zip(mbps["load"], mbps["lines"], strict=True)])
    mem_ratio = memory_big["tracemalloc_peak_mb"] / memory_small["tracemalloc_peak_mb"]
    parse_ratio = median([a / b for a, b in zip(parse_mbps["parse"], parse_mbps["orjson"], strict=True)])
    parse_ratio_1m = median([a / b for a, b in zip(parse_mbps["parse"], parse_mbps["orjson_1m"], strict=True)])
    file_note = (
        f"{big_size / MB:.0f} MB, {export.runs} runs, {IN_FLIGHT} in flight; generated in {export.generated_s:.1f} s"
    )
    return [
        Figure(NAME, "raw read, 1 MiB chunks", chunk_mbps, "MB/s", note=file_note),
        Figure(NAME, "raw read, line iteration", median(mbps["lines"]), "MB/s"),
        Figure(
            NAME, "line iteration + run-id substring test", median(mbps["scan"]), "MB/s", note="a line-by-line filter"
        ),
        Figure(NAME, "spanreplay.load(file, run_id)", load_mbps, "MB/s", note=f"{boundaries} events of one run"),
        Figure(
            NAME,
            "ratio load / raw chunk read",
            ratio_chunks,
            "x",
            goal=f">= {GOAL_RATIO:g}x",
            met=ratio_chunks >= GOAL_RATIO,
            note=f"best/best {max(mbps['load']) / max(mbps['chunks']):.2f}x",
        ),
        Figure(NAME, "ratio load / raw line iteration", ratio_lines, "x", note="the lenient baseline"),
        Figure(
            NAME, f"load peak tracemalloc, {small_size / MB:.0f} MB file", memory_small["tracemalloc_peak_mb"], "MB"
        ),
        Figure(NAME, f"load peak tracemalloc, {big_size / MB:.0f} MB file", memory_big["tracemalloc_peak_mb"], "MB"),
        Figure(
            NAME,
            f"load peak RSS growth, {small_size / MB:.0f} MB file",
            memory_small["rss_growth_mb"],
            "MB",
            note=f"process peak {memory_small['rss_peak_mb']:.0f} MB",
        ),
        Figure(
            NAME,
            f"load peak RSS growth, {big_size / MB:.0f} MB file",
            memory_big["rss_growth_mb"],
            "MB",
            note=f"process peak {memory_big['rss_peak_mb']:.0f} MB",
        ),
        Figure(
            NAME,
            "peak memory ratio big / small file",
            mem_ratio,
            "x",
            goal="~1x (size-independent)",
            met=mem_ratio < 1.5,
            note="tracemalloc peaks",
        ),
        Figure(
            NAME,
            "full parse, every span (iter_spans)",
            median(parse_mbps["parse"]),
            "MB/s",
            note=f"{small_size / MB:.0f} MB file",
        ),
        Figure(NAME, "orjson.loads per line", median(parse_mbps["orjson"]), "MB/s"),
        Figure(
            NAME,
            "ratio full parse / orjson.loads",
            parse_ratio,
            "x",
            note="the plain loop opens the file with Python's default buffer",
        ),
        Figure(NAME, "orjson.loads per line, 1 MiB buffer", median(parse_mbps["orjson_1m"]), "MB/s"),
        Figure(
            NAME,
            "ratio full parse / orjson.loads, both with a 1 MiB buffer",
            parse_ratio_1m,
            "x",
            note="the parse alone",
        ),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--child"]:
        child(*argv[1:4])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON (for run_all.py)")
    parser.add_argument("--quick", action="store_true", help="small files and one repeat: a smoke run")
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--small-mb", type=int, default=50)
    args = parser.parse_args(argv)
    size_mb, small_mb, repeats = (20, 5, 1) if args.quick else (args.size_mb, args.small_mb, 3)
    emit(measure(size_mb=size_mb, small_mb=small_mb, repeats=repeats), as_json=args.json)


if __name__ == "__main__":
    main()

"""Large files of tiny spans: what `runs` keeps does not grow with the spans, `show` reads one run.

Memory is compared between two files (tracemalloc's peak) and work is counted in
Python function calls, never timed: each test compares a file with another ten
times its size, so the bounds hold on any machine.
"""

from __future__ import annotations

import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

import spanreplay
from helpers.tiny_spans import Templates, record_templates, write_runs
from spanreplay.cli import cli


@pytest.fixture
def templates(trace_dir: Path) -> Templates:
    return record_templates(trace_dir, configure=False)


def peak_bytes(work: Callable[[], object]) -> int:
    """tracemalloc's peak above what was allocated before ``work`` ran."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        work()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def python_calls(work: Callable[[], object]) -> int:
    """How many Python functions ``work`` called."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def show(path: Path, run_id: str) -> str:
    result = CliRunner().invoke(cli, ["show", str(path), run_id], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    return result.stdout


def test_runs_keeps_per_run_counts_not_per_span_state(templates: Templates, tmp_path: Path) -> None:
    small, large = tmp_path / "small.jsonl", tmp_path / "large.jsonl"
    write_runs(templates, small, [("run_one", 2_000)])
    write_runs(templates, large, [("run_one", 20_000)])
    assert [r.steps for r in spanreplay.runs(large)] == [20_000]
    small_peak = peak_bytes(lambda: spanreplay.runs(small))
    large_peak = peak_bytes(lambda: spanreplay.runs(large))
    # A set of span keys (or a parent map for cost) grows about tenfold with the steps.
    assert large_peak < 2 * small_peak, (small_peak, large_peak)


def test_runs_counts_each_step_once_when_spans_repeat(templates: Templates, tmp_path: Path) -> None:
    once, twice = tmp_path / "once.jsonl", tmp_path / "twice.jsonl"
    write_runs(templates, once, [("run_a", 300), ("run_b", 7)])
    # The whole file again: every span twice, as after exporter retries.
    twice.write_bytes(once.read_bytes() * 2)
    assert [(r.run_id, r.steps) for r in spanreplay.runs(twice)] == [("run_a", 300), ("run_b", 7)]


def test_show_reads_only_its_run_whatever_the_other_runs_hold(templates: Templates, tmp_path: Path) -> None:
    few, many = tmp_path / "few.jsonl", tmp_path / "many.jsonl"
    write_runs(templates, few, [("run_other_0", 2_000), ("run_wanted", 300)])
    write_runs(templates, many, [*((f"run_other_{i}", 2_000) for i in range(10)), ("run_wanted", 300)])
    assert show(few, "run_wanted") == show(many, "run_wanted")
    few_peak = peak_bytes(lambda: show(few, "run_wanted"))
    many_peak = peak_bytes(lambda: show(many, "run_wanted"))
    assert many_peak < 2 * few_peak, (few_peak, many_peak)


def test_show_prints_every_step_and_its_work_grows_linearly(templates: Templates, tmp_path: Path) -> None:
    sizes = (150, 1_500, 3_000)
    for steps in sizes:
        write_runs(templates, tmp_path / f"{steps}.jsonl", [("run_long", steps)])
    out = show(tmp_path / "3000.jsonl", "run_long")
    rows = [line for line in out.splitlines() if "tool:echo#" in line]
    assert [row.split()[0] for row in rows] == [str(seq) for seq in range(1, 3_001)]
    assert "3000 step(s)." in out
    calls = {steps: python_calls(lambda steps=steps: show(tmp_path / f"{steps}.jsonl", "run_long")) for steps in sizes}
    per_step_low = (calls[1_500] - calls[150]) / (1_500 - 150)
    per_step_high = (calls[3_000] - calls[1_500]) / (3_000 - 1_500)
    # Linear: the thousandth step costs what the hundredth did (a quadratic show would double it).
    assert per_step_high < 1.3 * per_step_low, (per_step_low, per_step_high)
    # Each row is padded and joined, not laid out by rich's table engine (thousands of calls a row).
    assert per_step_high < 400, per_step_high


def test_show_holds_a_few_words_per_step_not_the_run(templates: Templates, tmp_path: Path) -> None:
    short, long = tmp_path / "short.jsonl", tmp_path / "long.jsonl"
    write_runs(templates, short, [("run_long", 1_000)])
    write_runs(templates, long, [("run_long", 10_000)])
    loaded = peak_bytes(lambda: spanreplay.load(long, "run_long"))
    short_peak = peak_bytes(lambda: show(short, "run_long"))
    long_peak = peak_bytes(lambda: show(long, "run_long"))
    # load() holds every event; show keeps three machine words a step and the rows of one block
    # (and the runner here keeps what it printed).
    assert long_peak < loaded / 2, (long_peak, loaded)
    assert long_peak < 3 * short_peak, (short_peak, long_peak)


def test_show_puts_spans_written_out_of_order_back_in_seq_order(templates: Templates, tmp_path: Path) -> None:
    ordered, shuffled = tmp_path / "ordered.jsonl", tmp_path / "shuffled.jsonl"
    write_runs(templates, ordered, [("run_mixed", 400)])
    head, *steps, tail = ordered.read_bytes().splitlines(keepends=True)
    # Neighbours swapped, and one step written last, as nested and slow calls end out of order.
    swapped = [line for pair in zip(steps[1::2], steps[0::2], strict=True) for line in pair]
    shuffled.write_bytes(b"".join([head, *swapped[1:], tail, swapped[0]]))
    assert show(shuffled, "run_mixed") == show(ordered, "run_mixed")
    json_out = CliRunner().invoke(cli, ["show", str(shuffled), "run_mixed", "--json"])
    assert json_out.exit_code == 0, json_out.output
    document = orjson.loads(json_out.stdout)
    assert [step["seq"] for step in document["steps"]] == list(range(1, 401))
    assert document["run"]["steps"] == 400


def test_show_json_is_what_load_gives(templates: Templates, tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    write_runs(templates, path, [("run_json", 30)])
    result = CliRunner().invoke(cli, ["show", str(path), "run_json", "--json"])
    assert result.exit_code == 0, result.output
    document = orjson.loads(result.stdout)
    log = spanreplay.load(path, "run_json")
    assert [(s["seq"], s["call_id"], s["input"], s["output"]) for s in document["steps"]] == [
        (e.seq, e.call_id, e.input, e.output) for e in log
    ]
    empty = tmp_path / "empty.jsonl"
    write_runs(templates, empty, [("run_empty", 0)])
    result = CliRunner().invoke(cli, ["show", str(empty), "run_empty", "--json"])
    assert result.exit_code == 0, result.output
    assert orjson.loads(result.stdout)["steps"] == []

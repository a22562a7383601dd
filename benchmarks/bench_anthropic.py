"""Anthropic SDK: replay cost against a vcrpy cassette, and record overhead.

1. Replay: one non-stream ``messages.create`` whose conversation is 40 KB of JSON,
   replayed by spanreplay (network gone) versus the same HTTP exchange played
   back from a vcrpy cassette, interleaved in one process. Loaded: the cassette
   is opened once and played back for every call; spanreplay likewise replays a
   recorded run of that many calls in one replay run (the goal's figure), and
   also opens a replay run for every call of a one-call recording. Opened per
   call: each call loads the trace file, or the cassette file, again. Goal:
   spanreplay at least 20x faster.
2. Record overhead: the same call against the local Messages API server on
   127.0.0.1, recorded (durable file on) versus uninstrumented: the calls of one
   run (the figure), and a run opened and closed around each call (its trace
   file created, its run span written).

With ``--accelerate both`` the loaded replay and the record of the calls of one
run are measured again in the same rounds with the accelerators
(``configure(accelerate=)``) off.

    python benchmarks/bench_anthropic.py [--quick] [--json] [--accelerate on|off|both]
"""

from __future__ import annotations

import json
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import vcr
from _common import Case, Figure, conversation, emit, interleaved, median, parse_args, timed

import spanreplay
from spanreplay.instrumentation.anthropic import AnthropicInstrumentor
from spanreplay.testing.messages_api import MODEL, MessagesAPIServer

GOAL = 20.0
NAME = "anthropic"


def batch(calls: int, one: Callable[[], Any], around: Callable[[], Any] | None = None) -> Case:
    """A case that times ``calls`` calls of ``one`` (inside ``around()`` when given)."""

    def case() -> int:
        with around() if around is not None else _nothing():
            start = time.perf_counter_ns()
            for _ in range(calls):
                one()
            return time.perf_counter_ns() - start

    return case


@contextmanager
def _nothing() -> Iterator[None]:
    yield


def measure(*, calls: int, repeats: int, network_calls: int, accelerate: str = "on") -> list[Figure]:
    messages = conversation()
    request = {"model": MODEL, "max_tokens": 512, "messages": messages}
    size_kb = len(json.dumps(messages)) / 1000

    work = Path(tempfile.mkdtemp(prefix="bench_anthropic_"))
    traces = work / "traces"
    cassette = str(work / "cassette.yaml")
    spanreplay.configure(service_name="bench", trace_dir=traces)
    instrumentor = AnthropicInstrumentor()
    recorder = vcr.VCR(record_mode="once", decode_compressed_response=True)
    player = vcr.VCR(record_mode="none", decode_compressed_response=True)
    warnings.simplefilter("ignore")  # vcrpy's deprecation warnings, not ours

    @contextmanager
    def instrumented() -> Iterator[None]:
        instrumentor.instrument(zero_code=False)
        try:
            yield
        finally:
            instrumentor.uninstrument()

    with MessagesAPIServer() as server:
        # A client made while instrumented: its resources hold the wrapped client methods.
        with instrumented():
            client = anthropic.Anthropic(base_url=server.url, api_key="bench-key")
            with spanreplay.record(agent="bench") as run:
                original = client.messages.create(**request)
            # The counterpart of a cassette played back ``calls`` times: a run that made the
            # call ``calls`` times, in a directory of its own (the cold case opens ``traces``).
            spanreplay.configure(service_name="bench", trace_dir=work / "many")
            with spanreplay.record(agent="bench-many") as many_run:
                for _ in range(calls):
                    client.messages.create(**request)
        plain_client = anthropic.Anthropic(base_url=server.url, api_key="bench-key")
        with recorder.use_cassette(cassette):
            plain_client.messages.create(**request)

        # The record-overhead runs go to a directory of their own, so the cold replay
        # below opens a directory that holds the one run it replays.
        main_on = accelerate != "off"

        def configured(accelerated: bool = main_on) -> None:
            spanreplay.configure(service_name="bench", trace_dir=work / "overhead", accelerate=accelerated)

        configured()

        def record_call() -> Any:
            with spanreplay.record(agent="bench-record"):
                return client.messages.create(**request)

        @contextmanager
        def recording(accelerated: bool = main_on) -> Iterator[None]:
            configured(accelerated)
            with instrumented(), spanreplay.record(agent="bench-record-many"):
                yield

        @contextmanager
        def instrumented_configured() -> Iterator[None]:
            configured()
            with instrumented():
                yield

        network_cases = {
            "plain": batch(network_calls, lambda: plain_client.messages.create(**request)),
            "recorded": batch(network_calls, lambda: client.messages.create(**request), recording),
            "recorded_run_each": batch(network_calls, record_call, instrumented_configured),
        }
        if accelerate == "both":
            network_cases["recorded_off"] = batch(
                network_calls, lambda: client.messages.create(**request), lambda: recording(False)
            )
        network = interleaved(network_cases, repeats=max(3, repeats // 3))

    # -- replay, the server gone --------------------------------------------------------------
    log = spanreplay.load(traces, run.run_id)
    many = spanreplay.load(work / "many", many_run.run_id)

    @contextmanager
    def replaying_many(accelerated: bool = main_on) -> Iterator[None]:
        configured(accelerated)
        with instrumented(), spanreplay.replay(many):
            yield

    def replay_hot() -> Any:
        with spanreplay.replay(log):
            return client.messages.create(**request)

    def replay_cold() -> Any:
        with spanreplay.replay(traces, run.run_id):
            return client.messages.create(**request)

    def vcr_cold() -> Any:
        with player.use_cassette(cassette, allow_playback_repeats=True):
            return plain_client.messages.create(**request)

    with instrumented():
        assert replay_hot() == original
    with replaying_many():
        # The same reply as the one-call run's, under the message id of its own exchange.
        assert all(client.messages.create(**request).content == original.content for _ in range(calls))
    with player.use_cassette(cassette, allow_playback_repeats=True):
        # Another exchange with the server than the recorded run's: the same reply, another message id.
        assert plain_client.messages.create(**request).content == original.content

    replay_cases = {
        "spanreplay_hot": batch(calls, lambda: client.messages.create(**request), replaying_many),
        "spanreplay_run_each": batch(calls, replay_hot, instrumented_configured),
        "vcrpy_hot": batch(
            calls,
            lambda: plain_client.messages.create(**request),
            lambda: player.use_cassette(cassette, allow_playback_repeats=True),
        ),
        "spanreplay_cold": batch(max(1, calls // 5), replay_cold, instrumented_configured),
        "vcrpy_cold": batch(max(1, calls // 5), vcr_cold),
    }
    if accelerate == "both":
        replay_cases["spanreplay_hot_off"] = batch(
            calls, lambda: client.messages.create(**request), lambda: replaying_many(False)
        )
    samples = interleaved(replay_cases, repeats=repeats)
    per_call = {
        name: [ns / (max(1, calls // 5) if name.endswith("cold") else calls) / 1000 for ns in values]
        for name, values in samples.items()
    }
    per_call.update({name: [ns / network_calls / 1000 for ns in values] for name, values in network.items()})

    def ratio(theirs: str, ours: str) -> tuple[float, str]:
        ratios = [t / o for t, o in zip(per_call[theirs], per_call[ours], strict=True)]
        best = min(per_call[theirs]) / min(per_call[ours])
        return median(ratios), f"median of per-repeat ratios; best/best {best:.1f}x"

    hot, hot_note = ratio("vcrpy_hot", "spanreplay_hot")
    each, each_note = ratio("vcrpy_hot", "spanreplay_run_each")
    cold, cold_note = ratio("vcrpy_cold", "spanreplay_cold")
    overhead = [r / p for r, p in zip(per_call["recorded"], per_call["plain"], strict=True)]
    overhead_each = [r / p for r, p in zip(per_call["recorded_run_each"], per_call["plain"], strict=True)]
    figures = [
        timed(
            NAME,
            f"spanreplay replay, {size_kb:.0f} KB conversation, log loaded, one run of {calls} calls",
            per_call["spanreplay_hot"],
        ),
        timed(NAME, f"vcrpy playback, cassette loaded, played {calls} times", per_call["vcrpy_hot"]),
        Figure(NAME, "speed-up over vcrpy, loaded", hot, "x", goal=f">= {GOAL:g}x", met=hot >= GOAL, note=hot_note),
        timed(NAME, "spanreplay replay, log loaded, a replay run opened per call", per_call["spanreplay_run_each"]),
        Figure(NAME, "speed-up over vcrpy loaded, a replay run per call", each, "x", note=each_note),
        timed(NAME, "spanreplay replay, trace file opened per call", per_call["spanreplay_cold"]),
        timed(NAME, "vcrpy playback, cassette opened per call", per_call["vcrpy_cold"]),
        Figure(NAME, "speed-up over vcrpy, opened per call", cold, "x", note=cold_note),
        timed(NAME, "call to the local server, uninstrumented", per_call["plain"]),
        timed(NAME, "call to the local server, recorded, the calls of one run", per_call["recorded"]),
        Figure(NAME, "record overhead ratio", median(overhead), "x", note="median of per-repeat ratios"),
        timed(NAME, "call to the local server, recorded, a run opened per call", per_call["recorded_run_each"]),
        Figure(
            NAME,
            "record overhead ratio, a run per call",
            median(overhead_each),
            "x",
            note="median of per-repeat ratios",
        ),
        Figure(NAME, "replayed calls per repeat x repeats", calls * repeats, "calls", note=f"{calls} x {repeats}"),
    ]
    if accelerate == "both":
        hot_off, hot_off_note = ratio("vcrpy_hot", "spanreplay_hot_off")
        replay_cost = [o / a for o, a in zip(per_call["spanreplay_hot_off"], per_call["spanreplay_hot"], strict=True)]
        overhead_off = [r / p for r, p in zip(per_call["recorded_off"], per_call["plain"], strict=True)]
        record_cost = [o / a for o, a in zip(per_call["recorded_off"], per_call["recorded"], strict=True)]
        figures += [
            timed(NAME, "spanreplay replay, log loaded, one run, accelerators off", per_call["spanreplay_hot_off"]),
            Figure(NAME, "speed-up over vcrpy, loaded, accelerators off", hot_off, "x", note=hot_off_note),
            Figure(NAME, "replay, accelerators off / on", median(replay_cost), "x", note="median of per-repeat ratios"),
            timed(NAME, "call to the local server, recorded, accelerators off", per_call["recorded_off"]),
            Figure(NAME, "record overhead ratio, accelerators off", median(overhead_off), "x", note="median"),
            Figure(NAME, "record, accelerators off / on", median(record_cost), "x", note="median of per-repeat ratios"),
        ]
    return figures


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    calls, repeats, network_calls = (20, 3, 5) if args.quick else (100, 15, 20)
    emit(
        measure(calls=calls, repeats=repeats, network_calls=network_calls, accelerate=args.accelerate),
        as_json=args.json,
    )


if __name__ == "__main__":
    main()

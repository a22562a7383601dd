"""Anthropic SDK: replay cost against a vcrpy cassette, and record overhead.

1. Replay: one non-stream ``messages.create`` whose conversation is 40 KB of JSON,
   replayed by spanreplay (EventLog loaded once, a replay run per call) versus the
   same HTTP exchange replayed from a vcrpy cassette (loaded once, played back per
   call), in the same process. Goal: spanreplay at least 20x faster.
2. Record overhead: the same call against the local Messages API server on
   127.0.0.1, recorded inside a run (durable file on) versus uninstrumented.

    python benchmarks/bench_anthropic.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic

import spanreplay
from spanreplay.instrumentation.anthropic import AnthropicInstrumentor

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
from messages_api_server import MODEL, MessagesAPIServer

GOAL = 20.0


def conversation(size: int = 40_000) -> list[dict[str, Any]]:
    """Alternating turns of plausible support chat, about ``size`` bytes of JSON."""
    messages: list[dict[str, Any]] = []
    n = 0
    while len(json.dumps(messages)) < size:
        role = "user" if n % 2 == 0 else "assistant"
        text = f"Turn {n}: " + "the parcel for order A-17 left the depot and the customer asks when it arrives. " * 6
        messages.append({"role": role, "content": text})
        n += 1
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": "And now?"})
    return messages


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Median seconds per call over ``repeat`` calls (after a warm-up call)."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = parser.parse_args()
    repeat = 30 if args.quick else 200
    messages = conversation()
    request = {"model": MODEL, "max_tokens": 512, "messages": messages}
    print(f"conversation: {len(json.dumps(messages)) / 1000:.1f} KB of JSON, {len(messages)} messages")

    work = Path(tempfile.mkdtemp(prefix="bench_anthropic_"))
    traces = work / "traces"
    cassette = work / "cassette.yaml"
    spanreplay.configure(service_name="bench", trace_dir=traces)
    instrumentor = AnthropicInstrumentor()

    with MessagesAPIServer() as server, anthropic.Anthropic(base_url=server.url, api_key="bench-key") as client:
        # -- record overhead (uninstrumented first, then instrumented inside a run) --------
        plain = timed(lambda: client.messages.create(**request), repeat)
        instrumentor.instrument(zero_code=False)
        with spanreplay.record(agent="bench-record"):
            recorded_call = timed(lambda: client.messages.create(**request), repeat)

        # -- the recording and the cassette of one identical exchange ----------------------
        with spanreplay.record(agent="bench") as run:
            original = client.messages.create(**request)
        instrumentor.uninstrument()

        import vcr

        recorder = vcr.VCR(record_mode="once", decode_compressed_response=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with recorder.use_cassette(str(cassette)):
                client.messages.create(**request)

    # -- replay, network gone ---------------------------------------------------------------
    log = spanreplay.load(traces, run.run_id)
    instrumentor.instrument(zero_code=False)
    with anthropic.Anthropic(base_url=server.url, api_key="bench-key") as client:

        def spanreplay_replay() -> Any:
            with spanreplay.replay(log):
                return client.messages.create(**request)

        def spanreplay_replay_from_file() -> Any:
            with spanreplay.replay(traces, run.run_id):
                return client.messages.create(**request)

        assert spanreplay_replay() == original
        ours = timed(spanreplay_replay, repeat)
        ours_cold = timed(spanreplay_replay_from_file, repeat)
    instrumentor.uninstrument()

    with anthropic.Anthropic(base_url=server.url, api_key="bench-key") as client, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        player = vcr.VCR(record_mode="none", decode_compressed_response=True)
        with player.use_cassette(str(cassette), allow_playback_repeats=True):
            assert client.messages.create(**request).content == original.content
            theirs = timed(lambda: client.messages.create(**request), repeat)

        def vcr_from_file() -> Any:
            with player.use_cassette(str(cassette), allow_playback_repeats=True):
                return client.messages.create(**request)

        theirs_cold = timed(vcr_from_file, repeat)

    def verdict(ratio: float) -> str:
        return f"{ratio:9.1f}x (goal >= {GOAL:.0f}x) {'MET' if ratio >= GOAL else 'MISSED'}"

    print("replay with the recording already loaded (EventLog / cassette in memory):")
    print(f"  spanreplay:                {ours * 1e6:9.1f} us per call")
    print(f"  vcrpy:                     {theirs * 1e6:9.1f} us per call")
    print(f"  speed-up:                  {verdict(theirs / ours)}")
    print("replay opening the recording each time (trace file / cassette file):")
    print(f"  spanreplay:                {ours_cold * 1e6:9.1f} us per call")
    print(f"  vcrpy:                     {theirs_cold * 1e6:9.1f} us per call")
    print(f"  speed-up:                  {verdict(theirs_cold / ours_cold)}")
    print(f"call, uninstrumented:        {plain * 1e6:9.1f} us per call (local server)")
    print(f"call, recorded in a run:     {recorded_call * 1e6:9.1f} us per call")
    print(f"record overhead ratio:       {recorded_call / plain:9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

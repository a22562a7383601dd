"""Rebuilding a recorded Anthropic status error with a 4 MB and an 8 MB body: time and peak memory.

Three ways, each measured in a fresh interpreter (so its peak resident memory is
its own), the payload decoded from JSON bytes every time as replay does:

- ``ast`` (the baseline, what replay did before): the body read back from the
  message worded ``"Error code: {status} - {body!r}"`` with ``ast.literal_eval``;
- ``repr parser``: the same message, read by spanreplay's linear parser (a
  recording made before the body was kept in the error's fields);
- ``recorded body``: the body kept as JSON in the error's fields (recordings now).

The body is the shape that costs ``ast`` most per byte: a list of many small
objects, as an error that echoes a large request back would carry. Not a timed
test; the figures print as a table (``--json`` for run_all.py).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Figure, emit, median, parse_args

CASES = ("ast", "repr parser", "recorded body")
SIZES = {"4 MB": 4_000_000, "8 MB": 8_000_000}
QUICK_SIZES = {"256 KB": 256_000}
STATUS = 400


def body_of_size(size: int) -> dict[str, Any]:
    """An error body whose repr is about ``size`` characters: many small objects."""
    item = {"index": 0, "text": "abcdefgh", "ok": True}
    count = max(1, size // len(repr(item)))
    items = [{"index": i, "text": "abcdefgh", "ok": i % 2 == 0} for i in range(count)]
    return {"type": "error", "error": {"type": "invalid_request_error", "message": "too large", "items": items}}


def payload(case: str, body: dict[str, Any]) -> bytes:
    """The error payload as the trace holds it (the JSON that ``encode_error`` writes)."""
    message = f"Error code: {STATUS} - {body!r}"
    fields: dict[str, Any] = {"status_code": STATUS, "request_id": "req_1"}
    if case == "recorded body":
        fields["body"] = body
    record = {"type": "BadRequestError", "module": "anthropic", "message": message, "args": [message], "fields": fields}
    return json.dumps(record).encode()


def child(case: str, size: int) -> None:
    """One rebuild in this interpreter: prints seconds and the peak memory it added."""
    import anthropic  # noqa: F401  (the rebuilder builds only types already imported)

    from spanreplay.instrumentation.anthropic._errors import rebuild_anthropic_error
    from spanreplay.model.error_records import decode_error

    # Warm-up: the SDK imports modules the first time it builds an error.
    rebuild_anthropic_error(decode_error(payload(case, body_of_size(100))))
    body = body_of_size(size)
    data = payload(case, body)
    chars = len(repr(body))
    del body

    def rebuild() -> Any:
        info = decode_error(data)
        if case == "ast":
            return ast.literal_eval(info.message[len(f"Error code: {STATUS} - ") :])
        rebuilt = rebuild_anthropic_error(info)
        if not isinstance(getattr(rebuilt, "body", None), dict):
            raise SystemExit(f"{case}: the body did not come back")
        return rebuilt

    started = time.perf_counter()
    rebuild()
    seconds = time.perf_counter() - started
    # Memory apart from time: tracing allocations slows the rebuild down.
    tracemalloc.start()
    rebuild()
    peak_mb = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb, "chars": chars}))


def measure(case: str, size: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", case, str(size)], capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        child(sys.argv[2], int(sys.argv[3]))
        return
    args = parse_args(__doc__ or "")
    sizes = QUICK_SIZES if args.quick else SIZES
    repeats = 1 if args.quick else 3
    figures: list[Figure] = []
    for label, size in sizes.items():
        runs: dict[str, list[dict[str, float]]] = {case: [] for case in CASES}
        for _ in range(repeats):
            for case in CASES:  # interleaved: a slow moment hits every case of a round alike
                runs[case].append(measure(case, size))
        chars = runs["ast"][0]["chars"]
        name = f"error rebuild {label}"
        for case in CASES:
            seconds = [r["seconds"] for r in runs[case]]
            memory = [r["peak_mb"] for r in runs[case]]
            note = f"best {min(seconds):.3f}s; body repr {chars / 1e6:.1f} M chars"
            figures.append(Figure(name, f"{case}: time", median(seconds), "s", note=note))
            figures.append(Figure(name, f"{case}: peak memory", median(memory), "MB", note="tracemalloc peak"))
        base = [r["seconds"] for r in runs["ast"]]
        for case in CASES[1:]:
            ratios = [b / r["seconds"] for b, r in zip(base, runs[case], strict=True)]
            figures.append(Figure(name, f"ast / {case}", median(ratios), "x", note="median of per-round ratios"))
    emit(figures, as_json=args.json)


if __name__ == "__main__":
    main()

"""Trace files of many tiny spans: runs of any number of steps, written without recording them.

One run of one tool step is recorded once with spanreplay's own file exporter;
its three lines (the run span as it started, the step, the run span as it ended)
become templates, and runs of any length are written from them with fresh run
ids, trace ids, span ids, seqs and call ids. The step's payloads and their
digests are left as recorded, so every written run loads and verifies.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson
from opentelemetry.sdk.trace import TracerProvider

import spanreplay

TEMPLATE_RUN = "run_tinyspan_template"


@spanreplay.tool
def echo(value: int) -> int:
    return value


@dataclass(frozen=True)
class Templates:
    """The recorded run's lines, and the ids in them that each written run replaces."""

    started: bytes
    step: bytes
    ended: bytes
    trace_id: bytes
    root_span_id: bytes
    step_span_id: bytes

    def write_run(self, out: BinaryIO, run_id: str, steps: int, number: int) -> int:
        """Write run ``run_id`` of ``steps`` steps (``number`` makes its ids unique); returns bytes written."""
        trace_id = f"{number + 1:032x}".encode()
        root = f"{number + 1:08x}{0:08x}".encode()

        def own(line: bytes) -> bytes:
            return (
                line.replace(TEMPLATE_RUN.encode(), run_id.encode())
                .replace(self.trace_id, trace_id)
                .replace(self.root_span_id, root)
            )

        started, step, ended = own(self.started), own(self.step), own(self.ended)
        ended = ended.replace(
            b'"spanreplay.run.steps","value":{"intValue":"1"}',
            b'"spanreplay.run.steps","value":{"intValue":"%d"}' % steps,
        )
        step_head, step_tail = step.split(
            b'"intValue":"1"}},{"key":"spanreplay.call_id","value":{"stringValue":"tool:echo#0"}'
        )
        written = out.write(started)
        for seq in range(1, steps + 1):
            line = (
                step_head.replace(self.step_span_id, b"%08x%08x" % (number + 1, seq))
                + b'"intValue":"%d"}},{"key":"spanreplay.call_id","value":{"stringValue":"tool:echo#%d"}'
                % (seq, seq - 1)
                + step_tail
            )
            written += out.write(line)
        return written + out.write(ended)


def record_templates(directory: Path, *, configure: bool = True) -> Templates:
    """Record the template run into ``directory``.

    With ``configure``, spanreplay is configured to write there (and left so);
    without, it must already be (a test's ``trace_dir``).
    """
    provider = TracerProvider() if configure else None
    if provider is not None:
        spanreplay.configure(service_name="tiny-spans", trace_dir=directory, tracer_provider=provider)
    with spanreplay.record(agent="tiny", run_id=TEMPLATE_RUN):
        echo(0)
    if provider is not None:
        provider.shutdown()
    lines = (directory / f"{TEMPLATE_RUN}.jsonl").read_bytes().splitlines(keepends=True)
    started, step, ended = lines
    spans = [orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"][0] for line in lines]
    # The step's span id must not also occur inside the line as another id.
    assert re.fullmatch(rb"[0-9a-f]{16}", spans[1]["spanId"].encode())
    return Templates(
        started=started,
        step=step,
        ended=ended,
        trace_id=spans[0]["traceId"].encode(),
        root_span_id=spans[0]["spanId"].encode(),
        step_span_id=spans[1]["spanId"].encode(),
    )


def write_runs(templates: Templates, path: Path, runs: Iterable[tuple[str, int]]) -> int:
    """Write the runs, each ``(run id, steps)``, one after the other; returns the file's size."""
    written = 0
    with open(path, "wb") as out:
        for number, (run_id, steps) in zip(itertools.count(), runs):
            written += templates.write_run(out, run_id, steps, number)
    return written

"""``spanreplay convert SOURCE --to otlp-json|otlp-proto -o FILE``: any trace source, written as OTLP."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import click

from spanreplay import semconv as sc
from spanreplay.errors import RunNotFoundError, TraceFormatError
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import MalformedTrace, iter_spans, writers
from spanreplay.sources import backends as _backends
from spanreplay.sources.kinds import is_backend

from ._common import BadInput, console

FORMATS = ("otlp-json", "otlp-proto")


@click.command("convert")
@click.argument("source")
@click.option("--to", "target", type=click.Choice(FORMATS), required=True, help="The format to write.")
@click.option("-o", "--output", required=True, help="The file to write (- for stdout).")
@click.option("--run", "run_id", help="Only this run's spans (a run id, or a trace id for a backend source).")
@click.option("--zstd", is_flag=True, help="Compress each batch with zstd, as the Collector's compression: zstd does.")
def convert_command(*, source: str, target: str, output: str, run_id: str | None, zstd: bool) -> None:
    """Write the spans of SOURCE as OTLP, the way the Collector's file exporter writes them.

    \b
    --to otlp-json   one TracesData per line (format: json); with --zstd, each
                     batch zstd-compressed behind a 4-byte length
    --to otlp-proto  each TracesData protobuf behind a 4-byte big-endian length
                     (format: proto); with --zstd, each one compressed

    SOURCE is anything `spanreplay runs` reads: files in any supported format,
    a directory, a glob, - for stdin, or jaeger+http(s):// and
    tempo+http(s):// (which need --run). The file is written whole or not at
    all: a failure leaves no partial output behind.
    """
    spans = CountedSpans(select_spans(source, run_id))
    if target == "otlp-json":
        chunks = writers.json_records_zstd(spans) if zstd else writers.json_lines(spans)
    else:
        chunks = writers.proto_records(spans, zstd=zstd)
    try:
        write_spans(output, chunks, spans)
    except MalformedTrace as exc:
        raise BadInput(f"{source} holds a span that {target} cannot carry: {exc}.") from None
    if spans.count == 0:
        raise BadInput(f"{source} holds no spans, so there is nothing to convert; no file was written.")
    if output != "-":
        console().print(f"wrote {spans.count} span(s) from {source} to {output} as {target}", markup=False)


class CountedSpans:
    """Counts the spans that pass through on their way to the writer."""

    def __init__(self, spans: Iterator[SpanRecord]) -> None:
        self.count = 0
        self._spans = spans

    def __iter__(self) -> Iterator[SpanRecord]:
        for span in self._spans:
            self.count += 1
            yield span


def select_spans(source: str, run_id: str | None) -> Iterator[SpanRecord]:
    if is_backend(source):
        if run_id is None:
            raise BadInput(f"{source} is a backend: name the run to convert with --run RUN (a run id or a trace id).")
        backend = _backends.parse(source)
        if _backends.is_trace_id(run_id):
            found = _backends.trace_spans(backend, run_id)
            if found is None:
                raise RunNotFoundError(f"{backend.shown} has no trace {run_id}; check the id.", run_id=run_id)
            yield from found
            return
        yield from _one_run(_backends.search_spans(backend, sc.RUN_ID, (run_id,)), run_id, source)
        return
    if run_id is None:
        yield from iter_spans(source)
    else:
        yield from _one_run(iter_spans(source, contains=sc.RUN_ID.encode()), run_id, source)


def _one_run(spans: Iterator[SpanRecord], run_id: str, source: str) -> Iterator[SpanRecord]:
    found = False
    for span in spans:
        if span.attributes.get(sc.RUN_ID) == run_id:
            found = True
            yield span
    if not found:
        raise RunNotFoundError(
            f"Run {run_id} is not in {source}; spanreplay runs {source} lists the runs it holds.", run_id=run_id
        )


def write_spans(output: str, chunks: Iterator[bytes], spans: CountedSpans) -> None:
    if output == "-":
        stdout = sys.stdout.buffer
        for chunk in chunks:
            stdout.write(chunk)
        stdout.flush()
        return
    target = Path(output)
    directory = target.parent if str(target.parent) else Path(".")
    try:
        handle = tempfile.NamedTemporaryFile(  # noqa: SIM115 (renamed or removed below)
            "wb", dir=directory, prefix=f".{target.name}.", suffix=".part", delete=False
        )
    except OSError as exc:
        raise TraceFormatError(
            f"Cannot write {output}: {exc.strerror or exc}; check that its directory exists and is writable.",
            source=output,
        ) from None
    try:
        with handle:
            for chunk in chunks:
                handle.write(chunk)
        if spans.count:
            os.replace(handle.name, target)
        else:  # nothing to write: leave whatever is at the target alone
            os.unlink(handle.name)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(handle.name)
        raise

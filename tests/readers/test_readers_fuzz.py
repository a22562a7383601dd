"""Fuzzing the binary readers and the backend sources: any input ends in spans or a SpanReplayError, and soon.

The JSON readers have their own properties (test_readers_properties.py); these
cover what this layer added: zstd streams, the Collector's length-prefixed
records (protobuf, per-record zstd), Tempo's api/v2 envelope, and whatever a
backend's HTTP API answers. atheris, when installed, drives the same checks
from coverage (``PYTHONPATH=tests python tests/readers/test_readers_fuzz.py``).
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import zstandard
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import spanreplay
from fixtures.garbage import JSON, time_limit
from helpers.paths import THIRD_PARTY
from spanreplay import SpanReplayError, SpanReplayWarning
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import iter_spans, read_file, writers

PROFILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ZSTD = b"\x28\xb5\x2f\xfd"
# Real messages to damage: every third-party span, as the Collector's proto records.
SAMPLE_SPANS = [s for path in sorted(THIRD_PARTY.rglob("*.json*")) for s in iter_spans(path)]
PROTO_MESSAGE = writers.proto_message(SAMPLE_SPANS).SerializeToString()


def read(data: bytes, *, contains: bytes | None = None) -> list[SpanRecord] | SpanReplayError:
    """Everything ``read_file`` makes of a file holding ``data``: its spans, or the error it raised."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace"
        path.write_bytes(data)
        with warnings.catch_warnings(), time_limit(10):
            warnings.simplefilter("ignore", SpanReplayWarning)
            try:
                return list(read_file(str(path), contains=contains))
            except SpanReplayError as exc:
                error = exc
    assert str(error).strip(), "an error without a message"
    return error


def record(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


@PROFILE
@given(st.binary(max_size=3000))
@example(b"")
@example(b"\x00" * 8)
def test_arbitrary_bytes_behind_the_zstd_magic(data: bytes) -> None:
    read(ZSTD + data)


@PROFILE
@given(st.binary(max_size=3000), st.integers(min_value=0, max_value=4000), st.integers(min_value=0, max_value=255))
def test_zstd_frames_cut_or_damaged(data: bytes, at: int, flip: int) -> None:
    frame = bytearray(zstandard.ZstdCompressor().compress(data))
    if len(frame) > 4:
        frame[4 + at % (len(frame) - 4)] ^= flip
    read(bytes(frame[: max(4, at)]))


@PROFILE
@given(st.lists(st.binary(max_size=400), max_size=6))
@example([b"\x0a"])
@example([b"{"])
@example([ZSTD])
def test_arbitrary_length_prefixed_records(bodies: list[bytes]) -> None:
    data = b"".join(record(b"\x0a" + body) for body in bodies)
    read(data)
    read(data, contains=b'"run_x"')


@PROFILE
@given(st.lists(st.binary(max_size=400), min_size=1, max_size=4), st.booleans())
def test_records_in_per_record_zstd(bodies: list[bytes], json_inside: bool) -> None:
    compressor = zstandard.ZstdCompressor()
    prefix = b"{" if json_inside else b"\x0a"
    read(b"".join(record(compressor.compress(prefix + body)) for body in bodies))


@PROFILE
@given(st.integers(min_value=0, max_value=len(PROTO_MESSAGE) - 1), st.integers(min_value=1, max_value=255), st.data())
def test_proto_messages_with_a_byte_changed_or_cut(at: int, flip: int, data: st.DataObject) -> None:
    damaged = bytearray(PROTO_MESSAGE)
    damaged[at] ^= flip
    cut = data.draw(st.integers(min_value=1, max_value=len(damaged)))
    read(record(bytes(damaged)))
    read(record(bytes(damaged[:cut])))


def test_the_undamaged_proto_message_reads_every_sample_span() -> None:
    spans = read(record(PROTO_MESSAGE))
    assert isinstance(spans, list)
    assert len(spans) == len(SAMPLE_SPANS) == 84


@PROFILE
@given(JSON, JSON)
@example("PARTIAL", None)
@example(1, 5)
def test_arbitrary_tempo_v2_envelopes(status: Any, message: Any) -> None:
    doc = {"trace": {"resourceSpans": []}, "status": status, "message": message}
    result = read(orjson.dumps(doc))
    if status in ("PARTIAL", 1):
        assert isinstance(result, spanreplay.TraceFormatError)
        assert "max_bytes_per_trace" in str(result)


# --- backends -------------------------------------------------------------------------------------


class _Answer:
    status = 200
    body = b"{}"


@pytest.fixture(scope="module")
def answering() -> Iterator[tuple[str, type[_Answer]]]:
    """A server on 127.0.0.1 that answers every request with ``_Answer``'s status and body."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(_Answer.status)
            self.send_header("Content-Length", str(len(_Answer.body)))
            self.end_headers()
            self.wfile.write(_Answer.body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Answer
    server.shutdown()
    server.server_close()


@PROFILE
@given(
    kind=st.sampled_from(["jaeger", "tempo"]),
    status=st.sampled_from([200, 200, 200, 400, 401, 404, 500]),
    body=st.one_of(st.binary(max_size=300), JSON.map(orjson.dumps)),
    target=st.sampled_from(["run_x", "0123456789abcdef0123456789abcdef", None]),
)
@example(kind="jaeger", status=200, body=b'{"data":[{"traceID":"ab","spans":[{}]}]}', target="run_x")
@example(kind="tempo", status=200, body=b'{"traces":[{"traceID":"ab"}]}', target="run_x")
def test_any_backend_answer_ends_in_a_result_or_a_spanreplay_error(
    answering: tuple[str, type[_Answer]], kind: str, status: int, body: bytes, target: str | None
) -> None:
    url, answer = answering
    answer.status, answer.body = status, body
    error: SpanReplayError | None = None
    with time_limit(10):
        try:
            if target is None:
                spanreplay.runs(f"{kind}+{url}?timeout=5")
            else:
                spanreplay.load(f"{kind}+{url}?timeout=5", target)
        except SpanReplayError as exc:
            error = exc
    assert error is None or str(error).strip()


# --- atheris -------------------------------------------------------------------------------------------


def _fuzz_one(data: bytes) -> None:
    result = read(data)
    assert isinstance(result, (list, SpanReplayError))


# Run by hand: PYTHONPATH=tests python tests/readers/test_readers_fuzz.py [-runs=N]
if __name__ == "__main__":  # pragma: no cover
    import atheris

    atheris.instrument_all()  # coverage from every module already imported, spanreplay's readers among them
    atheris.Setup(sys.argv, _fuzz_one)
    atheris.Fuzz()

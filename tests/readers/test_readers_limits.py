"""Decompression bombs and oversized lines: refused with the limit named, in bounded memory.

A few hundred kilobytes of zstd or gzip can inflate to one line of gigabytes;
read to its end and parsed, it exhausted memory. A line (or a one-document
file) longer than ``SPANREPLAY_MAX_LINE_BYTES`` and a file larger than
``SPANREPLAY_MAX_FILE_BYTES``, both counted once decompressed, end in a
``TraceFormatError`` that names the file, the limit and the setting to raise.
The bombs are built from one small compressed member (gzip) or frame (zstd)
repeated: both formats read concatenated ones as one stream.
"""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures.recordings import record_agent
from spanreplay import ConfigurationError, SpanReplayWarning, TraceFormatError
from spanreplay.readers import _lines, iter_spans
from spanreplay.readers._limits import DEFAULT_MAX_LINE_BYTES, limits

MiB = 1 << 20
HEAD = b'{"resourceSpans":[{"x":"'


def zstd_bomb(path: Path, inflated: int, *, lines: bool = False) -> Path:
    """A zstd file of HEAD and then ``inflated`` bytes of x (a newline every MiB when ``lines``)."""
    block = (b"x" * (MiB - 1) + b"\n") if lines else b"x" * MiB
    frame = zstandard.ZstdCompressor().compress(block * 16)
    with path.open("wb") as out:
        out.write(zstandard.ZstdCompressor().compress(HEAD))
        for _ in range(inflated // (16 * MiB)):
            out.write(frame)
    return path


def gzip_bomb(path: Path, inflated: int) -> Path:
    member = gzip.compress(b"x" * 16 * MiB, compresslevel=9)
    with path.open("wb") as out:
        out.write(gzip.compress(HEAD))
        for _ in range(inflated // (16 * MiB)):
            out.write(member)
    return path


def read_all(path: Path, contains: bytes | None = None) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpanReplayWarning)
        return sum(1 for _ in iter_spans(path, contains=contains))


@pytest.fixture
def run_file(trace_dir: Path) -> Path:
    return trace_dir / f"{record_agent('run_limits')}.jsonl"


def test_the_default_line_limit_is_256_mib_and_the_file_is_unlimited(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPANREPLAY_MAX_LINE_BYTES", raising=False)
    monkeypatch.delenv("SPANREPLAY_MAX_FILE_BYTES", raising=False)
    assert (limits().line, limits().file) == (DEFAULT_MAX_LINE_BYTES, None) == (256 * MiB, None)


@pytest.mark.parametrize(
    ("text", "size"),
    [("1048576", MiB), ("512k", 512 << 10), ("64M", 64 * MiB), ("2GiB", 2 << 30), ("1 gb", 1 << 30), ("0", None)],
)
def test_a_limit_is_bytes_or_a_size_with_a_binary_unit(monkeypatch: pytest.MonkeyPatch, text: str, size: int) -> None:
    monkeypatch.setenv("SPANREPLAY_MAX_LINE_BYTES", text)
    monkeypatch.setenv("SPANREPLAY_MAX_FILE_BYTES", text)
    assert (limits().line, limits().file) == (size, size)


@pytest.mark.parametrize("text", ["lots", "-1", "1.5G", "12 parsecs"])
def test_a_limit_that_is_not_a_size_names_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("SPANREPLAY_MAX_FILE_BYTES", text)
    with pytest.raises(ConfigurationError, match=r"SPANREPLAY_MAX_FILE_BYTES is .* not a size"):
        limits()


@pytest.mark.parametrize("bomb", [zstd_bomb, gzip_bomb], ids=["zstd", "gzip"])
@pytest.mark.parametrize("contains", [None, b"resourceSpans"], ids=["every-line", "filtered"])
def test_a_one_line_bomb_names_the_file_line_and_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bomb: object, contains: bytes | None
) -> None:
    monkeypatch.setenv("SPANREPLAY_MAX_LINE_BYTES", "4M")
    path = bomb(tmp_path / "bomb", 64 * MiB)  # type: ignore[operator]
    with pytest.raises(TraceFormatError) as caught:
        read_all(path, contains)
    message = str(caught.value)
    kind = "zstd" if bomb is zstd_bomb else "gzip"
    assert message.startswith(f"{path}:1: a line holds more than 4 MiB once its {kind} is decompressed")
    assert "SPANREPLAY_MAX_LINE_BYTES=16M, or 0 for none" in message
    assert (caught.value.source, caught.value.line) == (str(path), 1)


def test_a_long_line_after_good_ones_is_named_by_its_number_even_when_filtered(
    run_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = run_file.read_bytes()
    count, spans = good.count(b"\n"), read_all(run_file)
    monkeypatch.setenv("SPANREPLAY_MAX_LINE_BYTES", "64K")
    run_file.write_bytes(good + HEAD + b"x" * (3 * MiB) + b'"}]}\n' + good)
    for contains in (None, b"run_limits", b"xxxx"):
        with pytest.raises(TraceFormatError, match=rf"^{run_file}:{count + 1}: a line holds more than 64 KiB, past"):
            read_all(run_file, contains)
    monkeypatch.setenv("SPANREPLAY_MAX_LINE_BYTES", "0")
    assert read_all(run_file) == 2 * spans  # the long line is OTLP holding no span


def test_a_one_document_file_is_held_to_the_line_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "trace.json"
    path.write_bytes(b'{"resourceSpans": [\n' + b'{"resource": {}},\n' * 100_000 + b'{"resource": {}}\n]}\n')
    assert read_all(path) == 0
    monkeypatch.setenv("SPANREPLAY_MAX_LINE_BYTES", "1M")
    with pytest.raises(TraceFormatError, match=r"is one JSON document of more than 1 MiB, past the limit SPANREPLAY"):
        read_all(path)


@pytest.mark.parametrize("compress", [None, gzip.compress, zstandard.ZstdCompressor().compress])
def test_the_file_limit_counts_the_bytes_once_decompressed(
    run_file: Path, monkeypatch: pytest.MonkeyPatch, compress: object
) -> None:
    plain = run_file.read_bytes()
    if compress is not None:
        run_file.write_bytes(compress(plain))  # type: ignore[operator]
    spans = read_all(run_file)
    monkeypatch.setenv("SPANREPLAY_MAX_FILE_BYTES", str(len(plain)))
    assert read_all(run_file) == spans
    monkeypatch.setenv("SPANREPLAY_MAX_FILE_BYTES", str(len(plain) - 1))
    with pytest.raises(TraceFormatError, match=rf"^{run_file} holds more than {len(plain) - 1} bytes") as caught:
        read_all(run_file)
    assert f"SPANREPLAY_MAX_FILE_BYTES={4 * (len(plain) - 1)}, or 0 for none" in str(caught.value)


def test_a_zstd_bomb_of_many_lines_stops_at_the_file_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = zstd_bomb(tmp_path / "bomb.zst", 256 * MiB, lines=True)
    assert path.stat().st_size < 64 << 10
    monkeypatch.setenv("SPANREPLAY_MAX_FILE_BYTES", "8M")
    with pytest.raises(TraceFormatError, match=r"holds more than 8 MiB once its zstd is decompressed"):
        read_all(path)


# The child's peak from /proc (VmHWM, in kB), not getrusage: Linux carries the
# parent's peak into ru_maxrss across the fork and exec, and under a full test run
# the parent is hundreds of megabytes.
PEAK = """
import re, sys
from spanreplay import TraceFormatError
from spanreplay.readers import iter_spans
try:
    list(iter_spans(sys.argv[1]))
except TraceFormatError as exc:
    with open("/proc/self/status") as status:
        peak_kb = int(re.search(r"VmHWM:\\s+(\\d+)", status.read())[1])
    print(type(exc).__name__, peak_kb // 1024)
"""


@pytest.mark.parametrize("bomb", [zstd_bomb, gzip_bomb], ids=["zstd", "gzip"])
def test_a_bomb_of_a_gigabyte_is_refused_in_a_fraction_of_its_size(tmp_path: Path, bomb: object) -> None:
    path = bomb(tmp_path / "bomb", 1024 * MiB)  # type: ignore[operator]
    assert path.stat().st_size < 2 * MiB
    env = {**os.environ, "SPANREPLAY_MAX_LINE_BYTES": "16M", "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", PEAK, str(path)], capture_output=True, text=True, env=env, timeout=120, check=True
    )
    name, peak_mib = done.stdout.split()
    # Reading the whole line took twice its size (over 2 GiB); the refusal holds at most
    # the limit, twice over while the line is joined, and one step of zstd's output.
    assert name == "TraceFormatError"
    assert int(peak_mib) < 400, done.stdout


LINES = st.lists(st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"") + b"\n"), max_size=12)
TAIL = st.binary(max_size=60).map(lambda b: b.replace(b"\n", b""))


def refusal(read: Callable[[], object]) -> tuple[object, _lines.LineTooLong | None]:
    try:
        return read(), None
    except _lines.LineTooLong as exc:
        return None, exc


@settings(max_examples=300, deadline=None)
@given(LINES, TAIL, st.integers(1, 70))
def test_numbered_lines_refuses_exactly_the_first_line_past_the_limit(
    lines: list[bytes], tail: bytes, limit: int
) -> None:
    every = [*lines, tail] if tail else lines
    too_long = [n for n, line in enumerate(every, 1) if len(line) > limit]
    stream = io.BufferedReader(io.BytesIO(b"".join(every)), 16)
    read, refused = refusal(lambda: list(_lines.numbered_lines(stream, limit=limit)))
    assert (refused.lineno if refused else None) == (too_long[0] if too_long else None)
    assert read == (None if too_long else list(enumerate(every, 1)))


@settings(max_examples=300, deadline=None)
@given(LINES, TAIL, st.integers(1, 70), st.integers(1, 70))
def test_matching_lines_refuses_a_long_line_with_the_needle_or_past_a_block(
    lines: list[bytes], tail: bytes, limit: int, block: int
) -> None:
    every = [*lines, tail] if tail else lines
    starts = [sum(map(len, every[:i])) for i in range(len(every))]
    located = list(zip(starts, every, strict=True))
    too_long = [at for at, line in located if len(line) > limit]
    # Lines without the needle inside a block are skipped unread: any of them may be refused too.
    must = [at for at, line in located if len(line) > limit and (b"a" in line or len(line) > block)]
    with mock.patch.object(_lines, "BLOCK_BYTES", block):
        found, refused = refusal(lambda: list(_lines.matching_lines(io.BytesIO(b"".join(every)), b"a", limit=limit)))
    if refused is None:
        assert not must
        assert found == [(at, line) for at, line in zip(starts, every, strict=True) if b"a" in line]
    else:
        assert refused.offset in too_long
        assert refused.offset <= min(must, default=refused.offset)

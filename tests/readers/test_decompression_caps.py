"""A compressed trace file is bounded in what it inflates to, and by how much.

With no file limit, a 289 KB zstd file of repeated span lines held
``spanreplay runs`` for minutes: every inflated line is parsed. Now a gzip or
zstd file is held to ``SPANREPLAY_MAX_INFLATED_BYTES`` (default 4 GiB) and to
``SPANREPLAY_MAX_INFLATE_RATIO`` plain bytes per compressed byte (default 200,
judged once 16 MiB are inflated); the refusal names the file, the cap and the
variable that raises it, and a directory scan skips that file and reads on.
The bombs are crafted here: one compressed frame (or gzip member) of repeated
lines, written many times (both formats read concatenated ones as one stream).
"""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path

import pytest
import zstandard

import spanreplay
from fixtures.recordings import lines, record_agent
from spanreplay import ConfigurationError, SpanReplayWarning, TraceFormatError
from spanreplay.readers import iter_spans
from spanreplay.readers._limits import RATIO_FROM, limits
from spanreplay.readers._records import PREFIX_BYTES

MiB = 1 << 20


def block_of(line: bytes, size: int) -> bytes:
    return line * (size // len(line) + 1)


def zstd_bomb(path: Path, line: bytes, inflated: int) -> Path:
    """A zstd file of ``line`` repeated to about ``inflated`` bytes, in 8 MiB frames."""
    frame = zstandard.ZstdCompressor(level=3).compress(block_of(line, 8 * MiB))
    path.write_bytes(frame * (inflated // (8 * MiB)))
    return path


def gzip_bomb(path: Path, line: bytes, inflated: int) -> Path:
    member = gzip.compress(block_of(line, 8 * MiB), compresslevel=9)
    path.write_bytes(member * (inflated // (8 * MiB)))
    return path


@pytest.fixture
def recorded(trace_dir: Path) -> Path:
    record_agent("run_kept")
    return trace_dir


@pytest.fixture
def span_line(recorded: Path) -> bytes:
    """A real span line of another run: a bomb of it parses line after line, which is the cost."""
    return lines(recorded / "run_kept.jsonl")[1].replace(b"run_kept", b"run_bomb")


def read_all(path: Path) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpanReplayWarning)
        return sum(1 for _ in iter_spans(path))


def test_the_defaults_are_4_gib_and_200_to_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPANREPLAY_MAX_INFLATED_BYTES", raising=False)
    monkeypatch.delenv("SPANREPLAY_MAX_INFLATE_RATIO", raising=False)
    assert (limits().inflated, limits().ratio, RATIO_FROM) == (4 << 30, 200, 16 * MiB)


@pytest.mark.parametrize(("text", "ratio"), [("1000", 1000), ("50:1", 50), ("0", None)])
def test_the_ratio_is_a_whole_number(monkeypatch: pytest.MonkeyPatch, text: str, ratio: int | None) -> None:
    monkeypatch.setenv("SPANREPLAY_MAX_INFLATE_RATIO", text)
    assert limits().ratio == ratio


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("SPANREPLAY_MAX_INFLATE_RATIO", "lots"),
        ("SPANREPLAY_MAX_INFLATE_RATIO", "1.5"),
        ("SPANREPLAY_MAX_INFLATED_BYTES", "big"),
    ],
)
def test_a_cap_that_is_not_a_number_names_its_variable(monkeypatch: pytest.MonkeyPatch, name: str, text: str) -> None:
    monkeypatch.setenv(name, text)
    with pytest.raises(ConfigurationError, match=rf"^{name} is '{text}', not a"):
        limits()


# deflate's matches are short: repeated span lines of kilobytes inflate about 180:1 in
# gzip (held by the size cap), short lines about 1000:1.
SHORT_LINE = b'{"resourceSpans":[]}\n'


@pytest.mark.parametrize(("bomb", "kind"), [(zstd_bomb, "zstd"), (gzip_bomb, "gzip")])
def test_a_bomb_of_span_lines_is_refused_by_its_ratio_naming_the_cap(
    tmp_path: Path, span_line: bytes, bomb: object, kind: str
) -> None:
    path = bomb(tmp_path / "bomb", span_line if kind == "zstd" else SHORT_LINE, 256 * MiB)  # type: ignore[operator]
    assert path.stat().st_size < 2 * MiB
    with pytest.raises(TraceFormatError) as caught:
        read_all(path)
    message = str(caught.value)
    assert message.startswith(f"{path} inflates to more than 200 times its size once its {kind} is decompressed (")
    assert "past the limit SPANREPLAY_MAX_INFLATE_RATIO sets" in message
    assert "raise the limit (SPANREPLAY_MAX_INFLATE_RATIO=800, or 0 for none)" in message
    assert caught.value.source == str(path)


def test_without_the_ratio_cap_the_size_cap_holds(
    tmp_path: Path, span_line: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = zstd_bomb(tmp_path / "bomb.zst", span_line, 64 * MiB)
    monkeypatch.setenv("SPANREPLAY_MAX_INFLATE_RATIO", "0")
    monkeypatch.setenv("SPANREPLAY_MAX_INFLATED_BYTES", "24M")
    with pytest.raises(TraceFormatError) as caught:
        read_all(path)
    assert str(caught.value) == (
        f"{path} inflates to more than 24 MiB once its zstd is decompressed, past the limit "
        "SPANREPLAY_MAX_INFLATED_BYTES sets; if it is a real trace, raise the limit "
        "(SPANREPLAY_MAX_INFLATED_BYTES=96M, or 0 for none) and read it again."
    )
    monkeypatch.setenv("SPANREPLAY_MAX_INFLATED_BYTES", "0")
    assert read_all(path) > 0  # both caps lifted: read to its end


def test_a_directory_scan_skips_the_bomb_and_lists_the_other_runs(recorded: Path, span_line: bytes) -> None:
    zstd_bomb(recorded / "bomb.jsonl.zst", span_line, 128 * MiB)
    bomb = recorded / "bomb.jsonl.zst"
    with pytest.warns(SpanReplayWarning) as caught:
        found = {run.run_id: run.damaged for run in spanreplay.runs(recorded)}
    (warning,) = [str(w.message) for w in caught]
    assert warning.startswith(f"Skipped {bomb} from there on; runs run_bomb were in it and are refused when loaded: ")
    assert "SPANREPLAY_MAX_INFLATE_RATIO=800, or 0 for none" in warning
    assert found["run_kept"] is None
    assert (found["run_bomb"] or "").startswith(f"Run run_bomb cannot be loaded: {bomb} held spans of it but was")
    with pytest.warns(SpanReplayWarning, match=f"Skipped {bomb}"):
        assert spanreplay.load(recorded, "run_kept").run.status == "ok"
    # The bomb's own run: refused, never replayed from the part that was read.
    with pytest.warns(SpanReplayWarning), pytest.raises(TraceFormatError) as info:
        spanreplay.load(recorded, "run_bomb")
    # The same sentence, but for how far each read got before the cap stopped it.
    assert str(info.value).split(" (")[0] == (found["run_bomb"] or "").split(" (")[0]


def test_per_record_zstd_is_counted_across_the_file(tmp_path: Path, span_line: bytes) -> None:
    # The Collector's layout: a 4-byte length, then one zstd frame per record. Each record
    # stays under the per-record bound; together they pass the ratio.
    frame = zstandard.ZstdCompressor().compress(b'{"resourceSpans":[' + b" " * (4 * MiB) + b"]}")
    record = len(frame).to_bytes(PREFIX_BYTES, "big") + frame
    path = tmp_path / "records.bin"
    path.write_bytes(record * 64)
    with pytest.raises(TraceFormatError, match=rf"^{path} inflates to more than 200 times its size once its zstd"):
        read_all(path)


@pytest.mark.parametrize("compress", [gzip.compress, zstandard.ZstdCompressor(level=19).compress], ids=["gzip", "zstd"])
def test_a_real_compressed_trace_reads_under_the_defaults(recorded: Path, compress: object) -> None:
    plain = recorded / "run_kept.jsonl"
    packed = recorded.parent / "packed"
    packed.write_bytes(compress(plain.read_bytes() * 400))  # type: ignore[operator]
    assert read_all(packed) == read_all(plain) * 400

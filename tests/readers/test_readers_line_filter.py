"""The run filter over JSON lines: the needle found wherever blocks cut the file, nothing else parsed."""

from __future__ import annotations

import contextlib
import gzip
import io
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

import spanreplay
from fixtures.recordings import collector_lines, record_agent
from fixtures.tracedocs import document, line, span
from spanreplay import SpanReplayWarning, TraceFormatError
from spanreplay.readers import _lines, iter_spans


@contextlib.contextmanager
def blocks_of(size: int) -> Iterator[None]:
    """Small blocks, so that lines and needles fall across block edges."""
    original = _lines.BLOCK_BYTES
    _lines.BLOCK_BYTES = size
    try:
        yield
    finally:
        _lines.BLOCK_BYTES = original


def naive(data: bytes, needle: bytes) -> list[tuple[int, bytes]]:
    """Every line holding the needle, with its offset, the slow and obvious way."""
    found, at = [], 0
    for text in io.BytesIO(data):
        if needle in text:
            found.append((at, text))
        at += len(text)
    return found


# Few symbols, so that near misses of a needle (a shared prefix) are frequent.
SYMBOLS = [b"a", b"b", b'"', b"\x00", b"\xff"]


@st.composite
def needle_and_data(draw: st.DrawFn) -> tuple[bytes, bytes]:
    """A needle, and bytes made of it, its halves, newlines and the symbols it is made of."""
    needle = b"".join(draw(st.lists(st.sampled_from(SYMBOLS), min_size=1, max_size=6)))
    pieces = [needle, needle[: len(needle) // 2], needle[len(needle) // 2 :], b"\n", *SYMBOLS]
    return needle, b"".join(draw(st.lists(st.sampled_from(pieces), max_size=120)))


@settings(max_examples=500, deadline=None)
@given(case=needle_and_data(), block=st.integers(min_value=1, max_value=40), head=st.booleans())
def test_matching_lines_equals_a_naive_filter_on_any_bytes(case: tuple[bytes, bytes], block: int, head: bool) -> None:
    needle, data = case
    stream = io.BytesIO(data)
    first = stream.readline() if head else b""  # a line the sniffer already read
    with blocks_of(block):
        got = list(_lines.matching_lines(stream, needle, head=first))
    assert got == naive(data, needle)


@pytest.mark.parametrize("block", [7, 64, 4096])
def test_a_needle_cut_by_a_block_edge_at_every_byte_is_found_once(block: int) -> None:
    needle = b'"run_20260101_000000_1c6e3ec6"'
    edge = block * (len(needle) // block + 2)  # a block edge after the first
    for cut in range(len(needle) + 1):
        # The needle starts `cut` bytes before the edge, preceded by lines and part of its own line.
        before = edge - cut
        filler = (b"x" * 5 + b"\n") * (before // 6) + b"y" * (before % 6)
        data = filler + needle + b"}\n" + b'"run_20260101_000000_1c6e3ec"\n'
        assert data.index(needle) + cut == edge
        with blocks_of(block):
            got = list(_lines.matching_lines(io.BytesIO(data), needle))
        start = data.rindex(b"\n", 0, len(filler)) + 1 if b"\n" in filler else 0
        assert got == [(start, data[start : data.index(b"}\n") + 2])], cut


def test_the_last_line_without_a_newline_is_found_and_kept_as_it_is() -> None:
    data = b'{"a": "other"}\n{"a": "want"}\n{"a": "want", "cut'
    with blocks_of(8):
        got = list(_lines.matching_lines(io.BytesIO(data), b'"want"'))
    assert got == [(15, b'{"a": "want"}\n'), (29, b'{"a": "want", "cut')]


def test_an_empty_stream_holds_no_lines() -> None:
    assert list(_lines.matching_lines(io.BytesIO(b""), b"x")) == []
    assert list(_lines.matching_lines(io.BytesIO(b""), b"x", head=b"x\n")) == [(0, b"x\n")]


@pytest.mark.parametrize("needle", [b"", b"a\nb"])
def test_a_needle_that_cannot_be_on_one_line_is_refused(needle: bytes) -> None:
    with pytest.raises(ValueError, match="non-empty bytes without a newline"):
        list(_lines.matching_lines(io.BytesIO(b"a\nb\n"), needle))


def test_an_empty_needle_filters_nothing_and_lines_keep_their_numbers(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(line(document([span("a")])) + line(document([span("b")])) + b"{oops\n")
    with pytest.raises(TraceFormatError, match=r"t\.jsonl:3: not valid JSON"):
        list(iter_spans(path, contains=b""))


# --- through iter_spans: what a load sees -----------------------------------------------------------

# A line of the wanted run, of another run, or broken (a JSON syntax error) of either.
KINDS = st.sampled_from(["want", "other", "broken other"])


def export_line(kind: str, i: int) -> bytes:
    run = "want" if kind.endswith("want") else "other"
    text = line(document([span(f"{run}{i}", span_id=f"{i + 1:016x}", attributes={"run": run, "pad": "p" * i})]))
    return text[:-2] + b" !!!\n" if kind.startswith("broken") else text  # "!!!" where its last "}" was


@settings(max_examples=150, deadline=None)
@given(
    kinds=st.lists(KINDS, min_size=1, max_size=25), broken_at=st.none() | st.integers(0, 25), block=st.integers(1, 600)
)
def test_the_filter_parses_exactly_the_wanted_lines_and_names_a_broken_one_by_number(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str], broken_at: int | None, block: int
) -> None:
    if broken_at is not None:
        kinds = [*kinds[:broken_at], "broken want", *kinds[broken_at:]]
    path = tmp_path_factory.mktemp("filter") / "export.jsonl"
    path.write_bytes(b"".join(export_line(kind, i) for i, kind in enumerate(kinds)))
    wanted = [f"want{i}" for i, kind in enumerate(kinds) if kind == "want"]
    with blocks_of(block):
        if "broken want" not in kinds:
            assert [s.name for s in iter_spans(path, contains=b'"want"')] == wanted
            return
        number = kinds.index("broken want") + 1
        with pytest.raises(TraceFormatError, match=rf"export\.jsonl:{number}: not valid JSON") as info:
            list(iter_spans(path, contains=b'"want"'))
    assert info.value.line == number


@pytest.mark.parametrize("compress", [None, gzip.compress, zstandard.ZstdCompressor().compress])
def test_compressed_exports_filter_to_the_same_spans_across_block_edges(
    tmp_path: Path, compress: Callable[[bytes], bytes] | None
) -> None:
    kinds = ["other", "want", "other", "other", "want", "want", "other"] * 20
    data = b"".join(export_line(kind, i) for i, kind in enumerate(kinds))
    path = tmp_path / "export.jsonl"
    path.write_bytes(data if compress is None else compress(data))
    with blocks_of(333):
        spans = list(iter_spans(path, contains=b'"want"'))
    assert [s.name for s in spans] == [f"want{i}" for i, kind in enumerate(kinds) if kind == "want"]
    start = data.rindex(b"\n", 0, data.index(b'"want1"')) + 1
    assert spans[0].origin == f"{path} at byte {start}"


def test_a_torn_last_line_of_the_wanted_run_warns_across_a_block_edge(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    body = b"".join(export_line(kind, i) for i, kind in enumerate(["want", "other", "want"]))
    torn = export_line("want", 3)
    path.write_bytes(body + torn[:-40])
    with blocks_of(len(body) + 10), pytest.warns(SpanReplayWarning, match=r"export\.jsonl:4: the last line is cut"):
        assert [s.name for s in iter_spans(path, contains=b'"want"')] == ["want0", "want2"]


def test_a_file_that_grows_while_read_is_read_to_its_new_end(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    path.write_bytes(b"".join(export_line("want" if i % 2 else "other", i) for i in range(200)))
    spans = iter_spans(path, contains=b'"want"')
    with blocks_of(512):
        first = next(spans)
        with path.open("ab") as out:  # the Collector appends while the run is loaded
            out.write(b"".join(export_line("want", i) for i in range(200, 210)))
        rest = [s.name for s in spans]
    assert [first.name, *rest] == [f"want{i}" for i in range(1, 200, 2)] + [f"want{i}" for i in range(200, 210)]


def test_a_file_cut_short_while_read_ends_the_read_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "export.jsonl"
    lines = [export_line("want", i) for i in range(2000)]
    path.write_bytes(b"".join(lines))
    # Inside line 1801 just past its run id: far past what the first blocks read, and past
    # the megabyte the file's own buffer reads ahead.
    cut = len(b"".join(lines[:1800])) + lines[1800].index(b'"want"') + 10
    assert cut > 2 << 20
    spans = iter_spans(path, contains=b'"want"')
    with blocks_of(512):
        first = next(spans)
        with path.open("r+b") as out:
            out.truncate(cut)  # rotated or rewritten under the reader
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            rest = [s.name for s in spans]
    assert [first.name, *rest] == [f"want{i}" for i in range(1800)]
    assert [str(w.message) for w in seen] == [
        f"{path}:1801: the last line is cut short (the writer was stopped while writing it); read everything before it."
    ]


# --- through load: one run among others ---------------------------------------------------------


def test_a_run_id_quoted_inside_another_runs_line_loads_only_the_runs_own_spans(
    trace_dir: Path, tmp_path: Path
) -> None:
    record_agent("run_a")
    record_agent("run_b")
    expected = {r: spanreplay.load(trace_dir, r) for r in ("run_a", "run_b")}
    body = collector_lines([trace_dir / "run_a.jsonl", trace_dir / "run_b.jsonl"], seed=11, per_line=2)
    # Another service's span whose attribute value is exactly run_a: its line holds the needle "run_a".
    mention = line(document([span("audit", attributes={"audited.run": "run_a", "note": 'see "run_a"'})], "auditor"))
    export = tmp_path / "export.jsonl"
    export.write_bytes(mention + b"".join(body[:5]) + mention + b"".join(body[5:]) + mention)
    assert export.read_bytes().count(b'"run_a"') > 3
    for run_id, log in expected.items():
        assert spanreplay.load(export, run_id) == log
    with blocks_of(700):
        assert spanreplay.load(export, "run_a") == expected["run_a"]

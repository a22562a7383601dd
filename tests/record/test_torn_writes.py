"""A write the kernel takes only part of (a full disk) never glues later lines onto half a line.

The partial writes are real: a child process lowers its file-size limit
(RLIMIT_FSIZE, with SIGXFSZ ignored) to a few bytes past the end of the trace
file, so the kernel writes the first part of the next line and refuses the
rest with EFBIG, as it does with ENOSPC on a full disk. Then the limit goes back
up and the run records on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

import spanreplay

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="needs RLIMIT_FSIZE and SIGXFSZ")

# The child: records run "before" whole, then run "torn" whose second step meets the
# file-size limit part way through its line, then two more steps with the limit lifted.
_RECORD = textwrap.dedent(
    """
    import logging, os, resource, signal, sys
    import spanreplay

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death at the limit
    trace_dir = sys.argv[1]
    spanreplay.configure(trace_dir=trace_dir)

    @spanreplay.tool
    def fetch(n: int) -> str:
        return f"page {n} " + "x" * 3000

    with spanreplay.record(agent="before") as before:
        fetch(100)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    with spanreplay.record(agent="torn") as run:
        fetch(0)
        path = os.path.join(trace_dir, run.run_id + ".jsonl")
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 700, hard))
        fetch(1)  # its line is longer than 700 bytes: written in part, then EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        fetch(2)
        fetch(3)
    print(before.run_id, run.run_id)
    """
)


def _record(trace_dir: Path) -> tuple[str, str, str]:
    done = subprocess.run(
        [sys.executable, "-c", _RECORD, str(trace_dir)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "SPANREPLAY_MODE": "record"},
    )
    before, torn = done.stdout.split()
    return before, torn, done.stderr


def test_a_line_cut_short_by_the_file_size_limit_is_cut_back_and_the_next_steps_land_whole(tmp_path: Path) -> None:
    trace_dir = tmp_path / "traces"
    _, torn, stderr = _record(trace_dir)
    lines = (trace_dir / f"{torn}.jsonl").read_bytes().split(b"\n")
    assert lines[-1] == b""  # the file ends on a whole line
    for line in lines[:-1]:
        orjson.loads(line)  # each one whole: no half line, nothing glued to one
    # One warning, naming the file and saying it still ends on a whole line; no traceback.
    assert stderr.count("WARNING") == 1, stderr
    assert f"{trace_dir / torn}.jsonl" in stderr
    assert "File too large" in stderr
    assert "The file still ends on a whole line." in stderr
    assert "Traceback" not in stderr


def _seqs(path: Path) -> list[int]:
    """The seq of every boundary span in the file, read line by line as JSON."""
    seqs = []
    for line in path.read_bytes().splitlines():
        for resource in orjson.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    for attribute in span["attributes"]:
                        if attribute["key"] == "spanreplay.seq":
                            seqs.append(int(attribute["value"]["intValue"]))
    return seqs


def test_only_the_step_that_met_the_full_disk_is_lost_and_the_other_run_is_untouched(tmp_path: Path) -> None:
    trace_dir = tmp_path / "traces"
    before, torn, _ = _record(trace_dir)
    # Step 2 is what the full disk cost; the steps before and after it are whole lines.
    assert _seqs(trace_dir / f"{torn}.jsonl") == [1, 3, 4]
    assert sorted((s.run_id, s.steps) for s in spanreplay.runs(trace_dir)) == sorted([(before, 1), (torn, 3)])
    # The run that lost a step is refused, fail closed, with a sentence naming the gap ...
    with pytest.raises(spanreplay.TraceFormatError, match=rf"Run {torn} .* missing the spans at seq 2 of 4"):
        spanreplay.load(trace_dir, run_id=torn)
    # ... and the run beside it in the folder loads as recorded.
    assert [(event.seq, orjson.loads(event.input_json)) for event in spanreplay.load(trace_dir, run_id=before)] == [
        (1, {"n": 100})
    ]


# The child for the case the file cannot be cut back: another writer appends between the
# parts of the line (the same run id recorded by two processes). Its bytes must survive.
_SHARED = textwrap.dedent(
    """
    import os, resource, signal, sys
    from spanreplay.recording.exporters._appends import LineFile

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    path = sys.argv[1]
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    other = os.open(path, os.O_WRONLY | os.O_APPEND)

    def write(fd, data):
        # The real write; after the kernel took only part of the line, another writer
        # appends its own line, and the limit then refuses the rest of ours outright.
        count = os.write(fd, data)
        if count < len(data):
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            os.write(other, b'{"other": "writer"}\\n')
            resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path), hard))
        return count

    lines = LineFile(fd, write=write)
    lines.write_line(b'{"line": 1}\\n')
    resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path) + 5, hard))
    try:
        lines.write_line(b'{"line": 2, "padding": "' + b"y" * 100 + b'"}\\n')
    except OSError as error:
        print("failed", error.errno, lines.torn)
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    lines.write_line(b'{"line": 3}\\n')
    print("torn after", lines.torn)
    """
)


def test_a_half_line_that_another_writer_appended_after_is_kept_and_the_next_line_starts_fresh(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", _SHARED, str(path)], capture_output=True, text=True, check=True, env=os.environ
    )
    assert "failed 27 True" in done.stdout  # EFBIG, and the half line could not be cut off
    assert "torn after False" in done.stdout
    lines = path.read_bytes().split(b"\n")
    # Our first line whole; then our half line, which the other writer's line was glued to
    # (its bytes kept: cutting back would have removed them); then our next line, whole.
    assert lines[0] == b'{"line": 1}'
    assert lines[1] == b'{"lin' + b'{"other": "writer"}'
    # The newline the next write began with, after the other writer's own.
    assert lines[2] == b""
    assert lines[3] == b'{"line": 3}'
    assert lines[4:] == [b""]


def test_a_line_cut_short_with_no_other_writer_is_cut_back_to_the_line_before(tmp_path: Path) -> None:
    path = tmp_path / "alone.jsonl"
    script = _SHARED.replace('os.write(other, b\'{"other": "writer"}\\n\')', "pass")
    done = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True, env=os.environ
    )
    assert "failed 27 False" in done.stdout
    assert path.read_bytes() == b'{"line": 1}\n{"line": 3}\n'

"""What files a source names: one file with its rotated backups, a directory's files, a glob's matches, stdin.

A file named on its own must be a trace, and it brings its rotated backups (the
Collector's rotation names) along, since a run written across a rotation is in
both. A directory is read recursively, skipping hidden files and directories; a
glob is expanded by Python, not the shell, so a quoted pattern works too. Which
of the files hold traces is for the reader to tell, from their content.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path

from spanreplay.errors import TraceFormatError

# The source that names standard input.
STDIN = "-"
STDIN_NAME = "<stdin>"
_GLOB_CHARS = frozenset("*?[")
# The Collector's file rotation (lumberjack): traces.json -> traces-2024-05-01T10-00-00.000.json.
_ROTATED = r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}\.\d{3}"
_COMPRESSED_SUFFIXES = ("", ".gz", ".zst")


def expand(source: str | os.PathLike[str]) -> list[str]:
    """The files a source names: itself, a directory's files (recursively), a glob's matches."""
    return source_files(source)[0]


def source_files(source: str | os.PathLike[str]) -> tuple[list[str], bool]:
    """The files, and whether the user named this one file (so it must be a trace)."""
    text = os.fspath(source)
    if text == STDIN:
        return [STDIN], True
    if "\0" in text:
        raise TraceFormatError(
            f"{text!r} is not a path (it holds a NUL character); pass a trace file, a directory or a glob."
        )
    path = Path(text)
    if path.is_dir():
        files = sorted(
            str(p)
            for p in path.rglob("*")
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
        )
        if not files:
            raise TraceFormatError(
                f"Directory {text} holds no trace files; record a run first (spanreplay demo) or "
                "point at the directory the traces were written to (default ./traces).",
                source=text,
            )
        return files, False
    if path.exists():
        # A file, or a pipe such as bash's <(zcat runs.jsonl.gz); a Collector file brings its backups.
        return [*rotated_backups(path), text], True
    if _GLOB_CHARS & set(text):
        files = sorted(p for p in glob.glob(text, recursive=True) if os.path.isfile(p))
        if not files:
            raise TraceFormatError(
                f"The pattern {text} matches no files; check the path and quote the pattern.", source=text
            )
        return files, False
    raise TraceFormatError(
        f"No such file or directory: {text}; pass a trace file, a directory, a glob or - for stdin.", source=text
    )


def rotated_backups(path: Path) -> list[str]:
    """The backups the Collector's rotation made of the file at ``path``, oldest first.

    The Collector's file exporter rotates ``traces.json`` to
    ``traces-2024-05-01T10-00-00.000.json`` (the time it was rotated) beside it;
    a run that was being written across a rotation is in both.
    """
    if not path.is_file():
        return []  # a pipe, a device: no siblings to look for
    stem, suffix = path.stem, path.suffix
    pattern = re.compile(
        re.escape(stem) + _ROTATED + re.escape(suffix) + "(?:" + "|".join(map(re.escape, _COMPRESSED_SUFFIXES)) + ")"
    )
    try:
        siblings = [p for p in path.parent.iterdir() if pattern.fullmatch(p.name) and p.is_file()]
    except OSError:
        return []
    # The timestamp sorts as text: the oldest first.
    return [str(p) for p in sorted(siblings, key=lambda p: p.name)]

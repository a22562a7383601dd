"""Readers: every trace format spanreplay loads, behind one ``iter_spans``.

Each format has its own module; ``_sources`` opens files, directories, globs and
stdin and sniffs the format from the content.
"""

from ._base import SpanReplayWarning
from ._sources import expand, iter_spans, read_file

__all__ = ["SpanReplayWarning", "expand", "iter_spans", "read_file"]

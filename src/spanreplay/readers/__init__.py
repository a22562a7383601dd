"""Readers: every trace format spanreplay loads, behind one ``iter_spans``.

Each format has its own module (``_otlp_json``, ``_jaeger_json``) that turns one
parsed document into ``SpanRecord``s through the checked accessors of ``_base``;
``_sources`` opens files, directories, globs, gzip and stdin, sniffs the format
from the content and words every failure as a ``TraceFormatError``; ``_lines``
streams JSON lines and skips, unparsed, those without a run id.
"""

from ._base import SpanReplayWarning
from ._sources import expand, iter_spans, read_file

__all__ = ["SpanReplayWarning", "expand", "iter_spans", "read_file"]

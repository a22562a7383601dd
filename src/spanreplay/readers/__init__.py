"""Readers: every trace format spanreplay loads, behind one ``iter_spans``.

Each format has its own module that turns one parsed document or message into
``SpanRecord``s: ``_otlp_json`` (through the checked accessors of ``_base``;
``_otlp_json_typed`` decodes plain OTLP/JSON lines straight into msgspec structs
first, and leaves any other line to it), ``_jaeger_json``, ``_otlp_proto`` (the
official protobuf classes); ``documents`` tells a parsed document's format and
hands it to the right one. ``_listing`` tells the files a source names
(a file with its rotated backups, a directory, a glob, stdin); ``_sources``
opens them, unwraps gzip and zstd (``_zstd``), sniffs the format from the
content and words every failure as a ``TraceFormatError``; ``_json_lines``
reads JSON lines and skips a damaged one; ``_lines`` streams JSON lines and
skips, unparsed, those without a run id; ``_damage``
is what a read skipped (a damaged line, an unreadable file) and the runs it held; ``_records``
splits the Collector's length-prefixed records; ``writers`` writes spans
back out as OTLP for ``spanreplay convert``. Where spans are read from (files,
stdin, Jaeger and Tempo, Postgres) is ``spanreplay.sources``.
"""

from ._base import Incomplete, MalformedTrace, SpanReplayWarning, warn
from ._damage import Damage, DamageHook, listed_damage
from ._listing import STDIN, expand
from ._sources import iter_spans, read_file
from .documents import document_spans

__all__ = [
    "STDIN",
    "Damage",
    "DamageHook",
    "Incomplete",
    "MalformedTrace",
    "SpanReplayWarning",
    "document_spans",
    "expand",
    "iter_spans",
    "listed_damage",
    "read_file",
    "warn",
]

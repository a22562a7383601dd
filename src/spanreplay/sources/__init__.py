"""Sources: where runs are read back from, behind one protocol.

``open_source`` (``registry``) turns what the user typed into a ``Source``
(``protocol``) of the kind ``source_kind`` (``kinds``) says it names: trace
files and stdin (``files``, through the format readers of
``spanreplay.readers``), Jaeger and Tempo (``backends``), Postgres
(``spanreplay.sources.postgres.source``). Span sources build their EventLogs and run
listings with ``runlog``. ``spanreplay.load()`` and ``spanreplay.runs()`` and
the CLI read every source through here; ``runs()`` gets its cost columns from
``spanreplay.cost``.
"""

from .kinds import SourceKind, is_postgres_dsn, source_kind
from .log_builder import build_log
from .protocol import Source, SpanSource
from .registry import open_source
from .runlog import RUN_MARKER, SpanTap, summaries

__all__ = [
    "RUN_MARKER",
    "Source",
    "SourceKind",
    "SpanSource",
    "SpanTap",
    "build_log",
    "is_postgres_dsn",
    "open_source",
    "source_kind",
    "summaries",
]

"""The one place a source string becomes a Source: ``open_source``.

A new kind of source is a class that keeps ``protocol.Source`` (and
``SpanSource`` when it holds spans), a ``SourceKind`` that ``kinds.source_kind``
recognises, and one line below that opens it.
"""

from __future__ import annotations

import os

from .backends import BackendSource
from .files import FileSource, StdinSource
from .kinds import SourceKind, source_kind
from .protocol import Source


def open_source(source: str | os.PathLike[str]) -> Source:
    """The source ``source`` names: a Postgres DSN, a Jaeger or Tempo URL, ``-``, or trace files.

    Nothing is read yet, except that a backend URL is parsed (and refused when malformed).
    """
    name = os.fspath(source)
    kind = source_kind(name)
    if kind is SourceKind.POSTGRES:
        # Imported here: psycopg is an optional dependency, needed only for this kind.
        from .postgres.source import PostgresSource

        return PostgresSource(name)
    if kind is SourceKind.BACKEND:
        return BackendSource(name)
    if kind is SourceKind.STDIN:
        return StdinSource()
    return FileSource(source)

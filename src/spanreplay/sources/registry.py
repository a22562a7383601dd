"""The one place a source string becomes a Source: ``open_source``.

A new kind of source is a class that keeps ``protocol.Source`` (and
``SpanSource`` when it holds spans), plus one line below that recognises it.
"""

from __future__ import annotations

import os

from spanreplay.readers import STDIN

from .backends import SCHEMES as BACKEND_SCHEMES
from .backends import BackendSource
from .files import FileSource, StdinSource
from .protocol import Source

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def open_source(source: str | os.PathLike[str]) -> Source:
    """The source ``source`` names: a Postgres DSN, a Jaeger or Tempo URL, ``-``, or trace files.

    Nothing is read yet, except that a backend URL is parsed (and refused when malformed).
    """
    name = os.fspath(source)
    if name.startswith(POSTGRES_SCHEMES):
        # Imported here: psycopg is an optional dependency, needed only for this kind.
        from .postgres.source import PostgresSource

        return PostgresSource(name)
    if name.startswith(BACKEND_SCHEMES):
        return BackendSource(name)
    if name == STDIN:
        return StdinSource()
    return FileSource(source)

"""What kind of source a string names: the one place that tells them apart.

``open_source`` dispatches on ``source_kind``, and so does every command that
treats one kind differently (``prune`` deletes Postgres rows, ``export-test``
refuses Postgres, ``check`` refuses stdin): they agree with it by asking the
same function. Asking imports nothing optional (psycopg is imported only to open
a Postgres source).
"""

from __future__ import annotations

import enum
import os
from typing import Final

from spanreplay.readers import STDIN

__all__ = [
    "BACKEND_SCHEMES",
    "POSTGRES_SCHEMES",
    "SourceKind",
    "is_backend",
    "is_postgres_dsn",
    "source_kind",
]

# A DSN in URL form names Postgres by its scheme; the key=value form is not a
# trace source anyone would mistake for a path, but it is not sniffed either.
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
# A backend's query API: Jaeger's or Tempo's, over HTTP or HTTPS.
BACKEND_SCHEMES: Final = ("jaeger+http://", "jaeger+https://", "tempo+http://", "tempo+https://")


class SourceKind(enum.Enum):
    """The kinds of source ``open_source`` opens."""

    POSTGRES = "postgres"
    BACKEND = "backend"
    STDIN = "stdin"
    FILES = "files"


def source_kind(source: str | os.PathLike[str]) -> SourceKind:
    """The kind of source ``source`` names; anything that is no other kind is trace files."""
    name = os.fspath(source)
    if not isinstance(name, str):
        return SourceKind.FILES
    if name.startswith(POSTGRES_SCHEMES):
        return SourceKind.POSTGRES
    if name.startswith(BACKEND_SCHEMES):
        return SourceKind.BACKEND
    if name == STDIN:
        return SourceKind.STDIN
    return SourceKind.FILES


def is_postgres_dsn(source: str | os.PathLike[str]) -> bool:
    """True for ``postgresql://...`` and ``postgres://...`` sources."""
    return source_kind(source) is SourceKind.POSTGRES


def is_backend(source: str | os.PathLike[str]) -> bool:
    """True for ``jaeger+http(s)://...`` and ``tempo+http(s)://...`` sources."""
    return source_kind(source) is SourceKind.BACKEND

"""What a source is: a place runs are read back from.

``load()``, ``runs()`` and the CLI never ask what kind of source they hold; the
registry (``sources.registry``) opens one from what the user typed, and every
kind answers the same two questions. Sources that hold spans (files, stdin,
Jaeger, Tempo) also give them all out, for cost attribution and conversion.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from spanreplay.model.events import EventLog, RunSummary
from spanreplay.model.spans import SpanRecord

from .runlog import SpanTap


@runtime_checkable
class Source(Protocol):
    """A trace source, opened.

    ``name`` is how messages name it (a path, ``-``, a backend URL without
    credentials, a database as ``describe`` writes it).
    """

    name: str

    def runs(self, tap: SpanTap | None = None) -> list[RunSummary]:
        """The runs it holds, oldest first (without the cost columns); ``tap`` sees each span read.

        Raises:
            TraceFormatError: the source cannot be read (the message names the file and line).
        """
        ...

    def load(self, run_id: str | None = None) -> EventLog:
        """One run's EventLog: ordered by seq, duplicates dropped, payloads verified.

        Raises:
            RunNotFoundError: the run is not there (the message lists those that are), or no
                run id was given and the source holds several runs or none.
            TraceFormatError: the source cannot be read, or spans of a completed run were lost.
        """
        ...


@runtime_checkable
class SpanSource(Source, Protocol):
    """A source that holds spans, not rows: files, stdin, Jaeger, Tempo."""

    def spans(self) -> Iterator[SpanRecord]:
        """Every span it holds that a run may own (a backend: the traces of runs that ended)."""
        ...

"""``load()`` and ``runs()``: the public way in to every trace source.

Both open the source through ``spanreplay.sources`` (the one registry of source
kinds); ``runs()`` then has ``spanreplay.cost`` add each run's model calls,
tokens and USD, read from the same pass over the spans.
"""

from __future__ import annotations

import os

from spanreplay.model.events import EventLog, RunSummary
from spanreplay.sources import open_source

Source = str | os.PathLike[str]

__all__ = ["load", "runs"]


def runs(source: Source) -> list[RunSummary]:
    """The spanreplay runs in a source, oldest first. Empty when it holds none.

    Args:
        source: a trace file, a directory, a glob, ``-`` for stdin, a Postgres
            DSN (``postgresql://...``), or a backend's query API
            (``jaeger+http://host:16686``, ``tempo+http://host:3200``: the runs
            that ended in its recent traces, see ``docs/formats.md``).

    Raises:
        TraceFormatError: the source cannot be read (the message names the file and line).
    """
    # Imported here so that `import spanreplay` does not load the price table's code.
    from spanreplay.cost import runs_with_costs

    return runs_with_costs(source)


def load(source: Source, run_id: str | None = None) -> EventLog:
    """The EventLog of one run, ordered by seq, duplicates dropped, payloads verified.

    Args:
        source: a trace file, a directory, a glob, ``-`` for stdin, a Postgres
            DSN (``postgresql://...``), or a backend's query API
            (``jaeger+http://host:16686``, ``tempo+http://host:3200``).
        run_id: the run to load; may be left out when the source holds exactly one.
            From a backend it may also be the id of the trace that holds the run.

    Raises:
        RunNotFoundError: the run is not in the source (the message lists those that are),
            or no run id was given and the source holds several runs or none.
        TraceFormatError: the source cannot be read, or spans of a completed run were lost.
        PayloadIntegrityError: a payload was cut or altered on the way.
        SchemaVersionError: the run was recorded by a newer spanreplay.
    """
    return open_source(source).load(run_id)

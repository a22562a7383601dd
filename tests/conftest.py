"""Shared fixtures: every test records into its own directory through its own provider.

The Postgres fixtures (``pg_server``, ``pg_dsn``) are in helpers/postgres.py.

``edge_date_now`` moves the clock for tests whose outcome depends on the date.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import time_machine
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay

# Fixtures more than one folder's tests ask for, kept in modules of their own.
pytest_plugins = ["helpers.postgres", "helpers.masking_sinks"]

# Dates where arithmetic on "now" goes wrong: a window that reaches into the month
# (or two) before, a day that is another year in local time, a day most years lack.
EDGE_DATES = {
    "month-start": datetime(2027, 3, 1, 9, 0, tzinfo=UTC),
    "year-end": datetime(2026, 12, 31, 23, 30, tzinfo=UTC),
    "leap-day": datetime(2028, 2, 29, 12, 0, tzinfo=UTC),
}
# UTC+14 (the Line Islands; a POSIX rule, so no zone database is needed): at 23:30
# UTC on 31 December it is already the next year here, so code that reads a date
# in local time instead of UTC fails the year-end case.
FAR_EAST_TZ = "LINT-14"


@pytest.fixture(params=list(EDGE_DATES.values()), ids=list(EDGE_DATES))
def edge_date_now(request: pytest.FixtureRequest) -> Iterator[datetime]:
    """The clock set to each of ``EDGE_DATES`` in turn (and ticking on from there), in a UTC+14 zone.

    A test that asks for it runs three times, whatever today's date is. It moves
    this process's clock only: a child process still reads the real one, so such
    tests run the CLI in-process or pass explicit dates.
    """
    zone = os.environ.get("TZ")
    os.environ["TZ"] = FAR_EAST_TZ
    time.tzset()
    try:
        # A timestamp, not the aware datetime: given a UTC datetime, time-machine would set TZ to UTC too.
        with time_machine.travel(request.param.timestamp(), tick=True):
            yield request.param
    finally:
        if zone is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = zone
        time.tzset()


@pytest.fixture
def memory_exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(memory_exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """A private SDK provider; an in-memory exporter sees what a production exporter would."""
    tp = TracerProvider(resource=Resource.create({"service.name": "test-agent"}))
    tp.add_span_processor(SimpleSpanProcessor(memory_exporter))
    yield tp
    tp.shutdown()


@pytest.fixture
def trace_dir(tmp_path: Path, provider: TracerProvider) -> Path:
    """spanreplay configured to write this test's runs under tmp_path/traces, strictly."""
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    return directory

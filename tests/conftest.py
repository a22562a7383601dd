"""Shared fixtures: every test records into its own directory through its own provider."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay

FIXTURES = Path(__file__).parent / "fixtures"
THIRD_PARTY = FIXTURES / "third_party"


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
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, strict=True)
    return directory

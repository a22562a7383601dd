"""Every place spanreplay writes a run to, read back whole: the masking tests look in all of them.

The ``sinks`` fixture (a plugin of tests/conftest.py) configures spanreplay to write a
trace file, OTLP/HTTP to a local receiver and Postgres rows, strictly (internal
failures raise), with placeholder masking and with keyed masking in turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.otlp_receivers import HttpReceiver
from spanreplay.masking import MaskingConfig


class Sinks:
    """What spanreplay wrote: the trace files, the OTLP request bodies and the Postgres rows."""

    def __init__(self, trace_dir: Path, receiver: HttpReceiver, provider: TracerProvider, dsn: str) -> None:
        self.trace_dir = trace_dir
        self.receiver = receiver
        self.provider = provider
        self.dsn = dsn

    def everything(self) -> list[tuple[str, bytes]]:
        """The bytes of every trace file, every OTLP request and every row of every table."""
        import psycopg

        self.provider.force_flush()
        files = [(f"file {p.name}", p.read_bytes()) for p in sorted(self.trace_dir.rglob("*")) if p.is_file()]
        requests = [(f"otlp request {i}", r.body) for i, r in enumerate(self.receiver.requests)]
        rows: list[tuple[str, bytes]] = []
        with psycopg.connect(self.dsn) as conn:
            tables = [
                name
                for (name,) in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                )
            ]
            for table in tables:
                query = f"SELECT row_to_json(t)::text FROM {table} t ORDER BY 1"
                rows += [(f"{table} row {i}", row.encode()) for i, (row,) in enumerate(conn.execute(query))]
        assert files, "no trace file was written"
        assert requests, "no OTLP request arrived"
        assert any(where.startswith("agent_runs") for where, _ in rows), "no agent_runs row was written"
        return files + requests + rows


@pytest.fixture(params=["placeholders", "keyed"])
def sinks(
    request: pytest.FixtureRequest, pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Sinks]:
    """spanreplay writing a trace file, OTLP/HTTP to a local receiver and Postgres rows, strictly."""
    with HttpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        provider = TracerProvider(resource=Resource.create({"service.name": "masking-sinks"}))
        masking = MaskingConfig(key="project-key") if request.param == "keyed" else MaskingConfig()
        spanreplay.configure(
            trace_dir=tmp_path / "traces",
            tracer_provider=provider,
            otlp=True,
            postgres=pg_dsn,
            masking=masking,
            raise_internal_errors=True,
        )
        try:
            yield Sinks(tmp_path / "traces", receiver, provider, pg_dsn)
        finally:
            provider.shutdown()
            spanreplay.reset()

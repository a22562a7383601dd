"""What a backend receives over OTLP: the resource from the standard variables, the run id on every span."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue

from helpers.otlp_receivers import GrpcReceiver, HttpReceiver, spans_in
from spanreplay.recording.exporters._otlp_endpoint import resource

SCRIPT = textwrap.dedent(
    """
    import json, sys
    from opentelemetry import trace
    import spanreplay

    config = spanreplay.configure(trace_dir=sys.argv[1], raise_internal_errors=True)
    other = trace.get_tracer("an.http.client")

    @spanreplay.tool
    def fetch(url: str) -> str:
        # What an HTTP client instrumentation does inside a tool: its own span.
        with other.start_as_current_span("GET"):
            return url.upper()

    with spanreplay.record(agent="resourceful") as run:
        fetch("a")
        fetch("b")
    with other.start_as_current_span("outside any run"):
        pass
    config.provider.force_flush()
    print(json.dumps({"run_id": run.run_id, "stats": vars(config.otlp_processor.stats)}))
    """
)


def _record(tmp_path: Path, **env: str) -> dict[str, Any]:
    script = tmp_path / "agent_script.py"
    script.write_text(SCRIPT)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "SPANREPLAY_"))}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "traces")],
        capture_output=True,
        text=True,
        env={**clean, "OTEL_BSP_SCHEDULE_DELAY": "20", **env},
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    facts: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return facts


def _attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _value(kv) for kv in items}


def _value(kv: KeyValue) -> Any:
    return getattr(kv.value, kv.value.WhichOneof("value"))


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_the_backend_gets_the_resource_from_the_standard_variables_and_the_run_id_on_every_span(
    tmp_path: Path, protocol: str
) -> None:
    with HttpReceiver() if protocol == "http/protobuf" else GrpcReceiver() as receiver:
        facts = _record(
            tmp_path,
            OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url,
            OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
            OTEL_SERVICE_NAME="support-agent",
            OTEL_RESOURCE_ATTRIBUTES="service.version=1.4.2,deployment.environment.name=staging,team=search",
        )
        received = list(spans_in(receiver.requests))
    assert facts["stats"] == {"exported": 6, "dropped": 0, "failed_exports": 0}
    by_name: dict[str, list[dict[str, Any]]] = {}
    for resource_spans, span in received:
        got = _attributes(resource_spans.resource.attributes)
        assert got.pop("service.instance.id")  # the SDK's own, one per process
        assert got | {"telemetry.sdk.version": "-"} == {
            "service.name": "support-agent",
            "service.version": "1.4.2",
            "deployment.environment.name": "staging",
            "deployment.environment": "staging",
            "team": "search",
            "telemetry.sdk.language": "python",
            "telemetry.sdk.name": "opentelemetry",
            "telemetry.sdk.version": "-",
        }
        by_name.setdefault(span.name, []).append(_attributes(span.attributes))
    assert sorted((name, len(spans)) for name, spans in by_name.items()) == [
        ("GET", 2),
        ("execute_tool fetch", 2),
        ("invoke_agent resourceful", 1),
        ("outside any run", 1),
    ]
    # A search by run id finds the whole run, the other instrumentation's spans included.
    in_run = [a for name, spans in by_name.items() if name != "outside any run" for a in spans]
    assert {a["spanreplay.run.id"] for a in in_run} == {facts["run_id"]}
    assert "spanreplay.run.id" not in by_name["outside any run"][0]


def test_the_resource_without_variables_names_the_service_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    attributes = dict(resource().attributes)
    assert attributes["service.name"] == "agent"
    assert "deployment.environment" not in attributes
    assert "service.version" not in attributes


@pytest.mark.parametrize(
    ("service_name", "env", "expected"),
    [
        (None, {"OTEL_RESOURCE_ATTRIBUTES": "service.name=from-attributes"}, "from-attributes"),
        (None, {"OTEL_SERVICE_NAME": "from-name", "OTEL_RESOURCE_ATTRIBUTES": "service.name=x"}, "from-name"),
        ("from-code", {"OTEL_SERVICE_NAME": "from-name"}, "from-code"),
    ],
)
def test_the_service_name_comes_from_code_then_otel_service_name_then_the_resource_attributes(
    monkeypatch: pytest.MonkeyPatch, service_name: str | None, env: dict[str, str], expected: str
) -> None:
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert resource(service_name).attributes["service.name"] == expected


@pytest.mark.parametrize("given", ["deployment.environment", "deployment.environment.name"])
def test_the_deployment_environment_is_set_under_its_old_and_new_names(
    monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", f"{given}=prod")
    attributes = resource().attributes
    assert attributes["deployment.environment"] == attributes["deployment.environment.name"] == "prod"


def test_resource_attributes_given_in_code_override_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.version=1,deployment.environment.name=dev")
    attributes = resource("svc", {"service.version": "2"}).attributes
    assert (attributes["service.version"], attributes["deployment.environment"]) == ("2", "dev")

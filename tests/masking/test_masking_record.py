"""Masking in record and replay: no secret reaches a file, an exporter or a processor.

Every run here goes through the real pipeline: ``spanreplay.configure`` on an SDK
``TracerProvider``, the durable trace file, an in-memory exporter standing where
a production exporter would, and the OTLP protobuf encoding an OTLP exporter
sends. Replays load the trace file written by the recording.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
import spanreplay.masking._pipeline
from helpers.masking_samples import emails, payloads_with_secrets, planted
from spanreplay import semconv as sc
from spanreplay.masking import MaskingConfig, keep
from spanreplay.run.salts import SALT_DIR


class CustomerError(RuntimeError):
    pass


def everything_recorded(trace_dir: Path, exporter: InMemorySpanExporter) -> list[tuple[str, bytes]]:
    """Every byte that left the process: the trace files, the OTLP request, the exported spans."""
    spans = exporter.get_finished_spans()
    exported = orjson.dumps(
        [{"name": s.name, "attributes": dict(s.attributes or {}), "events": [e.name for e in s.events]} for s in spans]
    )
    # The run's salt file (owner-only, beside the trace file) is the key to the checks, not a record.
    out = [
        (str(path), path.read_bytes())
        for path in sorted(trace_dir.rglob("*"))
        if path.is_file() and SALT_DIR not in path.parts
    ]
    out.append(("otlp protobuf request", encode_spans(spans).SerializeToString()))
    out.append(("in-memory exporter", exported))
    return out


@pytest.fixture
def recording() -> Iterator[tuple[Path, InMemorySpanExporter]]:
    """A provider with an in-memory exporter and a trace dir, configured strictly."""
    with tempfile.TemporaryDirectory() as tmp:
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "masking-test"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        directory = Path(tmp) / "traces"
        spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
        try:
            yield directory, exporter
        finally:
            provider.shutdown()


def _record_with_secrets(payload: Any, message: str, secret_in_error: str) -> str:
    """A run whose tool input, output, error, message content and run error hold secrets."""

    def lookup() -> Any:
        return payload

    def fail() -> None:
        raise CustomerError(f"no account for {secret_in_error}")

    content = orjson.dumps([{"role": "user", "parts": [{"type": "text", "content": message}]}]).decode()

    def agent() -> None:
        spanreplay.boundary("tool", "lookup", {"query": message}, lookup)
        spanreplay.boundary(
            "model", "claude", {"messages": [message]}, lambda: {"text": message},
            attributes={sc.GEN_AI_INPUT_MESSAGES: content},
        )  # fmt: skip
        with pytest.raises(CustomerError):
            spanreplay.boundary("tool", "charge", {"note": "x"}, fail)
        raise CustomerError(f"giving up on {secret_in_error}")

    run = spanreplay.record(agent="masking")
    with pytest.raises(CustomerError), run:
        agent()
    return run.run_id


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads_with_secrets(), planted(), planted())
def test_no_planted_secret_reaches_a_file_an_otlp_request_or_an_exporter(
    sample: tuple[Any, list[str]], in_message: tuple[str, str], in_error: tuple[str, str]
) -> None:
    payload, secrets = sample
    message, message_secret = in_message
    error_text, error_secret = in_error
    secrets = [*secrets, message_secret, error_secret]
    with tempfile.TemporaryDirectory() as tmp:
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        directory = Path(tmp) / "traces"
        spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
        try:
            _record_with_secrets(payload, message, error_text)
            recorded = everything_recorded(directory, exporter)
        finally:
            provider.shutdown()
    assert len(recorded) == 3
    for where, data in recorded:
        for secret in secrets:
            assert secret.encode() not in data, f"{secret!r} reached {where}"


def test_the_span_names_what_was_masked_and_by_which_rule(recording: tuple[Path, InMemorySpanExporter]) -> None:
    directory, exporter = recording

    def lookup() -> dict[str, Any]:
        return {"customer": {"email": "jane@example.com", "phone": "+44 20 7946 0958"}, "status": "ok"}

    with spanreplay.record(agent="masking") as run:
        spanreplay.boundary("tool", "lookup", {"id": 7, "api_key": "abc123"}, lookup)
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool lookup"]
    attributes = dict(span.attributes or {})
    assert orjson.loads(attributes[sc.INPUT + sc.MASKED_SUFFIX]) == [{"path": "api_key", "rule": "field:api_key"}]
    assert orjson.loads(attributes[sc.OUTPUT + sc.MASKED_SUFFIX]) == [
        {"path": "customer.email", "rule": "email"},
        {"path": "customer.phone", "rule": "phone"},
    ]
    event = spanreplay.load(directory, run.run_id).events[0]
    assert event.input == {"id": 7, "api_key": "<api_key>"}
    assert event.output == {"customer": {"email": "<email>", "phone": "<phone>"}, "status": "ok"}


def test_an_unmasked_payload_carries_no_masked_attribute(recording: tuple[Path, InMemorySpanExporter]) -> None:
    _, exporter = recording
    with spanreplay.record(agent="masking"):
        spanreplay.boundary("tool", "weather", {"city": "Oslo"}, lambda: {"temp": 3})
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "execute_tool weather"]
    assert not [name for name in (span.attributes or {}) if name.endswith(sc.MASKED_SUFFIX)]


def test_the_project_key_is_never_recorded(tmp_path: Path, provider: TracerProvider) -> None:
    key = "project-key-7f3a9c2e51b04d86"
    directory = tmp_path / "traces"
    spanreplay.configure(
        trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=MaskingConfig(key=key)
    )
    with spanreplay.record(agent="masking") as run:
        spanreplay.boundary("tool", "lookup", {"q": "jane@example.com"}, lambda: "jane@example.com")
    data = b"".join(p.read_bytes() for p in directory.rglob("*.jsonl"))
    assert key.encode() not in data
    assert b"jane@example.com" not in data
    event = spanreplay.load(directory, run.run_id).events[0]
    assert re.fullmatch(r"<email:[0-9a-f]{16}>", event.output)


def test_generated_values_a_detector_would_fire_in_are_recorded_and_replayed_as_they_were(
    tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # About one uuid in a thousand has digit groups the phone or card detector reads
    # as a number ("0503-4114-81"); masked, replay could not give the uuid back.
    drawn = uuid.UUID("ca902803-0503-4114-81cd-be04c19dcb68")
    assert spanreplay.masking.Masker(MaskingConfig()).scan_text(str(drawn))[1] == ("phone",)
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)

    def agent() -> uuid.UUID:
        return spanreplay.uuid4()

    with monkeypatch.context() as patched:
        patched.setattr(uuid, "uuid4", lambda: drawn)
        with spanreplay.record(agent="generated") as run:
            assert agent() == drawn
    assert spanreplay.load(directory, run.run_id).events[0].output == str(drawn)
    with spanreplay.replay(directory, run.run_id):
        assert agent() == drawn


def test_masking_can_be_turned_off(tmp_path: Path, provider: TracerProvider) -> None:
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=False)
    with spanreplay.record(agent="masking") as run:
        spanreplay.boundary("tool", "lookup", {"q": "jane@example.com"}, lambda: "ok")
    assert spanreplay.load(directory, run.run_id).events[0].input == {"q": "jane@example.com"}


def test_a_bad_masking_setting_is_refused(provider: TracerProvider) -> None:
    with pytest.raises(spanreplay.ConfigurationError, match="MaskingConfig"):
        spanreplay.configure(trace_dir=None, tracer_provider=provider, masking="on")  # type: ignore[arg-type]


# --- replay stays exact under masking --------------------------------------------------------


def support_agent(customer_id: int) -> str:
    """A tool returns a customer's email; the agent puts it into its next tool input."""
    customer = spanreplay.boundary("tool", "find_customer", {"id": customer_id}, lambda: _crm(customer_id))
    email = customer["email"]
    spanreplay.boundary("tool", "send_email", {"to": email, "body": f"Hello, we wrote to {email}."}, lambda: "sent")
    owner = spanreplay.boundary("tool", "account_owner", {"id": customer_id}, lambda: _owner(customer_id))
    # A branch that compares two masked values: equal pseudonyms keep it on course.
    if owner["email"] == email:
        return spanreplay.boundary("tool", "notify", {"who": "self", "to": email}, lambda: "ok")
    return spanreplay.boundary("tool", "notify", {"who": "owner", "to": owner["email"]}, lambda: "ok")


def _crm(customer_id: int) -> dict[str, Any]:
    return {"id": customer_id, "name": "Jane Roe", "email": f"jane.roe.{customer_id}@example.com"}


def _owner(customer_id: int) -> dict[str, Any]:
    return {"email": f"jane.roe.{customer_id}@example.com" if customer_id % 2 else "boss@example.com"}


@pytest.mark.parametrize("key", ["project-key", None], ids=["keyed", "placeholders"])
@pytest.mark.parametrize("customer_id", [1, 2], ids=["owner-is-customer", "owner-differs"])
def test_a_masked_email_passed_from_one_tool_to_the_next_replays_without_divergence(
    tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch, key: str | None, customer_id: int
) -> None:
    monkeypatch.delenv("SPANREPLAY_MASK_KEY", raising=False)
    directory = tmp_path / "traces"
    config = MaskingConfig(key=key)
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=config)
    with spanreplay.record(agent="support") as run:
        recorded_result = support_agent(customer_id)
    log = spanreplay.load(directory, run.run_id)
    sent = log.events[1]
    assert "@example.com" not in sent.input_json.decode()
    assert sent.input["to"] in sent.input["body"]  # the same value, masked alike in both places

    if key is None and customer_id == 2:
        # Without a key both emails become "<email>": the comparison that told them
        # apart when recording now finds them equal, and replay says where.
        with pytest.raises(spanreplay.ReplayDivergenceError, match="notify"), spanreplay.replay(log) as replaying:
            support_agent(customer_id)
        assert replaying.outcome == "diverged"
        return
    with spanreplay.replay(log) as replaying:
        assert support_agent(customer_id) == recorded_result
    assert replaying.outcome == "completed"


def test_a_kept_field_replays_its_real_value(tmp_path: Path, provider: TracerProvider) -> None:
    directory = tmp_path / "traces"
    config = MaskingConfig(rules=[keep("status", kind="tool", key="ticket")])
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=config)

    def agent() -> str:
        ticket = spanreplay.boundary(
            "tool", "ticket", {"id": 1}, lambda: {"status": "escalate to ops@example.com", "by": "ops@example.com"}
        )
        if ticket["status"].startswith("escalate to ops@"):
            return spanreplay.boundary("tool", "page", {"team": "ops"}, lambda: "paged")
        return "closed"

    with spanreplay.record(agent="triage") as run:
        assert agent() == "paged"
    log = spanreplay.load(directory, run.run_id)
    assert log.events[0].output == {"status": "escalate to ops@example.com", "by": "<email>"}
    with spanreplay.replay(log) as replaying:
        assert agent() == "paged"
    assert replaying.outcome == "completed"


def test_a_recorded_failure_with_personal_data_in_its_message_reproduces(
    tmp_path: Path, provider: TracerProvider
) -> None:
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)

    def agent() -> None:
        customer = spanreplay.boundary("tool", "find", {"id": 3}, lambda: {"id": 3})
        raise CustomerError(f"customer {customer['id']} at jane@example.com has no plan")

    with pytest.raises(CustomerError), spanreplay.record(agent="failing") as run:
        agent()
    log = spanreplay.load(directory, run.run_id)
    assert log.run.error is not None
    assert log.run.error.message == "customer 3 at <email> has no plan"
    with pytest.raises(CustomerError), spanreplay.replay(log) as replaying:
        agent()
    assert replaying.outcome == "reproduced"


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(emails(), min_size=2, max_size=6, unique=True))
def test_any_chain_of_masked_emails_replays(addresses: list[str]) -> None:
    def agent() -> None:
        found = spanreplay.boundary("tool", "list", {}, lambda: [{"email": a} for a in addresses])
        for row in found:
            spanreplay.boundary("tool", "mail", {"to": row["email"], "cc": found[0]["email"]}, lambda: "ok")

    with tempfile.TemporaryDirectory() as tmp:
        provider = TracerProvider()
        directory = Path(tmp) / "traces"
        spanreplay.configure(
            trace_dir=directory, tracer_provider=provider, masking=MaskingConfig(key="k"), raise_internal_errors=True
        )
        try:
            with spanreplay.record(agent="mailer") as run:
                agent()
            log = spanreplay.load(directory, run.run_id)
            with spanreplay.replay(log) as replaying:
                agent()
        finally:
            provider.shutdown()
    assert replaying.outcome == "completed"
    assert not any(a.encode() in e.input_json or a.encode() in (e.output_json or b"") for e in log for a in addresses)


def test_spanreplay_show_says_which_paths_were_masked_by_which_rule(tmp_path: Path, provider: TracerProvider) -> None:
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    with spanreplay.record(agent="masking") as run:
        spanreplay.boundary("tool", "lookup", {"token": "t0k3n"}, lambda: {"contact": "jane@example.com"})
    show = [sys.executable, "-m", "spanreplay.cli", "show", str(directory), run.run_id, "--seq", "1"]
    as_json = subprocess.run([*show, "--json"], capture_output=True, text=True, check=True, timeout=60)
    assert orjson.loads(as_json.stdout)["masked"] == {
        "input": [{"path": "token", "rule": "field:token"}],
        "output": [{"path": "contact", "rule": "email"}],
    }
    printed = subprocess.run(
        show, capture_output=True, text=True, check=True, timeout=60, env={**os.environ, "COLUMNS": "200"}
    )
    assert "masked in the input: token (field:token)" in printed.stdout
    assert "masked in the output: contact (email)" in printed.stdout
    assert "jane@example.com" not in printed.stdout + as_json.stdout


def test_replay_refuses_masking_other_than_the_recording_s_naming_both(tmp_path: Path) -> None:
    provider = TracerProvider()
    spanreplay.configure(
        trace_dir=tmp_path,
        tracer_provider=provider,
        masking=MaskingConfig(key="recording key"),
        raise_internal_errors=True,
    )
    with spanreplay.record(agent="keys") as run:
        spanreplay.boundary("tool", "lookup", {"email": "ana@example.com"}, lambda: "found")
    log = spanreplay.load(tmp_path, run.run_id)
    assert log.run.masking is not None
    assert log.run.masking.startswith("keyed:")

    # Another key would pseudonymize the current inputs differently: refused up front.
    spanreplay.configure(
        trace_dir=tmp_path,
        tracer_provider=provider,
        masking=MaskingConfig(key="another key"),
        raise_internal_errors=True,
    )
    with pytest.raises(
        spanreplay.ConfigurationError, match=r"recorded with the mask key whose id is [0-9a-f]{8}.*SPANREPLAY_MASK_KEY"
    ):
        spanreplay.replay(log)
    spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, masking=False, raise_internal_errors=True)
    with pytest.raises(spanreplay.ConfigurationError, match="replay would mask with masking off"):
        spanreplay.replay(log)

    # The recording's own key replays it.
    spanreplay.configure(
        trace_dir=tmp_path,
        tracer_provider=provider,
        masking=MaskingConfig(key="recording key"),
        raise_internal_errors=True,
    )
    with spanreplay.replay(log) as replaying:
        assert spanreplay.boundary("tool", "lookup", {"email": "ana@example.com"}, lambda: "real") == "found"
    assert replaying.outcome == "completed"


def test_a_run_recorded_with_32_bit_tokens_still_replays(
    tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPANREPLAY_MASK_KEY", raising=False)
    # The masker as it was: 8 hex digits a token, and "keyed:{key id}" on the run span.
    with monkeypatch.context() as old:
        old.setattr(spanreplay.masking._pipeline, "TOKEN_HEX", 8)
        spanreplay.configure(
            trace_dir=tmp_path,
            tracer_provider=provider,
            masking=MaskingConfig(key="old key", engine="python"),
            raise_internal_errors=True,
        )
        with spanreplay.record(agent="old") as run:
            spanreplay.boundary("tool", "send", {"to": "ann@example.com"}, lambda: "sent")
    log = spanreplay.load(tmp_path, run.run_id)
    assert log.run.masking is not None
    assert re.fullmatch(r"keyed:[0-9a-f]{8}", log.run.masking)
    assert re.fullmatch(r"<email:[0-9a-f]{8}>", log.events[0].input["to"])

    # Today's masker writes 64-bit tokens and says so on the run span ...
    spanreplay.configure(
        trace_dir=tmp_path, tracer_provider=provider, masking=MaskingConfig(key="old key"), raise_internal_errors=True
    )
    current = spanreplay.masking.Masker(MaskingConfig(key="old key"))
    assert current.fingerprint == log.run.masking + ":64"
    # ... and replays the old run with the old tokens: the same address is served, another diverges.
    with spanreplay.replay(log) as replaying:
        assert spanreplay.boundary("tool", "send", {"to": "ann@example.com"}, lambda: "live") == "sent"
    assert replaying.outcome == "completed"
    with pytest.raises(spanreplay.InputChangedError), spanreplay.replay(log):
        spanreplay.boundary("tool", "send", {"to": "bob@example.com"}, lambda: "live")

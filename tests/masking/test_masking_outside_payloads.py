"""Values outside the payloads: names, ids, stop sequences and other instrumentations' spans.

Secrets are planted where a payload does not reach (a tool's key, the agent's
name, an exception's class name, object keys that are not plain strings, the
stop sequences, the Anthropic SDK's own content attributes); the bytes of the
trace file, of the OTLP requests and of the failure alert must hold none of
them, and a run masked this way still replays.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import orjson
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, reply, serve, text, tool_use
from helpers.otlp_receivers import HttpReceiver
from spanreplay import semconv as sc
from spanreplay.errors import ConfigurationError
from spanreplay.masking import MaskingConfig
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import iter_spans

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

EMAIL = "jane.roe@example.com"
API_KEY = "sk-ant-api03-test-key-0123456789"
CARD = 4111111111111111
OTHER_CARD = 5555555555554444
SECRETS = (EMAIL, API_KEY, str(CARD), str(OTHER_CARD))


class Label(str):
    """A str subclass used as an object key."""


class Code(int):
    """An int subclass used as an object key."""


def leaky_error() -> type[RuntimeError]:
    """An exception class whose name holds a secret (a class made at run time from data)."""
    cls = type("NoAccount", (RuntimeError,), {})
    cls.__qualname__ = f"NoAccount for {EMAIL}"
    return cls


LeakyError = leaky_error()


class Recorded:
    def __init__(self, trace_dir: Path, receiver: HttpReceiver, provider: TracerProvider) -> None:
        self.trace_dir = trace_dir
        self.receiver = receiver
        self.provider = provider

    def everything(self) -> list[tuple[str, bytes]]:
        """Every byte spanreplay wrote: the trace files and the OTLP request bodies."""
        self.provider.force_flush()
        out = [(str(p), p.read_bytes()) for p in sorted(self.trace_dir.rglob("*")) if p.is_file()]
        out += [(f"otlp request {i}", r.body) for i, r in enumerate(self.receiver.requests)]
        return out

    def spans(self) -> list[SpanRecord]:
        return list(iter_spans(self.trace_dir))


@pytest.fixture(params=["placeholders", "keyed"])
def recorded(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorded]:
    """spanreplay writing a trace file and sending OTLP/HTTP to a local receiver, strictly."""
    with HttpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        provider = TracerProvider(resource=Resource.create({"service.name": "outside-payloads"}))
        masking = MaskingConfig(key="project-key") if request.param == "keyed" else MaskingConfig()
        spanreplay.configure(
            trace_dir=tmp_path / "traces",
            tracer_provider=provider,
            otlp=True,
            masking=masking,
            raise_internal_errors=True,
        )
        try:
            yield Recorded(tmp_path / "traces", receiver, provider)
        finally:
            provider.shutdown()
            spanreplay.reset()


def assert_nothing_raw(recorded: Recorded, *also: str) -> None:
    everything = recorded.everything()
    assert any(where.startswith("otlp") for where, _ in everything)
    for where, data in everything:
        for secret in (*SECRETS, *also):
            assert secret.encode() not in data, f"{secret!r} reached {where}"


def agent_with_secrets_outside_payloads() -> None:
    spanreplay.boundary(
        "tool",
        f"lookup {EMAIL}",
        {"by_card": {CARD: "x", Code(OTHER_CARD): "y"}, Label(EMAIL): "z"},
        lambda: {Label(EMAIL): 1, CARD: 2, Code(OTHER_CARD): 3, "card": float(OTHER_CARD), "price": 12.5},
    )
    spanreplay.boundary(
        "model",
        "claude",
        {"messages": ["hi"]},
        lambda: {"text": "ok"},
        attributes={sc.GEN_AI_REQUEST_STOP_SEQUENCES: (f"END {EMAIL}", "STOP")},
    )

    def fail() -> None:
        raise LeakyError("no account")

    with pytest.raises(LeakyError):
        spanreplay.boundary("tool", "charge", {"amount": 3}, fail)
    raise LeakyError("giving up")


def test_no_secret_outside_the_payloads_reaches_the_file_or_otlp(
    recorded: Recorded, caplog: pytest.LogCaptureFixture
) -> None:
    run = spanreplay.record(agent=f"support for {EMAIL} with {API_KEY}")
    with caplog.at_level(logging.ERROR, logger="spanreplay.alerts"), pytest.raises(LeakyError), run:
        agent_with_secrets_outside_payloads()

    assert_nothing_raw(recorded)
    assert "Run " in caplog.text  # the failure alert was logged, with the class name masked
    for secret in SECRETS:
        assert secret not in caplog.text
    spans = {span.name: span for span in recorded.spans()}
    # Names stay readable where no detector fires, and are masked only where one does.
    (lookup,) = [span for name, span in spans.items() if name.startswith("execute_tool lookup <email")]
    assert lookup.attributes[sc.KEY] == lookup.attributes[sc.GEN_AI_TOOL_NAME] == lookup.name.split(" ", 1)[1]
    assert lookup.attributes[sc.CALL_ID] == f"tool:{lookup.attributes[sc.KEY]}#0"
    assert "execute_tool charge" in spans
    stops = spans["chat claude"].attributes[sc.GEN_AI_REQUEST_STOP_SEQUENCES]
    assert stops[1] == "STOP"
    assert stops[0].startswith("END <email")
    (root,) = [span for span in spans.values() if sc.RUN_STATUS in span.attributes]
    assert root.attributes[sc.ERROR_TYPE].startswith("NoAccount for <email")
    assert root.attributes[sc.GEN_AI_AGENT_NAME].startswith("support for <email")


def test_a_run_id_that_holds_a_secret_is_refused_without_repeating_it(recorded: Recorded) -> None:
    with pytest.raises(ConfigurationError, match="anthropic_api_key") as raised:
        spanreplay.record(run_id=API_KEY)
    assert API_KEY not in str(raised.value)
    spanreplay.record(run_id="ticket-4711").__enter__().__exit__(None, None, None)  # a plain id is fine
    assert (recorded.trace_dir / "ticket-4711.jsonl").exists()


def customer_agent() -> dict[str, Any]:
    """Tools keyed by data: what each returns comes back in replay under the same (masked) key."""
    first = spanreplay.boundary("tool", f"lookup {EMAIL}", {"q": 1}, lambda: {"plan": "pro"})
    second = spanreplay.boundary("tool", f"lookup {EMAIL}", {"q": 2}, lambda: {"plan": "team"})
    other = spanreplay.boundary("tool", "lookup someone@example.org", {"q": 1}, lambda: {"plan": "free"})
    return {"first": first, "second": second, "other": other}


def test_a_run_whose_tool_keys_were_masked_replays(recorded: Recorded) -> None:
    with spanreplay.record(agent="keys") as run:
        answer = customer_agent()
    assert_nothing_raw(recorded)
    call_ids = [span.attributes[sc.CALL_ID] for span in recorded.spans() if span.name.startswith("execute_tool")]
    if spanreplay.settings().masker.keyed:  # type: ignore[union-attr]
        # Keyed pseudonyms tell the two customers apart: two keys, as when recording.
        assert len({call_id.rsplit("#", 1)[0] for call_id in call_ids}) == 2
    else:
        # Without a key both mask to <email>: one key, the calls numbered in order.
        assert call_ids == ["tool:lookup <email>#0", "tool:lookup <email>#1", "tool:lookup <email>#2"]

    with spanreplay.replay(recorded.trace_dir, run.run_id) as replaying:
        assert customer_agent() == answer
    assert replaying.outcome == "completed"


def test_a_recorded_failure_whose_class_name_was_masked_reproduces(recorded: Recorded) -> None:
    def agent() -> None:
        spanreplay.boundary("tool", "fetch", {"q": 1}, lambda: 1)
        raise LeakyError("the account is gone")

    run = spanreplay.record(agent="failing")
    with pytest.raises(LeakyError), run:
        agent()
    assert_nothing_raw(recorded)

    replaying = spanreplay.replay(recorded.trace_dir, run.run_id)
    with pytest.raises(LeakyError), replaying:
        agent()
    assert replaying.outcome == "reproduced"


def test_replay_of_a_masked_key_diverges_when_the_key_changes(recorded: Recorded) -> None:
    with spanreplay.record(agent="keys") as run:
        customer_agent()

    def other_agent() -> None:
        spanreplay.boundary("tool", "lookup nobody@example.net", {"q": 1}, lambda: None)

    replaying = spanreplay.replay(recorded.trace_dir, run.run_id)
    with pytest.raises(spanreplay.ReplayDivergenceError), replaying:
        other_agent()
    assert replaying.outcome == "diverged"


# --- other instrumentations' spans -------------------------------------------------------


def claude_turn(client: anthropic.Anthropic) -> str:
    message = client.messages.create(
        model=MODEL,
        max_tokens=64,
        system=f"The customer is {EMAIL}; our key is {API_KEY}.",
        stop_sequences=[f"Regards, {EMAIL}"],
        messages=[{"role": "user", "content": f"Please refund {EMAIL}, card {CARD}."}],
    )
    return "".join(block.text for block in message.content if block.type == "text")


@pytest.mark.parametrize("ours", [True, False], ids=["with-our-instrumentation", "sdk-spans-only"])
def test_the_sdk_s_own_content_spans_are_masked_before_the_file_and_otlp(
    recorded: Recorded, server: MessagesAPIServer, ours: bool
) -> None:
    server.script(reply(text(f"Refunded; a receipt goes to {EMAIL}."), tool_use("refund", {"email": EMAIL}, "toolu_1")))
    option: Any = {"tracer_provider": recorded.provider, "traces": {"content_mode": "content"}}
    instrumentor = None
    if ours:
        from spanreplay.instrumentation.anthropic import AnthropicInstrumentor

        instrumentor = AnthropicInstrumentor()
        instrumentor.instrument(zero_code=False, sdk_spans=True)
    try:
        with (
            anthropic.Anthropic(base_url=server.url, api_key=API_KEY, open_telemetry=option) as client,
            spanreplay.record(agent="sdk") as run,
        ):
            assert claude_turn(client) == f"Refunded; a receipt goes to {EMAIL}."  # the agent saw the real values
    finally:
        if instrumentor is not None:
            instrumentor.uninstrument()

    assert_nothing_raw(recorded)
    (sdk,) = [span for span in recorded.spans() if span.name == "anthropic.messages.create"]
    # The content attributes are kept, masked: the span still says what was asked and answered.
    assert "<email" in sdk.attributes["gen_ai.input.messages"]
    assert "<email" in sdk.attributes["gen_ai.output.messages"]
    assert "<anthropic_api_key>" in sdk.attributes["gen_ai.system_instructions"]
    assert sdk.attributes[sc.GEN_AI_REQUEST_STOP_SEQUENCES][0].startswith("Regards, <email")
    assert sdk.attributes[sc.RUN_ID] == run.run_id


def test_spans_outside_any_run_are_masked_on_their_way_to_otlp(recorded: Recorded) -> None:
    tracer = recorded.provider.get_tracer("another.instrumentation")
    with tracer.start_as_current_span("chat", attributes={"gen_ai.request.model": "m"}) as span:
        span.set_attribute(sc.GEN_AI_INPUT_MESSAGES, orjson.dumps([{"role": "user", "parts": [EMAIL]}]).decode())
        span.set_attribute("gen_ai.tool.call.arguments", f'{{"key": "{API_KEY}"}}')
        span.set_attribute("gen_ai.prompt.0.content", f"write to {EMAIL}")
        span.add_event("exception", {"exception.message": f"refused {EMAIL}", "exception.type": "ValueError"})
        span.set_attribute("gen_ai.usage.input_tokens", 12)
    everything = recorded.everything()
    assert [where for where, _ in everything if where.startswith("otlp")]
    for where, data in everything:
        for secret in (EMAIL, API_KEY):
            assert secret.encode() not in data, f"{secret!r} reached {where}"
    (received,) = [s for s in recorded.receiver.spans() if s.name == "chat"]
    names = {kv.key for kv in received.attributes}
    assert {sc.GEN_AI_INPUT_MESSAGES, "gen_ai.tool.call.arguments", "gen_ai.usage.input_tokens"} <= names
    assert [e.name for e in received.events] == ["exception"]


def test_masking_switched_off_leaves_other_spans_as_they_are(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from spanreplay.recording.exporters._foreign import guarded

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("other").start_as_current_span("chat") as span:
        span.set_attribute(sc.GEN_AI_INPUT_MESSAGES, f"to {EMAIL}")
    (finished,) = exporter.get_finished_spans()
    off = spanreplay.masking.Masker(MaskingConfig(enabled=False))
    assert guarded(finished, lambda: off) is finished
    on = guarded(finished, lambda: spanreplay.masking.Masker(MaskingConfig()))
    assert on is not finished
    assert (on.attributes or {})[sc.GEN_AI_INPUT_MESSAGES] == "to <email>"
    assert (finished.attributes or {})[sc.GEN_AI_INPUT_MESSAGES] == f"to {EMAIL}"  # the original is untouched

    def broken() -> spanreplay.masking.Masker:
        raise RuntimeError("no masker")

    dropped = guarded(finished, broken)
    assert sc.GEN_AI_INPUT_MESSAGES not in (dropped.attributes or {})
    provider.shutdown()


@pytest.mark.parametrize("renamed", ["span", "event"])
def test_a_sdk_that_no_longer_reads_the_replaced_fields_still_gets_masked_content(
    renamed: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A release that keeps a span's (or an event's) attributes under another name: the
    # copy's _attributes would be written where nothing reads it, and the original content
    # would pass through. The masked span is then built through the public constructors.
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from spanreplay.recording.exporters._foreign import guarded

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with provider.get_tracer("other").start_as_current_span("chat") as span:
        span.set_attribute(sc.GEN_AI_INPUT_MESSAGES, f"to {EMAIL}")
        span.add_event("turn", {sc.GEN_AI_OUTPUT_MESSAGES: f"from {EMAIL}"})
    provider.shutdown()
    (finished,) = exporter.get_finished_spans()
    cls: type[Any] = ReadableSpan if renamed == "span" else Event
    (event,) = finished.events
    for obj in (finished, event):
        obj.__dict__["_renamed_attributes"] = obj._attributes  # type: ignore[union-attr]
    # Its constructor stores what its property reads; spans made before keep the new name.
    stored = property(lambda self: self.__dict__.get("_renamed_attributes", self.__dict__.get("_attributes")))
    monkeypatch.setattr(cls, "attributes", stored)

    masked = guarded(finished, lambda: spanreplay.masking.Masker(MaskingConfig()))

    assert (masked.attributes or {})[sc.GEN_AI_INPUT_MESSAGES] == "to <email>"
    assert (masked.events[0].attributes or {})[sc.GEN_AI_OUTPUT_MESSAGES] == "from <email>"
    assert EMAIL not in repr(dict(masked.attributes or {})) + repr(dict(masked.events[0].attributes or {}))
    assert (finished.attributes or {})[sc.GEN_AI_INPUT_MESSAGES] == f"to {EMAIL}"  # the original is untouched


# --- Postgres ----------------------------------------------------------------------------


def test_no_secret_outside_the_payloads_reaches_the_postgres_rows(pg_dsn: str, tmp_path: Path) -> None:
    import psycopg

    provider = TracerProvider()
    spanreplay.configure(
        trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn
    )
    try:
        run = spanreplay.record(agent=f"support for {EMAIL}")
        with pytest.raises(LeakyError), run:
            agent_with_secrets_outside_payloads()
        with spanreplay.record(agent="keys") as keyed_run:
            answer = customer_agent()
        provider.force_flush()
        with psycopg.connect(pg_dsn) as conn:
            rows = conn.execute(
                "SELECT row_to_json(s)::text FROM agent_steps s UNION ALL SELECT row_to_json(r)::text FROM agent_runs r"
            ).fetchall()
            keys = {row[0] for row in conn.execute("SELECT key FROM agent_steps WHERE run_id = %s", (run.run_id,))}
        assert len(rows) == 3 + 3 + 2  # every step of both runs, and both runs
        for (row,) in rows:
            for secret in SECRETS:
                assert secret not in row
        masker = spanreplay.settings().masker
        assert masker is not None
        assert keys == {"claude", "charge", masker.scan_text(f"lookup {EMAIL}")[0]}

        # Replay from Postgres: the masked keys match.
        with spanreplay.replay(pg_dsn, keyed_run.run_id) as replaying:
            assert customer_agent() == answer
        assert replaying.outcome == "completed"
    finally:
        provider.shutdown()

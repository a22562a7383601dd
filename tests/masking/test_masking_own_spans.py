"""Everything on spanreplay's own spans is masked, whoever set it (issue 25, item 3).

Inside a ``@tool`` or a run, ``trace.get_current_span()`` is spanreplay's span:
code writes on it with ``set_attribute``, ``add_event`` and ``record_exception``.
The secrets matrix: every built-in detector's sample value (and the forms that
once leaked: AWS secret keys, Slack ``xapp-`` tokens, URL passwords) x every way
onto a span (those three, and the secret as an attribute key or an event
attribute key, at the run and in a tool, plus a tool's ``bytes`` and ``str``
outputs) x every sink (the trace file, OTLP, Postgres) holds 0 raw values.
"""

from __future__ import annotations

import base64
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.masking_engines import FAST, PLAIN, PYTHON
from helpers.masking_samples import KINDS, written
from helpers.masking_sinks import Sinks

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n-----END RSA PRIVATE KEY-----"

# (form, the secret, the text it is written in): every built-in detector's sample, and the new forms.
FORMS: list[tuple[str, str, str]] = [
    ("email", "jane.doe@example.com", "mail jane.doe@example.com now"),
    ("phone", "+1 (415) 555-0132", "call +1 (415) 555-0132"),
    ("payment_card", "4111 1111 1111 1111", "card 4111 1111 1111 1111"),
    ("iban", "DE89 3704 0044 0532 0130 00", "pay DE89 3704 0044 0532 0130 00"),
    ("us_ssn", "123-45-6789", "ssn 123-45-6789"),
    ("ipv4", "203.0.113.7", "from 203.0.113.7"),
    ("ipv6", "2001:db8:85a3::8a2e:370:7334", "from 2001:db8:85a3::8a2e:370:7334 via"),
    ("anthropic_api_key", "sk-ant-api03-" + "Ab1_" * 10, "key sk-ant-api03-" + "Ab1_" * 10),
    ("openai_api_key", "sk-proj-" + "x9Y" * 12, "OPENAI_API_KEY=sk-proj-" + "x9Y" * 12),
    ("aws_access_key_id", "AKIAIOSFODNN7EXAMPLE", "aws AKIAIOSFODNN7EXAMPLE"),
    ("github_token", "ghp_" + "a1B2" * 9, "token ghp_" + "a1B2" * 9),
    (
        "github_pat",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    ),
    ("slack_token", "xoxb-123456789012-abcdefABCDEF", "slack xoxb-123456789012-abcdefABCDEF"),
    ("bearer_token", "9f8e7d6c5b4a3f2e1d0c", "Authorization: Bearer 9f8e7d6c5b4a3f2e1d0c"),
    ("jwt", JWT, f"t={JWT};"),
    ("private_key", "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo", f"key:\n{PEM}\n"),
    # The forms that leaked beside the claimed ones.
    ("aws_secret_named", AWS_SECRET, f"aws_secret_access_key = {AWS_SECRET}"),
    ("aws_secret_by_id", AWS_SECRET, f"AKIAIOSFODNN7EXAMPLE,{AWS_SECRET}"),
    (
        "slack_xapp",
        "xapp-1-A0123456789-1234567890123-abcdef0123456789",
        "xapp-1-A0123456789-1234567890123-abcdef0123456789",
    ),
    ("url_password", "s3cr3t-Pa55", "postgres://app:s3cr3t-Pa55@localhost:5432/db"),
    ("field_name", "hunter2-plain-words", "hunter2-plain-words"),  # secret by its attribute's name only
]

# The ways onto a span: in a tool, and (for the span calls) at the run's root span too.
WAYS = [
    "tool:set_attribute",
    "tool:add_event",
    "tool:attribute_key",
    "tool:record_exception",
    "tool:bytes_output",
    "tool:str_output",
    "run:set_attribute",
    "run:add_event",
    "run:attribute_key",
    "run:record_exception",
]


def write_on_current_span(way: str, name: str, text: str) -> None:
    span = trace.get_current_span()
    if name == "field_name":  # a secret only by the name it is set under
        span.set_attribute("app.db.password", text)
    elif way.endswith("set_attribute"):
        span.set_attribute(f"app.note.{name}", text)
        span.set_attribute(f"app.list.{name}", ("plain", text))
    elif way.endswith("attribute_key"):  # the secret in the name a value is set under
        span.set_attribute(f"app.{text}", 1)
        span.add_event("looked up", {f"app.{text}": "found", "app.detail": 1})
    elif way.endswith("add_event"):
        span.add_event(f"looked up {text}", {"app.detail": text, "app.bytes": text.encode()})
    else:
        try:
            raise ValueError(f"lookup failed for {text}")
        except ValueError as exc:
            span.record_exception(exc, {"app.password": text})


def forms(way: str) -> list[tuple[str, str, str]]:
    """The forms a way can carry: a secret known by its attribute's name only goes on as an attribute."""
    return [form for form in FORMS if form[0] != "field_name" or way.endswith("set_attribute")]


def agent(way: str) -> None:
    for name, _, text in forms(way):
        if way.startswith("run:"):
            write_on_current_span(way, name, text)
            continue

        tool_of(way, name, text)()


def tool_of(way: str, name: str, text: str) -> Any:
    """A tool without arguments (its input holds no secret) that writes ``text`` the ``way`` given."""

    @spanreplay.tool(name=f"lookup_{name}")
    def lookup() -> Any:
        if way == "tool:bytes_output":
            return text.encode()
        if way == "tool:str_output":
            return "found " + text
        write_on_current_span(way, name, text)
        return "ok"

    return lookup


def raw_forms(secret: str) -> list[bytes]:
    """The secret as a sink could hold it: as it is, and in base64 at each of the three alignments."""
    data = secret.encode()
    forms = [data]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + data)
        # Only the characters that do not depend on the bytes around it.
        start = (shift * 4 + 2) // 3 + 1 if shift else 0
        forms.append(encoded[start : len(encoded) - 4])
    return [form for form in forms if len(form) >= 8]


@pytest.mark.parametrize("way", WAYS)
def test_no_raw_secret_reaches_any_sink_whoever_set_it(sinks: Sinks, way: str) -> None:
    with spanreplay.record(agent="matrix"):
        agent(way)

    everything = sinks.everything()
    leaks = [
        (name, where)
        for name, secret, _ in forms(way)
        for where, data in everything
        if any(form in data for form in raw_forms(secret))
    ]
    assert leaks == []


def test_a_bytes_output_replays_as_bytes_masked(sinks: Sinks) -> None:
    @spanreplay.tool(name="read_file")
    def read_file() -> bytes:
        return b"\xff\xfeheader mail jane.doe@example.com key sk-ant-api03-" + b"Ab1_" * 10 + b" \x80 end"

    with spanreplay.record(agent="bytes", run_id="run_bytes_masked"):
        recorded = read_file()
    sinks.everything()

    with spanreplay.replay(sinks.trace_dir, "run_bytes_masked"):
        replayed = read_file()
    assert type(replayed) is bytes
    assert b"jane.doe@example.com" not in replayed
    assert b"sk-ant-" not in replayed
    assert replayed.startswith(b"\xff\xfeheader mail <email")
    assert replayed.endswith(b" \x80 end")
    assert recorded.startswith(b"\xff\xfeheader mail jane.doe")  # the agent got the real value


def test_masking_off_leaves_what_others_set_as_it_is(tmp_path: Path, provider: TracerProvider) -> None:
    spanreplay.configure(trace_dir=tmp_path / "traces", tracer_provider=provider, masking=False)
    try:

        @spanreplay.tool(name="note")
        def note() -> str:
            trace.get_current_span().set_attribute("enduser.id", "jane.doe@example.com")
            return "ok"

        with spanreplay.record(agent="off"):
            note()
        provider.force_flush()
        data = b"".join(p.read_bytes() for p in (tmp_path / "traces").rglob("*.jsonl"))
        assert b"jane.doe@example.com" in data
    finally:
        spanreplay.reset()


# --- bytes masking, on its own ------------------------------------------------------------

SECRET_TEXTS = st.sampled_from([text for _, _, text in FORMS if not text.startswith("hunter2")])
NOISE = st.binary(max_size=40)


@settings(max_examples=200, deadline=None)
@given(st.lists(NOISE | SECRET_TEXTS.map(str.encode), max_size=6).map(b"".join), st.booleans())
def test_masked_bytes_keep_their_type_hold_no_secret_and_mask_again_to_themselves(data: bytes, mutable: bool) -> None:
    value = bytearray(data) if mutable else data
    for masker in (PYTHON, FAST, PLAIN):
        masked, _ = masker.mask_bytes(value)
        assert type(masked) is type(value)
        again, fired = masker.mask_bytes(masked)
        assert again == masked
        assert fired == ()
        text = bytes(masked).decode("utf-8", "surrogateescape")
        assert masker.scan_text(text) == (text, ())  # nothing a detector finds is left
    assert PYTHON.mask_bytes(value) == FAST.mask_bytes(value)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200))
def test_bytes_without_anything_to_mask_come_back_as_they_are(data: bytes) -> None:
    masked, fired = PYTHON.mask_bytes(data)
    if not fired:
        assert masked is data


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(sorted(KINDS)).flatmap(lambda kind: KINDS[kind].map(lambda secret: (kind, secret))),
    st.binary(max_size=8).filter(lambda b: not any(chr(c) in string.ascii_letters + string.digits for c in b)),
)
def test_a_planted_secret_never_survives_bytes_masking(planted: tuple[str, str], noise: bytes) -> None:
    kind, secret = planted
    data = noise + b" " + written(kind, secret).encode() + b" " + noise
    masked, _ = FAST.mask_bytes(data)
    assert secret.encode() not in masked


def test_spans_the_sdk_starts_itself_are_masked_too(tmp_path: Path) -> None:
    # An attribute length limit makes spanreplay start its boundary spans through the SDK's
    # own start_span (as for the run span): what others set there is masked in place.
    from opentelemetry.sdk.trace import SpanLimits
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_attribute_length=100_000))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    spanreplay.configure(trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True)
    try:

        @spanreplay.tool(name="note")
        def note() -> str:
            span = trace.get_current_span()
            assert type(span).__name__ != "BoundarySpan"
            span.set_attribute("enduser.id", "jane.doe@example.com")
            span.add_event("sent to jane.doe@example.com", {"to": "jane.doe@example.com"})
            span.update_name("note for jane.doe@example.com")
            return "ok"

        with spanreplay.record(agent="sdk spans"):
            note()
        provider.force_flush()
        spans = exporter.get_finished_spans()
        assert len(spans) == 2
        for span in spans:
            assert "jane.doe" not in span.name
            assert all("jane.doe" not in str(value) for value in (span.attributes or {}).values())
            for event in span.events:
                assert "jane.doe" not in event.name
                assert all("jane.doe" not in str(value) for value in (event.attributes or {}).values())
        (tool,) = [span for span in spans if span.name.startswith("note")]
        assert tool.attributes is not None
        assert tool.attributes["enduser.id"] == "<email>"
        data = b"".join(p.read_bytes() for p in (tmp_path / "traces").rglob("*.jsonl"))
        assert b"jane.doe" not in data
    finally:
        provider.shutdown()
        spanreplay.reset()

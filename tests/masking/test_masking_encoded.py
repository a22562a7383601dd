"""Masking a payload from the JSON the span codec wrote for it.

The record path encodes each payload once and hands masking those bytes: the
payload gate reads them, and a payload it clears is recorded as encoded, neither
walked nor encoded again. That is only right if the gate lets through nothing
the full pipeline would change: these tests hold ``mask_encoded`` (gated, on the
codec's bytes, keys sorted or not) to the plain reference walk, which asks every
detector and every field-name rule (helpers/masking_reference.py), on both
engines, over payloads with secrets planted next to and across JSON escapes, in
keys and under credential fields.
"""

from __future__ import annotations

import string
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.masking_engines import needs_hyperscan
from helpers.masking_reference import reference_walk
from helpers.masking_samples import KINDS, emails, payloads_with_secrets, planted
from spanreplay import semconv as sc
from spanreplay.masking import FieldNames, Masker, MaskingConfig, hyperscan_available, mask, transform
from spanreplay.model import payloads as _payloads

ENGINES = ["python", "hyperscan"] if hyperscan_available() else ["python"]


def _maskers(engine: str) -> list[Masker]:
    return [
        # The defaults: every detector, the default field names.
        Masker(MaskingConfig(engine=engine, key="k")),
        # No field-name rules at all: only the detectors can fire.
        Masker(MaskingConfig(engine=engine, key="k", field_names=())),
        # A field-name rule of one's own, and path rules that apply to other boundaries
        # only (the gate still runs for a tool's payloads).
        Masker(
            MaskingConfig(
                engine=engine,
                key="",
                rules=[FieldNames(["ssn", "date_of_birth"]), mask("body.messages[*].content", kind="model")],
                disable={"ipv6"},
            )
        ),
    ]


MASKERS = [masker for engine in ENGINES for masker in _maskers(engine)]

# What JSON escapes (or writes as is): each becomes a sequence of several characters
# in the bytes the gate reads, beside or inside a secret.
ESCAPED = st.sampled_from(['"', "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x01", "\x1f", "\x7f", "/", "é", "\u2028"])
FIELD_KEYS = st.sampled_from(
    [
        "password", "PASSWORD", "api_key", "Api-Key", "x-api-key", "secret key", "client_secret", "token",
        "refreshToken", "Authorization", "cookie", "ssn", "date_of_birth", "credentials", "pass\nword", "to\"ken",
        "passwords", "tokenizer", "id", "note", "text", "é", "",
    ]
)  # fmt: skip


@st.composite
def escaped_secrets(draw: st.DrawFn) -> str:
    """A secret with escaped characters beside it, or one cutting through it."""
    secret = draw(st.sampled_from(sorted(KINDS)).flatmap(lambda kind: KINDS[kind]))
    escape = draw(st.lists(ESCAPED, min_size=1, max_size=3).map("".join))
    where = draw(st.sampled_from(["before", "after", "both", "inside"]))
    if where == "before":
        return escape + secret
    if where == "after":
        return secret + escape
    if where == "both":
        return escape + secret + escape
    cut = draw(st.integers(1, max(1, len(secret) - 1)))
    return secret[:cut] + escape + secret[cut:]


TEXT = st.one_of(
    escaped_secrets(),
    planted().map(lambda p: p[0]),
    st.text(alphabet=string.printable + "é\u2028\x00", max_size=30),
    emails(),
)
SCALAR = st.one_of(
    TEXT,
    st.integers(-(2**63), 2**64 - 1),
    st.sampled_from([4111111111111111, 5500005555555559, 10**11, 0]),  # card numbers as integers too
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
)
KEYS = st.one_of(FIELD_KEYS, TEXT, emails())
PAYLOADS = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(KEYS, inner, max_size=4),
    ),
    max_leaves=12,
)


def assert_gated_as_ungated(value: Any, *, kind: str = "tool", key: str = "lookup", part: str = "input") -> None:
    for masker in MASKERS:
        # Every detector asked about every string, every field-name rule about every key.
        expected, fired = reference_walk(masker, value)
        for encoded in (_payloads.encode_input(value), _payloads.encode_output(value)):
            got = masker.session().mask_encoded(kind, key, value, encoded, part=part)
            if not fired:
                assert got is None, f"{masker!r} masked what the full pipeline leaves as it is"
                assert expected == value
            else:
                assert got is not None, f"{masker!r} let through {fired} unmasked"
                assert (got.value, got.fired) == (expected, fired)
        # mask() (no bytes given) answers alike.
        public = masker.mask(kind, key, value, part=part)
        assert (public.value, public.fired) == (expected, fired)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PAYLOADS)
@example({"note": 'a\n"x@example.com'})
@example({"pass\nword": "hunter2hunter2"})
@example({"z": 4111111111111111, "a": "\x00"})
@example('"Bearer\\tabc.def.ghi"')
def test_a_payload_the_gate_clears_is_one_the_full_pipeline_leaves_as_it_is(value: Any) -> None:
    assert_gated_as_ungated(value)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payloads_with_secrets(), st.sampled_from(["input", "output", "error"]))
def test_payloads_with_planted_secrets_are_masked_alike_from_their_json(
    sample: tuple[Any, list[str]], part: str
) -> None:
    value, _ = sample
    assert_gated_as_ungated(value, part=part)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_clean_payload_is_answered_without_a_copy(engine: str) -> None:
    masker = Masker(MaskingConfig(engine=engine))
    value = {"query": "the order shipped on monday", "limit": 10}
    assert masker.session().mask_encoded("tool", "lookup", value, _payloads.encode_input(value)) is None


@pytest.mark.parametrize("engine", ENGINES)
def test_masking_turned_off_answers_none(engine: str) -> None:
    masker = Masker(MaskingConfig(engine=engine, enabled=False))
    value = {"password": "hunter2hunter2", "email": "a@example.com"}
    assert masker.session().mask_encoded("tool", "t", value, _payloads.encode_input(value)) is None


@needs_hyperscan
def test_a_path_rule_for_the_boundary_is_applied_whatever_the_bytes_say() -> None:
    # Path rules match places, not text: the gate cannot clear a payload they apply to.
    masker = Masker(MaskingConfig(engine="hyperscan", rules=[mask("user.name", kind="tool")]))
    value = {"user": {"name": "Ada"}}
    result = masker.session().mask_encoded("tool", "t", value, _payloads.encode_input(value))
    assert result is not None
    assert result.fired == (("user.name", "mask:user.name"),)


# --- through the record path ------------------------------------------------------------------


def _recorded(directory: Path, run_id: str) -> list[dict[str, Any]]:
    lines = (directory / f"{run_id}.jsonl").read_bytes().splitlines()
    spans = [span for line in lines for span in orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]]
    out = []
    for span in spans:
        attributes = {kv["key"]: next(iter(kv["value"].values())) for kv in span["attributes"]}
        if sc.CALL_ID in attributes:
            out.append(attributes)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(PAYLOADS, PAYLOADS)
def test_recorded_payloads_are_what_masking_then_encoding_gives(tmp_path_factory: Any, inp: Any, out: Any) -> None:
    # The span carries exactly what masking the value and then encoding it gives,
    # as it did when masking encoded each payload itself.
    directory = tmp_path_factory.mktemp("traces")
    provider = TracerProvider()
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    try:
        with spanreplay.record(agent="gate") as run:
            spanreplay.boundary("tool", "lookup", inp, lambda: out)
    finally:
        provider.shutdown()
    (attributes,) = _recorded(directory, run.run_id)
    masker = spanreplay.settings().masker
    assert masker is not None
    masked_in = masker.mask("tool", "lookup", inp, part="input")
    masked_out = masker.mask("tool", "lookup", out, part="output")
    assert attributes[sc.INPUT].encode() == _payloads.encode_input(masked_in.value)
    assert attributes[sc.OUTPUT].encode() == _payloads.encode_output(masked_out.value)
    for name, result in ((sc.INPUT, masked_in), (sc.OUTPUT, masked_out)):
        recorded = attributes.get(name + sc.MASKED_SUFFIX)
        assert (None if recorded is None else orjson.loads(recorded)) == (result.fired_records() or None)


class _Unreadable:
    """An object the codec cannot turn into JSON: its model_dump fails."""

    def model_dump(self, mode: str) -> Any:
        raise ValueError("no")


def test_a_payload_that_cannot_be_encoded_is_kept_as_a_marker_or_withheld(tmp_path: Path) -> None:
    provider = TracerProvider()
    spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider)  # not strict: failures are logged
    try:
        with spanreplay.record(agent="gate") as run:
            spanreplay.boundary("tool", "lookup", {"thing": _Unreadable()}, lambda: "ok")
            spanreplay.boundary("tool", "lookup", {"thing": _Unreadable(), "mail": "ada@example.com"}, lambda: "ok")
    finally:
        provider.shutdown()
    plain, personal = _recorded(tmp_path, run.run_id)
    # Not lost: an explicit marker with the value's text (replay compares the next run's
    # input in the same form, and refuses to serve what it stands for).
    marker = orjson.loads(plain[sc.INPUT])
    assert marker["!unencodable"] == "builtins.dict"
    assert "_Unreadable object" in marker["repr"]
    assert sc.INPUT + sc.MASKED_SUFFIX not in plain
    # The marker's text holds something to mask, and the value itself cannot be walked to
    # mask it: withheld, as any payload whose masking fails.
    assert personal[sc.INPUT] == '"<unmasked value withheld>"'
    assert orjson.loads(personal[sc.INPUT + sc.MASKED_SUFFIX]) == [{"path": "$", "rule": "masking_failed"}]
    assert plain[sc.OUTPUT] == personal[sc.OUTPUT] == '"ok"'


def test_a_rule_that_fails_withholds_the_payload(tmp_path: Path) -> None:
    def explode(value: Any) -> Any:
        raise RuntimeError("rule failed")

    provider = TracerProvider()
    masking = MaskingConfig(rules=[transform("secret", explode)])
    spanreplay.configure(trace_dir=tmp_path, tracer_provider=provider, masking=masking)
    try:
        with spanreplay.record(agent="gate") as run:
            spanreplay.boundary("tool", "lookup", {"secret": "x"}, lambda: {"secret": "y"})
    finally:
        provider.shutdown()
    (attributes,) = _recorded(tmp_path, run.run_id)
    for name in (sc.INPUT, sc.OUTPUT):
        assert attributes[name] == '"<unmasked value withheld>"'
        assert orjson.loads(attributes[name + sc.MASKED_SUFFIX]) == [{"path": "$", "rule": "masking_failed"}]

"""Without a key, masked input values are compared exactly through the run's salt.

Both addresses mask to ``<email>``; the salt kept beside the trace file tells them
apart, so code that now emails another customer diverges at that step.
"""

from __future__ import annotations

import base64
import contextlib
import os
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.masking_samples import cards, emails, ibans, ipv4s, phones, ssns
from helpers.otlp_receivers import HttpReceiver
from spanreplay import semconv as sc
from spanreplay.masking import Masker, MaskingConfig, mask
from spanreplay.run.salts import SALT_DIR, read_salt, salt_path

ANN = "ann.lee@example.com"
BOB = "bob.stone@example.org"


def emailer(customer: str) -> str:
    """Looks up an order, then emails the customer the code was given."""
    order = spanreplay.boundary("tool", "order", {"id": 7}, lambda: {"status": "shipped"})
    return str(
        spanreplay.boundary(
            "tool", "send", {"to": customer, "body": f"Order 7 is {order['status']}"}, lambda: f"sent to {customer}"
        )
    )


def _record(trace_dir: Path, fn: Any, *args: Any) -> spanreplay.EventLog:
    with spanreplay.record(agent="mailer") as run:
        fn(*args)
    return spanreplay.load(trace_dir, run.run_id)


def _replay(log: spanreplay.EventLog, fn: Any, *args: Any, **options: Any) -> str:
    with spanreplay.replay(log, **options) as replaying:
        fn(*args)
    assert replaying.outcome is not None
    return str(replaying.outcome)


def test_emailing_another_customer_than_recorded_diverges_naming_the_step_and_the_path(trace_dir: Path) -> None:
    log = _record(trace_dir, emailer, ANN)
    send = log.events[1]
    assert send.input == {"to": "<email>", "body": "Order 7 is shipped"}

    replaying = spanreplay.replay(log)
    with pytest.raises(spanreplay.InputChangedError) as caught, replaying:
        emailer(BOB)
    assert replaying.outcome == "diverged"
    error = caught.value
    assert (error.seq, error.call_id) == (send.seq, send.call_id)
    text = str(error)
    assert f"seq {send.seq}" in text
    assert "'send'" in text
    assert "at to (email)" in text
    # Neither address, masked alike, is shown.
    assert ANN not in text
    assert BOB not in text
    assert "to (email)" in error.diff


def test_the_same_customer_replays_as_completed(trace_dir: Path) -> None:
    log = _record(trace_dir, emailer, ANN)
    assert _replay(log, emailer, ANN) == "completed"


def test_an_ignored_path_is_left_out_of_the_exact_check_too(trace_dir: Path) -> None:
    log = _record(trace_dir, emailer, ANN)
    assert _replay(log, emailer, BOB, ignore_paths=["to"]) == "completed"


def test_a_caught_change_of_a_masked_value_still_decides_the_outcome(trace_dir: Path) -> None:
    log = _record(trace_dir, emailer, ANN)

    def catching(customer: str) -> None:
        with contextlib.suppress(spanreplay.InputChangedError):
            emailer(customer)

    with pytest.raises(spanreplay.InputChangedError), spanreplay.replay(log) as replaying:
        catching(BOB)
    assert replaying.outcome == "diverged"


def test_values_masked_by_a_path_rule_are_checked_too(tmp_path: Path, provider: TracerProvider) -> None:
    directory = tmp_path / "traces"
    config = MaskingConfig(rules=[mask("**.name"), mask("**.account")])
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=config)

    def pay(name: str, account: int) -> None:
        spanreplay.boundary("tool", "pay", {"payee": {"name": name, "account": account}}, lambda: "paid")

    log = _record(directory, pay, "Ann Lee", 4_417_123_456)
    assert log.events[0].input == {"payee": {"name": "<name>", "account": 0}}
    assert _replay(log, pay, "Ann Lee", 4_417_123_456) == "completed"
    with pytest.raises(spanreplay.InputChangedError, match=r"payee\.name \(mask"):
        _replay(log, pay, "Bob Stone", 4_417_123_456)
    with pytest.raises(spanreplay.InputChangedError, match=r"payee\.account \(mask"):
        _replay(log, pay, "Ann Lee", 9_917_123_456)


def test_credentials_are_compared_by_kind_key_or_not(trace_dir: Path) -> None:
    def login(password: str) -> None:
        spanreplay.boundary("tool", "login", {"user": "ann", "password": password}, lambda: "ok")

    log = _record(trace_dir, login, "hunter2")
    # A hash of a password is still about the password: none is recorded, salted or not.
    assert sc.INPUT_CHECKS not in log.events[0].attributes
    assert _replay(log, login, "swordfish") == "completed"


# -- masked values handed on from served outputs ---------------------------------------

PII = st.one_of(emails(), phones(), cards(), ssns(), ipv4s(), ibans())
_KEYED = Masker(MaskingConfig(key="tell-values-apart"))


def relay(value: str, extra: str) -> None:
    """Hands a tool's (masked, on replay) output on to the next input, beside a value of its own."""
    found = spanreplay.boundary(
        "tool", "lookup", {"id": 1}, lambda: {"contact": value, "note": f"reach me at {value} today"}
    )
    spanreplay.boundary(
        "tool",
        "send",
        {"to": found["contact"], "body": f"{found['note']}; cc {extra}", "list": [found["contact"], extra]},
        lambda: "sent",
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=PII, extra=PII, other=PII)
def test_a_masked_output_handed_on_does_not_diverge_and_a_changed_value_beside_it_does(
    provider: TracerProvider, value: str, extra: str, other: str
) -> None:
    assume(_KEYED.scan_text(other)[0] != _KEYED.scan_text(extra)[0])
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp) / "traces"
        spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
        log = _record(directory, relay, value, extra)
        # On replay the code hands on the recorded (masked) output: a placeholder where
        # the recording had the value, which is no change.
        assert _replay(log, relay, value, extra) == "completed"
        with pytest.raises(spanreplay.InputChangedError) as caught:
            _replay(log, relay, value, other)
        assert caught.value.seq == log.events[1].seq
        assert other not in str(caught.value)
        assert extra not in str(caught.value)


# -- the salt file -------------------------------------------------------------------


def test_the_salt_is_an_owner_only_file_beside_the_trace_file(trace_dir: Path) -> None:
    log = _record(trace_dir, emailer, ANN)
    path = salt_path(trace_dir, log.run_id)
    assert path.parent == trace_dir / SALT_DIR
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert read_salt(path) is not None
    # The readers skip the salt directory: the trace directory still holds one run.
    assert [r.run_id for r in spanreplay.runs(trace_dir)] == [log.run_id]


def test_a_run_that_masks_no_input_writes_no_salt(trace_dir: Path) -> None:
    def plain() -> None:
        spanreplay.boundary("tool", "order", {"id": 7}, lambda: {"email": ANN})  # only the output is masked

    log = _record(trace_dir, plain)
    assert not salt_path(trace_dir, log.run_id).exists()
    assert _replay(log, plain) == "completed"


def test_with_a_key_no_salt_is_written_and_tokens_keep_equality(
    tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPANREPLAY_MASK_KEY", "project-key")
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    log = _record(directory, emailer, ANN)
    assert not (directory / SALT_DIR).exists()
    assert sc.INPUT_CHECKS not in log.events[1].attributes
    with pytest.raises(spanreplay.InputChangedError):
        _replay(log, emailer, BOB)
    assert _replay(log, emailer, ANN) == "completed"


def test_a_run_without_its_salt_file_replays_by_kind_with_exactly_one_warning(trace_dir: Path) -> None:
    def twice(customer: str) -> None:
        emailer(customer)
        emailer(customer)

    log = _record(trace_dir, twice, ANN)
    salt_path(trace_dir, log.run_id).unlink()
    for customer in (ANN, BOB):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert _replay(spanreplay.load(trace_dir, log.run_id), twice, customer) == "completed"
        said = [w for w in caught if issubclass(w.category, spanreplay.SpanReplayWarning)]
        assert len(said) == 1, [str(w.message) for w in caught]
        message = str(said[0].message)
        assert log.run_id in message
        assert "SPANREPLAY_MASK_KEY" in message
        assert SALT_DIR in message


def test_the_salt_reaches_no_trace_file_otlp_request_or_postgres_row(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psycopg

    directory = tmp_path / "traces"
    with HttpReceiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        provider = TracerProvider(resource=Resource.create({"service.name": "salted"}))
        spanreplay.configure(
            trace_dir=directory, tracer_provider=provider, otlp=True, postgres=pg_dsn, raise_internal_errors=True
        )
        try:
            log = _record(directory, emailer, ANN)
            provider.force_flush()
        finally:
            provider.shutdown()
            spanreplay.reset()
        bodies = [r.body for r in receiver.requests]
    salt = read_salt(salt_path(directory, log.run_id))
    assert salt is not None
    with psycopg.connect(pg_dsn) as conn:
        rows = [
            row.encode()
            for table in ("agent_steps", "agent_runs")
            for (row,) in conn.execute(f"SELECT row_to_json(t)::text FROM {table} t").fetchall()
        ]
    files = [p.read_bytes() for p in directory.glob("*.jsonl")]
    assert files
    assert bodies
    assert rows
    forms = [salt, salt.hex().encode(), salt.hex().upper().encode(), base64.b64encode(salt)]
    for data in [*files, *bodies, *rows]:
        for form in forms:
            assert form not in data
    # The checks themselves do travel (they are what replay compares), as short hex strings.
    checks = orjson.loads(log.events[1].attributes[sc.INPUT_CHECKS])
    assert list(checks) == ["to"]
    assert len(checks["to"][0]) == 12
    assert any(checks["to"][0].encode() in row for row in rows)

    # Read back from Postgres the salt file is not beside it: by kind, one warning.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _replay(spanreplay.load(pg_dsn, log.run_id), emailer, BOB) == "completed"
    assert len([w for w in caught if issubclass(w.category, spanreplay.SpanReplayWarning)]) == 1


def test_a_salt_that_cannot_be_written_leaves_the_run_recorded_and_replay_says_so(
    tmp_path: Path, provider: TracerProvider
) -> None:
    directory = tmp_path / "traces"
    directory.mkdir()
    (directory / SALT_DIR).write_text("not a directory\n")  # where the salts would go
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=False)
    log = _record(directory, emailer, ANN)
    assert [e.input["to"] for e in log.events[1:]] == ["<email>"]
    assert sc.INPUT_CHECKS not in log.events[1].attributes
    with pytest.warns(spanreplay.SpanReplayWarning, match="compared by their kind only"):
        assert _replay(log, emailer, ANN) == "completed"


def test_a_run_masking_only_credentials_replays_without_its_salt_and_without_a_warning(trace_dir: Path) -> None:
    def login(password: str) -> None:
        spanreplay.boundary("tool", "login", {"user": "ann", "password": password}, lambda: "ok")

    log = _record(trace_dir, login, "hunter2")
    assert log.events[0].attributes[sc.INPUT + sc.MASKED_SUFFIX]
    salt_path(trace_dir, log.run_id).unlink(missing_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no salt would compare a password: nothing to say
        assert _replay(spanreplay.load(trace_dir, log.run_id), login, "hunter2") == "completed"


def test_the_salt_is_found_beside_the_trace_file_named_on_its_own_and_not_beside_a_copy(
    trace_dir: Path, tmp_path: Path
) -> None:
    log = _record(trace_dir, emailer, ANN)
    trace_file = trace_dir / f"{log.run_id}.jsonl"
    with pytest.raises(spanreplay.InputChangedError):
        _replay(spanreplay.load(trace_file), emailer, BOB)
    elsewhere = tmp_path / "copied"
    elsewhere.mkdir()
    copy = elsewhere / trace_file.name
    copy.write_bytes(trace_file.read_bytes())
    with pytest.warns(spanreplay.SpanReplayWarning, match=r"\.spanreplay-salts"):
        assert _replay(spanreplay.load(copy), emailer, BOB) == "completed"


def test_a_masked_number_handed_on_is_no_change(tmp_path: Path, provider: TracerProvider) -> None:
    directory = tmp_path / "traces"
    config = MaskingConfig(rules=[mask("**.amount")])
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, masking=config)

    def settle(extra: int) -> None:
        bill = spanreplay.boundary("tool", "bill", {}, lambda: {"amount": 4_417_123_456})
        spanreplay.boundary("tool", "pay", {"doc": bill, "tip": {"amount": extra}}, lambda: "paid")

    log = _record(directory, settle, 1250)  # 4 digits: checked as the number, not its shape
    # On replay the bill's amount is the served 0, which is no value; the tip is the code's own.
    assert _replay(log, settle, 1250) == "completed"
    with pytest.raises(spanreplay.InputChangedError, match=r"tip\.amount"):
        _replay(log, settle, 1500)

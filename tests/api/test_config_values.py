"""configure()'s value objects: OtlpExport, PostgresStore, KeepPolicy and MaskingConfig.

Each records as its plain keywords do, refuses a bad value when it is made with a
ConfigurationError naming that value and how to write it, and the plain keywords
still work and mean the same value.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from helpers.otlp_receivers import GrpcReceiver, HttpReceiver, spans_in
from spanreplay import ConfigurationError, KeepPolicy, MaskingConfig, OtlpExport, PostgresStore, RunSummary

# A port nothing listens on: the checks below refuse a value before anything connects.
DOWN_DSN = "postgresql://postgres@127.0.0.1:1/test"


@spanreplay.tool
def search(query: str) -> list[str]:
    return [query, query[::-1]]


def _record_one(query: str = "x") -> str:
    with spanreplay.record(agent="values") as run:
        search(query)
    return run.run_id


@pytest.fixture(autouse=True)
def _forget_the_configuration() -> Iterator[None]:
    yield
    spanreplay.reset()  # shuts down the OTLP and Postgres processors a test added


def _configure(provider: TracerProvider, trace_dir: Path, **kwargs: Any) -> spanreplay.Settings:
    return spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=True, **kwargs)


def test_the_value_objects_are_exported_from_spanreplay() -> None:
    for name in ("KeepPolicy", "MaskingConfig", "OtlpExport", "PostgresStore"):
        assert name in spanreplay.__all__
    assert spanreplay.MaskingConfig is spanreplay.masking.MaskingConfig


@pytest.mark.parametrize(
    "value",
    [OtlpExport(), PostgresStore(dsn=DOWN_DSN), KeepPolicy(keep_ok=0.5), MaskingConfig()],
    ids=lambda value: type(value).__name__,
)
def test_a_value_object_is_frozen(value: Any) -> None:
    field = dataclasses.fields(value)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, field, None)


# --- KeepPolicy -------------------------------------------------------------------


def keep_long(run: RunSummary) -> bool:
    return run.steps > 1


@pytest.mark.parametrize(
    ("keywords", "value"),
    [
        ({"keep_ok": 0.25}, KeepPolicy(keep_ok=0.25)),
        ({"keep": keep_long}, KeepPolicy(keep=keep_long)),
        ({"keep_ok": 0.25, "keep": keep_long}, KeepPolicy(keep_ok=0.25, keep=keep_long)),
        ({"keep_ok": 1.0}, KeepPolicy()),
    ],
)
def test_the_keep_keywords_and_a_keep_policy_are_the_same_policy(
    tmp_path: Path, provider: TracerProvider, keywords: dict[str, Any], value: KeepPolicy
) -> None:
    by_keywords = _configure(provider, tmp_path, **keywords).keep
    by_value = _configure(provider, tmp_path, keep=value).keep
    assert by_keywords == by_value == value
    assert by_value is not None
    assert by_value.describe().endswith(f"(configure(keep={value!r}))")


def test_keep_left_out_of_a_policy_means_what_the_keywords_mean() -> None:
    assert KeepPolicy().keep_ok == 1.0  # every run
    assert KeepPolicy(keep=keep_long).keep_ok == 0.0  # only those keep asks for
    assert KeepPolicy(keep_ok="0.5").keep_ok == 0.5  # as SPANREPLAY_KEEP_OK is read


def test_a_keep_policy_keeps_and_drops_runs_as_the_keywords_do(tmp_path: Path, provider: TracerProvider) -> None:
    traces = tmp_path / "traces"
    _configure(provider, traces, keep=KeepPolicy(keep_ok=0.0))
    assert not (traces / f"{_record_one()}.jsonl").exists()
    _configure(provider, traces, keep=KeepPolicy(keep_ok=0.0, keep=lambda run: run.steps >= 1))
    kept = _record_one()
    assert [e.output for e in spanreplay.load(traces, kept)] == [["x", "x"]]
    _configure(provider, traces, keep_ok=0.0, keep=lambda run: run.steps >= 1)
    assert (traces / f"{_record_one()}.jsonl").exists()
    _configure(provider, traces, keep_ok=0.0)
    assert not (traces / f"{_record_one()}.jsonl").exists()


# --- OtlpExport -------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_an_otlp_export_with_an_endpoint_reaches_the_receiver(
    tmp_path: Path, provider: TracerProvider, protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")  # the value object's protocol wins
    with HttpReceiver() if protocol == "http/protobuf" else GrpcReceiver() as receiver:
        config = _configure(provider, tmp_path, otlp=OtlpExport(protocol=protocol, endpoint=receiver.url))
        assert config.otlp_processor is not None
        run_id = _record_one()
        assert config.otlp_processor.force_flush(10_000)
        received = [span for _, span in spans_in(receiver.requests)]
    assert config.otlp_processor.stats.exported == len(received) == 2
    run_ids = {kv.value.string_value for span in received for kv in span.attributes if kv.key == "spanreplay.run.id"}
    assert run_ids == {run_id}
    assert (tmp_path / f"{run_id}.jsonl").exists()  # beside the trace file, as otlp=True


@pytest.mark.parametrize(("keyword", "value"), [(True, OtlpExport()), (False, OtlpExport(enabled=False))])
def test_the_otlp_keyword_and_an_otlp_export_add_the_same_exporter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keyword: bool, value: OtlpExport
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    found = []
    for otlp in (keyword, value):
        spanreplay.reset()
        processor = _configure(TracerProvider(), tmp_path, otlp=otlp).otlp_processor
        found.append(None if processor is None else processor.exporter.endpoint)
    assert found[0] == found[1]
    assert found[0] == ("http://127.0.0.1:1/v1/traces" if keyword else None)


def test_otlp_none_and_enabled_none_follow_the_variables_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
    # A provider the application gave: the variables are its exporters' business, so none is added.
    for otlp in (None, OtlpExport(enabled=None)):
        assert _configure(TracerProvider(), tmp_path, otlp=otlp).otlp_processor is None


# --- PostgresStore ----------------------------------------------------------------


def test_a_postgres_store_writes_rows_as_the_dsn_keyword_does_and_is_the_same_processor(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPANREPLAY_POSTGRES_WAIT", "60")
    first = _configure(provider, tmp_path, postgres=pg_dsn, postgres_commit="async").postgres_processor
    store = _configure(provider, tmp_path, postgres=PostgresStore(dsn=pg_dsn, commit="async")).postgres_processor
    assert store is first  # the same settings: the processor is kept, not replaced
    assert store is not None
    assert store.postgres_commit == "async"
    run_id = _record_one("pg")
    assert [e.output for e in spanreplay.load(pg_dsn, run_id)] == [["pg", "gp"]]


def test_a_postgres_store_takes_a_processor_as_the_keyword_does(
    psycopg_installed: None, tmp_path: Path, provider: TracerProvider
) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    processor = PostgresSpanProcessor(DOWN_DSN, postgres_commit="async")
    try:
        assert _configure(provider, tmp_path, postgres=PostgresStore(processor=processor)).postgres_processor is (
            processor
        )
        # commit= may repeat the processor's own mode, in any case.
        again = PostgresStore(processor=processor, commit=" ASYNC ")
        assert again.commit == "async"
        assert _configure(provider, tmp_path, postgres=again).postgres_processor is processor
    finally:
        processor.shutdown()


def test_a_postgres_store_without_a_dsn_reads_the_variable_as_no_keyword_does(
    tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SPANREPLAY_POSTGRES_DSN", raising=False)
    assert _configure(provider, tmp_path, postgres=PostgresStore()).postgres_processor is None


# --- MaskingConfig ----------------------------------------------------------------


@pytest.mark.parametrize(("masking", "masked"), [(None, True), (True, True), (MaskingConfig(), True), (False, False)])
def test_masking_config_is_the_masking_value_and_the_booleans_still_work(
    tmp_path: Path, provider: TracerProvider, masking: MaskingConfig | bool | None, masked: bool
) -> None:
    _configure(provider, tmp_path, masking=masking)
    run_id = _record_one("ann@example.com")
    assert ("ann@example.com" in (tmp_path / f"{run_id}.jsonl").read_text()) is not masked


# --- refused values ---------------------------------------------------------------


def _not_a_processor() -> PostgresStore:
    return PostgresStore(processor="postgresql://x")  # type: ignore[arg-type]


REFUSED: list[tuple[Callable[[], object], str, str]] = [
    # (what makes the value, the value as the message names it, the fix it gives)
    (lambda: OtlpExport(enabled="yes"), "OtlpExport(enabled='yes')", "enabled=True"),  # type: ignore[arg-type]
    (lambda: OtlpExport(protocol="http/json"), "OtlpExport(protocol='http/json')", "protocol='grpc'"),
    (lambda: OtlpExport(endpoint="collector:4318"), "OtlpExport(endpoint='collector:4318')", "'http://collector:4318'"),
    (lambda: OtlpExport(endpoint="http://"), "OtlpExport(endpoint='http://')", "'http://collector:4318'"),
    (lambda: OtlpExport(enabled=False, protocol="grpc"), "OtlpExport(enabled=False, protocol='grpc'", "drop"),
    (lambda: PostgresStore(dsn=""), "PostgresStore(dsn='')", "dsn='postgresql://USER@HOST:PORT/DATABASE'"),
    (lambda: PostgresStore(dsn=5), "PostgresStore(dsn=5)", "dsn='postgresql://"),  # type: ignore[arg-type]
    (lambda: PostgresStore(commit="fast"), "PostgresStore(commit='fast')", 'commit="async"'),
    (lambda: PostgresStore(dsn=DOWN_DSN, processor=object()), "PostgresStore(dsn=..., processor=...)", "dsn= alone"),  # type: ignore[arg-type]
    (lambda: KeepPolicy(keep_ok=1.5), "KeepPolicy(keep_ok=) is 1.5", "a number from 0 to 1"),
    (lambda: KeepPolicy(keep_ok=-0.1), "KeepPolicy(keep_ok=) is -0.1", "a number from 0 to 1"),
    (lambda: KeepPolicy(keep_ok=math.nan), "KeepPolicy(keep_ok=) is nan", "a number from 0 to 1"),
    (lambda: KeepPolicy(keep_ok="most"), "KeepPolicy(keep_ok=) is 'most'", "a number from 0 to 1"),  # type: ignore[arg-type]
    (lambda: KeepPolicy(keep="yes"), "KeepPolicy(keep='yes')", "keep_ok=0.1"),  # type: ignore[arg-type]
    (lambda: MaskingConfig(engine="fast"), "MaskingConfig(engine='fast')", "'hyperscan'"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("make", "value", "fix"), REFUSED, ids=[value for _, value, _ in REFUSED])
def test_a_bad_value_is_refused_naming_it_and_the_fix(make: Callable[[], object], value: str, fix: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        make()
    assert value in str(caught.value)
    assert fix in str(caught.value)


def test_a_postgres_store_refuses_what_is_not_a_processor_or_contradicts_it(psycopg_installed: None) -> None:
    from spanreplay.postgres import PostgresSpanProcessor

    with pytest.raises(ConfigurationError, match=r"PostgresStore\(processor='postgresql://x'\).*PostgresSpanProcessor"):
        _not_a_processor()
    processor = PostgresSpanProcessor(DOWN_DSN)
    try:
        with pytest.raises(ConfigurationError, match=r"PostgresStore\(commit='async'\).*postgres_commit='async'"):
            PostgresStore(processor=processor, commit="async")
    finally:
        processor.shutdown()


def test_a_value_object_beside_the_keyword_it_replaces_is_refused(tmp_path: Path, provider: TracerProvider) -> None:
    spanreplay.reset()
    with pytest.raises(ConfigurationError, match=r"configure\(keep_ok=0\.1\).*KeepPolicy\(keep_ok=0\.1, keep=\.\.\.\)"):
        _configure(provider, tmp_path, keep_ok=0.1, keep=KeepPolicy(keep=keep_long))
    with pytest.raises(
        ConfigurationError, match=r"configure\(postgres_commit='async'\).*PostgresStore\(\.\.\., commit='async'\)"
    ):
        _configure(provider, tmp_path, postgres=PostgresStore(dsn=DOWN_DSN), postgres_commit="async")
    assert not spanreplay.is_configured()  # refused before anything was set up


def test_the_keyword_forms_still_refuse_as_they_did(tmp_path: Path, provider: TracerProvider) -> None:
    with pytest.raises(ConfigurationError, match=r"configure\(keep_ok=\) is 2"):
        _configure(provider, tmp_path, keep_ok=2)
    with pytest.raises(ConfigurationError, match=r"configure\(keep='often'\) is not callable"):
        _configure(provider, tmp_path, keep="often")
    with pytest.raises(ConfigurationError, match=r"configure\(masking='on'\)"):
        _configure(provider, tmp_path, masking="on")

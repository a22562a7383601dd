"""The one price table: dated, shared by the instrumentor and ``spanreplay cost``, overridable by a file."""

from __future__ import annotations

import json
import logging
from datetime import date
from pathlib import Path
from typing import Any

import anthropic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from helpers.messages_api_server import MessagesAPIServer, instrument, reply, serve, text
from spanreplay.cost import (
    PRICES_ENV,
    ModelPrice,
    PriceTable,
    Usage,
    _prices,
    builtin_prices,
    cost_usd,
    load_prices,
    model_key,
    price_table,
    set_prices,
)
from spanreplay.errors import ConfigurationError

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

MTOK = 1_000_000
# The current lineup on the table's date, with (input, output, 5m write, 1h write, cache read) in USD/MTok.
CURRENT = {
    "claude-fable-5-1": (10.0, 50.0, 12.5, 20.0, 0.25),
    "claude-opus-5-5": (4.0, 20.0, 5.0, 8.0, 0.20),
    "claude-sonnet-5-5": (2.0, 10.0, 2.5, 4.0, 0.10),
    "claude-haiku-5-5": (0.10, 0.50, 0.125, 0.20, 0.01),
    "claude-haiku-4-5": (1.0, 5.0, 1.25, 2.0, 0.10),
    "claude-sonnet-4-6": (3.0, 15.0, 3.75, 6.0, 0.30),
}


@pytest.fixture(autouse=True)
def own_price_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """set_prices() and SPANREPLAY_PRICES are process-wide: each test starts from the built-in table."""
    monkeypatch.setattr(_prices, "_added", {})
    monkeypatch.setattr(_prices, "_replaced", False)
    monkeypatch.setattr(_prices, "_in_force", None)
    monkeypatch.setattr(_prices, "_warned", set())
    monkeypatch.delenv(PRICES_ENV, raising=False)


def test_the_built_in_table_is_dated_and_prices_every_kind_of_token_of_the_current_models() -> None:
    table = builtin_prices()
    assert isinstance(table.as_of, date)
    assert str(table.as_of) in table.describe()
    for model, (input, output, write_5m, write_1h, read) in CURRENT.items():
        price = table.lookup(model)
        assert price is not None, model
        assert (price.input, price.output, price.cache_write_5m, price.cache_write_1h, price.cache_read) == (
            input,
            output,
            write_5m,
            write_1h,
            read,
        )
        # Ten thousand tokens of each kind (short of every long-prompt band) at the listed price.
        n = 10_000
        assert table.usd(model, Usage(input=n)) == pytest.approx(input * n / MTOK)
        assert table.usd(model, Usage(output=n)) == pytest.approx(output * n / MTOK)
        assert table.usd(model, Usage(cache_write=n)) == pytest.approx(write_5m * n / MTOK)
        assert table.usd(model, Usage(cache_write=n, cache_write_1h=n)) == pytest.approx(write_1h * n / MTOK)
        assert table.usd(model, Usage(cache_read=n)) == pytest.approx(read * n / MTOK)


@pytest.mark.parametrize(
    ("model", "key"),
    [
        ("claude-haiku-4-5-20251001", "claude-haiku-4-5"),
        ("claude-sonnet-4-20250514", "claude-sonnet-4"),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5"),
        ("claude-opus-4-1@20250805", "claude-opus-4-1"),
        ("anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("claude-sonnet-5-5[1m]", "claude-sonnet-5-5"),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
    ],
)
def test_dated_snapshots_and_cloud_ids_find_their_model(model: str, key: str) -> None:
    assert model_key(model) == key
    assert builtin_prices().lookup(model) is builtin_prices().lookup(key) is not None


@pytest.mark.parametrize("model", ["claude-sonnet-5-7", "claude-opus-6", "gpt-6-sol", "claude"])
def test_a_model_the_table_does_not_know_has_no_price_rather_than_a_neighbours_or_zero(model: str) -> None:
    assert builtin_prices().lookup(model) is None
    assert cost_usd(model, {"input_tokens": 1000, "output_tokens": 1000}) is None


def test_a_price_change_applies_from_its_day_and_earlier_calls_keep_the_old_price() -> None:
    table = builtin_prices()
    reads = Usage(cache_read=10_000)
    assert table.usd("claude-sonnet-5-5", reads, when=date(2026, 10, 6)) == pytest.approx(0.20 / 100)
    assert table.usd("claude-sonnet-5-5", reads, when=date(2026, 10, 7)) == pytest.approx(0.10 / 100)
    assert table.usd("claude-sonnet-5-5", reads) == pytest.approx(0.10 / 100)


def test_a_long_prompt_pays_the_higher_band_on_every_token_of_that_request() -> None:
    table = builtin_prices()
    # Haiku 5.5: up to 100,000 prompt tokens (input, cache reads and writes together) at the low band.
    at_limit = Usage(input=60_000, cache_read=30_000, cache_write=10_000, output=1_000)
    over = Usage(input=60_001, cache_read=30_000, cache_write=10_000, output=1_000)
    low = (60_000 * 0.10 + 30_000 * 0.01 + 10_000 * 0.125 + 1_000 * 0.50) / MTOK
    high = (60_001 * 0.50 + 30_000 * 0.05 + 10_000 * 0.625 + 1_000 * 2.50) / MTOK
    assert table.usd("claude-haiku-5-5", at_limit) == pytest.approx(low)
    assert table.usd("claude-haiku-5-5", over) == pytest.approx(high)


def test_batch_usage_costs_the_batch_share_on_every_kind_of_token() -> None:
    usage = {"input_tokens": 1000, "output_tokens": 500, "cache_read_input_tokens": 2000, "service_tier": "batch"}
    standard = {**usage, "service_tier": "standard"}
    assert cost_usd("claude-opus-5-5", usage) == pytest.approx(cost_usd("claude-opus-5-5", standard) * 0.5)


def test_a_user_toml_file_extends_and_overrides_the_built_in_table(tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(
        "as_of = 2026-12-01\n[models.claude-sonnet-4-6]\ninput = 2.4\noutput = 12.0\n"
        '[models."my-fine-tune-*"]\ninput = 1.0\noutput = 4.0\nbatch = 0.4\n'
    )
    table = price_table(path)
    assert table.usd("claude-sonnet-4-6", Usage(input=MTOK)) == pytest.approx(2.4)
    # A cache price the file leaves out follows its input price.
    assert table.usd("claude-sonnet-4-6", Usage(cache_read=MTOK)) == pytest.approx(0.24)
    assert table.usd("my-fine-tune-7", Usage(output=MTOK, batch=True)) == pytest.approx(1.6)
    assert table.usd("claude-haiku-4-5", Usage(input=MTOK)) == pytest.approx(1.0)  # untouched
    assert str(path) in table.describe()
    assert table.as_of == date(2026, 12, 1)


def test_a_json_file_with_replace_drops_the_built_in_table(tmp_path: Path) -> None:
    path = tmp_path / "negotiated.json"
    path.write_text(json.dumps({"replace": True, "models": {"claude-opus-5-5": {"input": 3, "output": 15}}}))
    _, replaces = load_prices(path)
    assert replaces
    merged = price_table(path)
    assert merged.usd("claude-opus-5-5", Usage(input=MTOK, output=MTOK)) == pytest.approx(18.0)
    assert merged.lookup("claude-haiku-4-5") is None


def test_set_prices_keeps_working_through_the_instrumentors_import_path() -> None:
    from spanreplay.instrumentation.anthropic import ModelPrice as Legacy
    from spanreplay.instrumentation.anthropic import set_prices as legacy_set

    assert Legacy is ModelPrice
    legacy_set({"claude-unknown-9": ModelPrice(input=2.0, output=10.0)})
    assert cost_usd("claude-unknown-9-20990101", {"input_tokens": MTOK}) == pytest.approx(2.0)
    set_prices({}, replace=True)
    assert cost_usd("claude-haiku-4-5", {"input_tokens": MTOK}) is None


def test_the_env_file_prices_what_the_instrumentor_records(
    server: MessagesAPIServer,
    trace_dir: Path,
    memory_exporter: InMemorySpanExporter,
    instrumented: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = tmp_path / "ours.toml"
    path.write_text("[models.claude-sonnet-4-6]\ninput = 1.0\noutput = 2.0\ncache_write_1h = 7.0\n")
    monkeypatch.setenv(PRICES_ENV, str(path))
    answer = reply(text("Shipped."), input_tokens=1000, output_tokens=100, cache_write=3000)
    assert answer.body is not None
    answer.body["usage"]["cache_creation"] = {"ephemeral_5m_input_tokens": 1000, "ephemeral_1h_input_tokens": 2000}
    answer.body["usage"]["service_tier"] = "batch"
    server.script(answer)
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client, spanreplay.record():
        client.messages.create(model="claude-sonnet-4-6", max_tokens=64, messages=[{"role": "user", "content": "hi"}])
    (span,) = [s for s in memory_exporter.get_finished_spans() if s.name.startswith("chat ")]
    attributes: dict[str, Any] = dict(span.attributes or {})
    assert attributes["anthropic.usage.cache_creation.ephemeral_1h_input_tokens"] == 2000
    assert attributes["anthropic.usage.service_tier"] == "batch"
    # 1,000 input at $1, 1,000 5-minute writes at 1.25 x $1, 2,000 1-hour writes at $7, 100 output at $2; batch half.
    expected = (1000 * 1.0 + 1000 * 1.25 + 2000 * 7.0 + 100 * 2.0) / MTOK * 0.5
    assert attributes["gen_ai.usage.cost"] == pytest.approx(expected)


def test_a_broken_env_file_is_logged_once_and_recording_prices_with_the_built_in_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[models.claude-sonnet-4-6]\ninput = 'cheap'\noutput = 1\n")
    monkeypatch.setenv(PRICES_ENV, str(path))
    caplog.set_level(logging.WARNING, logger="spanreplay")
    first = cost_usd("claude-sonnet-4-6", {"input_tokens": MTOK})
    second = cost_usd("claude-sonnet-4-6", {"input_tokens": MTOK})
    assert first == second == pytest.approx(3.0)
    (record,) = caplog.records
    assert str(path) in record.getMessage()
    assert "models.claude-sonnet-4-6.input is 'cheap'" in record.getMessage()
    with pytest.raises(ConfigurationError, match=r"broken\.toml"):
        price_table()


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("[models.x]\noutput = 1\n", "models.x has no input price"),
        ("[models.x]\ninput = -1\noutput = 1\n", "models.x.input is -1"),
        ("[models.x]\ninput = 1\noutput = 1\nbatch = 2\n", "models.x.batch is 2"),
        ("[models.x]\ninput = 1\noutput = 1\ncahce_read = 1\n", "unknown key 'cahce_read'"),
        ("price = 3\n", "unknown key 'price'"),
        ("as_of = 2026-01-01\n", "has no models"),
        ("[models.x]\ninput = 1\noutput = 1\n[[models.x.earlier]]\ninput = 2\n", "has no until date"),
        ("[models.x]\ninput = 1\noutput = 1\n[models.x.long_prompt]\nabove = 0\n", "long_prompt.above is 0"),
        ("[models.x\n", "is not valid TOML"),
    ],
)
def test_a_bad_price_file_is_one_sentence_that_names_the_file_and_the_fix(
    tmp_path: Path, content: str, says: str
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(content)
    with pytest.raises(ConfigurationError) as caught:
        load_prices(path)
    message = str(caught.value)
    assert str(path) in message
    assert says in message
    assert message.endswith(".")


def test_a_missing_price_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"does not exist; pass a TOML or JSON file"):
        load_prices(tmp_path / "nope.toml")


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=st.dictionaries(st.sampled_from(["models", "batch", "as_of", "replace", "other"]), _values))
def test_any_malformed_json_price_file_raises_configuration_error_or_loads(tmp_path: Path, document: Any) -> None:
    path = tmp_path / "fuzz.json"
    path.write_text(json.dumps(document))
    try:
        table, _ = load_prices(path)
    except ConfigurationError as exc:
        message = str(exc)
    else:
        for model in table.models:
            assert table.usd(model, Usage(input=1, output=1)) is not None
        return
    assert str(path) in message


def test_entries_hold_every_model_and_prefix_of_a_merged_table_by_its_key() -> None:
    one, two = ModelPrice(input=1.0, output=2.0), ModelPrice(input=3.0, output=4.0)
    base = PriceTable({"claude-x": one, "claude-y-*": one}, sources=("base",))
    top = PriceTable({"claude-y-*": two, "claude-z": two}, sources=("top",))
    merged = base.merged(top)
    assert merged.entries() == {"claude-x": one, "claude-y-*": two, "claude-z": two}
    assert merged.lookup("claude-y-1") == two
    assert base.merged(top, replace=True).entries() == top.entries() == {"claude-y-*": two, "claude-z": two}
    merged.entries().clear()  # a copy: the table keeps its prices
    assert merged.lookup("claude-x") == one

"""``spanreplay cost``: totals from the spans' own usage, outliers with their causes, and sums that reconcile.

The fleet (tests/helpers/cost_recordings.py) is recorded once per module through the
real SDK and the real recorder, then spread over several days in its files.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shlex
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anthropic
import pytest
import time_machine
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from helpers.cost_recordings import HAIKU, SONNET, UNPRICED, Fleet, count_colour, read_png, record_fleet, shift_days
from helpers.messages_api_server import MessagesAPIServer, reply, serve, text
from spanreplay.cli import cli
from spanreplay.cost import PRICES_ENV, Usage
from spanreplay.cost._calls import usage_of
from spanreplay.cost._plot import OUTLIER_COLOR
from spanreplay.instrumentation.anthropic import AnthropicInstrumentor
from spanreplay.readers import iter_spans
from spanreplay.recording.exporters._otlp_json import LineEncoder

MTOK = 1_000_000
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
# What one ordinary support run costs on Sonnet 4.6 ($3 in, $3.75 5-minute writes, $0.30 reads, $15 out):
# turn 1: 1,000 input, 200 written, 100 output; turn 2: 150 input, 1,000 read, 150 output.
NORMAL_USD = (1000 * 3 + 200 * 3.75 + 100 * 15 + 150 * 3 + 1000 * 0.30 + 150 * 15) / MTOK
NORMAL_TOKENS = 1000 + 200 + 100 + 150 + 1000 + 150
LOOP_USD = 8 * (1000 * 3 + 100 * 15) / MTOK
TRIAGE_USD = (300 * 1.0 + 50 * 5.0) / MTOK
# Days back each ordinary run is moved: one of them into the month before.
SHIFTS = (-40, -2, -2, -1, -1)
# When the shared fleet is recorded (the test of dates records its own on each of EDGE_DATES).
FLEET_RECORDED_AT = datetime(2026, 11, 18, 10, 0, tzinfo=UTC)


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="spanreplay", input=input)


def cost_json(*args: str) -> dict[str, Any]:
    result = invoke("cost", *args, "--json")
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout)
    return data


@pytest.fixture(autouse=True)
def no_price_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PRICES_ENV, raising=False)


def _record_fleet_into(directory: Path) -> Fleet:
    """The fleet recorded at the clock's "now", its ordinary runs then moved back by ``SHIFTS`` days."""
    provider = TracerProvider(resource=Resource.create({"service.name": "cost-fleet"}))
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True)
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(zero_code=False)
    try:
        with MessagesAPIServer() as server:
            fleet = record_fleet(server)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    for run_id, days in zip(fleet.normal, SHIFTS, strict=True):
        shift_days(directory, run_id, days)
    return fleet


@pytest.fixture(scope="module")
def fleet_source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Fleet]:
    directory = tmp_path_factory.mktemp("fleet") / "traces"
    # Recorded on a fixed day, so what the tests read is the same whenever they run.
    with time_machine.travel(FLEET_RECORDED_AT, tick=True):
        return directory, _record_fleet_into(directory)


@pytest.fixture
def fleet(fleet_source: tuple[Path, Fleet]) -> Fleet:
    return fleet_source[1]


@pytest.fixture
def source(fleet_source: tuple[Path, Fleet]) -> str:
    return str(fleet_source[0])


# --- totals -------------------------------------------------------------------------------------


def test_by_agent_totals_calls_tokens_and_usd_from_the_spans_usage(source: str) -> None:
    groups = {g["agent"]: g for g in cost_json(source, "--by", "agent")["groups"]}
    assert set(groups) == {"support", "triage", "legacy"}
    support = groups["support"]
    assert support["calls"] == 5 * 2 + 8 + 6
    assert support["usd"] == pytest.approx(5 * NORMAL_USD + LOOP_USD + _growing_usd())
    assert support["input_tokens"] == 5 * (1000 + 150) + 8 * 1000 + 6 * 200
    assert support["cache_read_tokens"] == 5 * 1000 + sum(1000 * 2**k for k in range(6))
    assert support["cache_write_tokens"] == 5 * 200
    assert support["output_tokens"] == 5 * 250 + 8 * 100 + 6 * 120
    assert support["complete"] is True


def _growing_usd() -> float:
    return sum(200 * 3 + 1000 * 2**k * 0.30 + 120 * 15 for k in range(6)) / MTOK


def test_a_model_without_a_price_is_reported_and_left_out_of_the_usd_never_counted_as_free(source: str) -> None:
    report = cost_json(source, "--by", "model")
    groups = {g["model"]: g for g in report["groups"]}
    unpriced = groups[UNPRICED]
    assert unpriced["calls"] == 1
    assert unpriced["input_tokens"] == 400
    assert unpriced["usd"] == 0
    assert unpriced["complete"] is False
    assert unpriced["unpriced_models"] == {UNPRICED: 1}
    assert report["total"]["unpriced_models"] == {UNPRICED: 1}
    assert groups[HAIKU]["usd"] == pytest.approx(3 * TRIAGE_USD)
    text_output = invoke("cost", source, "--by", "model").stdout
    assert f"no price for {UNPRICED} (1 call)" in text_output
    assert "--prices FILE" in text_output
    unpriced_line = next(line for line in text_output.splitlines() if line.lstrip().startswith(UNPRICED))
    assert unpriced_line.rstrip().endswith("-")  # no USD at all, rather than $0


def test_a_price_file_prices_the_model_the_table_lacked(source: str, tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text(f'[models."{UNPRICED}"]\ninput = 10.0\noutput = 100.0\n')
    groups = {g["model"]: g for g in cost_json(source, "--by", "model", "--prices", str(prices))["groups"]}
    assert groups[UNPRICED]["usd"] == pytest.approx((400 * 10 + 40 * 100) / MTOK)
    assert groups[UNPRICED]["complete"] is True
    # The same file named by the environment prices `spanreplay runs` alike.
    assert groups[SONNET]["usd"] == pytest.approx(5 * NORMAL_USD + LOOP_USD + _growing_usd())


def test_calls_without_usage_are_counted_with_unknown_tokens_and_said_so(source: str, fleet: Fleet) -> None:
    groups = {g["model"]: g for g in cost_json(source, "--by", "model")["groups"]}
    for model in ("legacy-llm", "other-model"):
        assert groups[model]["calls"] == 1
        assert groups[model]["calls_without_usage"] == 1
        assert groups[model]["total_tokens"] == 0
    output = invoke("cost", source).stdout
    assert "2 of 30 calls carry no token usage" in output
    assert "counted as calls, with unknown tokens" in output
    legacy = next(line for line in output.splitlines() if line.lstrip().startswith("legacy"))
    assert [cell.strip() for cell in legacy.split("│")[1:3]] == ["2", "2"]  # calls, and the "no usage" column


def test_by_day_and_month_follow_the_calls_dates_and_since_until_cut_the_window(
    edge_date_now: datetime, tmp_path: Path
) -> None:
    directory = tmp_path / "traces"
    _record_fleet_into(directory)
    source = str(directory)
    recorded = [edge_date_now + timedelta(days=days) for days in SHIFTS]
    expected_days = sorted({f"{when:%Y-%m-%d}" for when in [*recorded, edge_date_now]})
    days = {g["day"]: g for g in cost_json(source, "--by", "day")["groups"]}
    assert sorted(days) == expected_days
    assert len(days) == 4
    first_day = min(days)
    assert days[first_day]["calls"] == 2  # the run moved back 40 days
    months = cost_json(source, "--by", "month")["groups"]
    # 40 days back from 1 March is in January: three months then, two on the other dates.
    assert [m["month"] for m in months] == sorted({day[:7] for day in expected_days})
    assert months[0]["calls"] == 2
    assert sum(m["calls"] for m in months) == 30
    last_day = max(days)
    assert last_day == f"{edge_date_now:%Y-%m-%d}"
    only_last = cost_json(source, "--by", "day", "--since", last_day)
    assert [g["day"] for g in only_last["groups"]] == [last_day]
    before_last = cost_json(source, "--by", "day", "--until", sorted(days)[-2])
    assert [g["day"] for g in before_last["groups"]] == sorted(days)[:-1]
    assert before_last["total"]["calls"] == sum(days[d]["calls"] for d in sorted(days)[:-1])


def test_csv_holds_the_json_groups_and_a_total_row(source: str) -> None:
    result = invoke("cost", source, "--by", "run", "--csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    groups = cost_json(source, "--by", "run")["groups"]
    assert [r["run"] for r in rows] == [g["run"] for g in groups] + ["total"]
    for row, group in zip(rows, groups, strict=False):
        assert int(row["calls"]) == group["calls"]
        assert float(row["usd"]) == pytest.approx(group["usd"])
        assert row["agent"] == group["agent"]
    assert float(rows[-1]["usd"]) == pytest.approx(sum(g["usd"] for g in groups))


# --- sums reconcile --------------------------------------------------------------------------------


def test_a_runs_cost_is_the_sum_of_its_model_spans_and_what_spanreplay_runs_shows(source: str, fleet: Fleet) -> None:
    by_run = {g["run"]: g for g in cost_json(source, "--by", "run")["groups"]}
    listed = invoke("runs", source, "--json")
    assert listed.exit_code == 0, listed.output
    runs = {r["run_id"]: r for r in json.loads(listed.stdout)}
    assert runs == {r.run_id: r.to_dict() for r in spanreplay.runs(source)}
    for run_id in [*fleet.normal, fleet.loop, fleet.growing, *fleet.triage]:
        # The cost each model span recorded when it ran, summed over the run's spans.
        recorded = sum(
            float(e.attributes["gen_ai.usage.cost"]) for e in spanreplay.load(source, run_id) if e.kind == "model"
        )
        assert by_run[run_id]["usd"] == pytest.approx(recorded, rel=1e-9)
        assert runs[run_id]["usd"] == pytest.approx(by_run[run_id]["usd"], rel=1e-12)
        assert runs[run_id]["model_calls"] == by_run[run_id]["calls"]
        assert runs[run_id]["tokens"] == by_run[run_id]["total_tokens"]
    assert sum(g["usd"] for g in by_run.values()) == pytest.approx(cost_json(source)["total"]["usd"])
    assert runs[fleet.unpriced]["unpriced_calls"] == 1
    assert runs[fleet.legacy]["calls_without_usage"] == 2


def test_spanreplay_runs_shows_calls_tokens_and_usd_columns(source: str, fleet: Fleet) -> None:
    output = invoke("runs", source).stdout
    line = next(line for line in output.splitlines() if fleet.loop in line)
    assert "8,800" in line
    assert f"${LOOP_USD:,.4f}" in line
    unpriced = next(line for line in output.splitlines() if fleet.unpriced in line)
    assert " ? " in unpriced
    assert "USD: * leaves out, ? is all of" in output


# --- outliers ----------------------------------------------------------------------------------------


def test_outliers_are_the_runs_over_three_times_their_agents_median_with_their_causes(
    source: str, fleet: Fleet
) -> None:
    report = cost_json(source)
    outliers = {o["run_id"]: o for o in report["outliers"]}
    assert set(outliers) == {fleet.loop, fleet.growing}
    loop = outliers[fleet.loop]
    assert loop["median_tokens"] == NORMAL_TOKENS
    assert loop["ratio"] == pytest.approx(8 * 1100 / NORMAL_TOKENS, rel=1e-2)
    (cause,) = loop["causes"]
    assert cause["kind"] == "retry_loop"
    assert cause["seqs"] == list(range(1, 9))
    assert loop["seq"] == 1
    growing = outliers[fleet.growing]
    assert growing["causes"][0]["kind"] == "growing_context"
    # Six model turns, each followed by a tool call: seqs 1, 3, ..., 11.
    assert growing["causes"][0]["seqs"] == [1, 3, 5, 7, 9, 11]
    assert growing["show"] == f"spanreplay show {shlex.quote(source)} {fleet.growing} --seq 1"
    assert growing["replay"].startswith(f"spanreplay replay {shlex.quote(source)} {fleet.growing} --entry ")


def test_the_printed_show_command_shows_the_step_where_the_loop_started(source: str, fleet: Fleet) -> None:
    output = invoke("cost", source).stdout
    assert "likely cause: a retry that looped: the same model call (claude-sonnet-4-6) was made 8 times" in output
    assert "likely cause: a context stuffed with history: the prompt grew call after call" in output
    looks = [line.split("look:", 1)[1].strip() for line in output.splitlines() if "look:" in line]
    command = next(look for look in looks if fleet.loop in look)
    argv = shlex.split(command)
    assert argv[:2] == ["spanreplay", "show"]
    shown = invoke(*argv[1:], "--json")
    assert shown.exit_code == 0, shown.output
    step = json.loads(shown.stdout)
    assert step["seq"] == 1
    assert step["kind"] == "model"
    assert step["input"]["body"]["messages"] == [{"role": "user", "content": "Where is order 7?"}]


def test_a_higher_factor_flags_fewer_runs(source: str, fleet: Fleet) -> None:
    assert [o["run_id"] for o in cost_json(source, "--outlier-factor", "10")["outliers"]] == [fleet.growing]
    assert cost_json(source, "--outlier-factor", "30")["outliers"] == []
    assert "no run over 30x its agent's median tokens" in invoke("cost", source, "--outlier-factor", "30").stdout


# --- other sources --------------------------------------------------------------------------------------


def test_stdin_reads_the_same_calls_as_the_directory(source: str, fleet: Fleet) -> None:
    piped = "".join(Path(source, f"{run_id}.jsonl").read_text() for run_id in fleet.triage)
    result = invoke("cost", "-", "--json", input=piped)
    assert result.exit_code == 0, result.output
    total = json.loads(result.stdout)["total"]
    assert total["calls"] == 3
    assert total["usd"] == pytest.approx(3 * TRIAGE_USD)


def test_spans_of_another_instrumentation_outside_any_run_are_grouped_by_trace(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "other-app"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("opentelemetry.instrumentation.openai")
    with tracer.start_as_current_span("POST /ask"):
        for _ in range(2):
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": HAIKU,
                "gen_ai.usage.prompt_tokens": 1000,  # the conventions' older names
                "gen_ai.usage.completion_tokens": 200,
            }
            with tracer.start_as_current_span(f"chat {HAIKU}", attributes=attributes):
                pass
    provider.shutdown()
    encoder = LineEncoder()
    path = tmp_path / "collector.jsonl"
    path.write_bytes(b"".join(encoder.encode(span) for span in exporter.get_finished_spans()))
    report = cost_json(str(path), "--by", "run")
    (group,) = report["groups"]
    # A trace outside any run is a run of its own, named by its trace id.
    assert group["run"] == exporter.get_finished_spans()[0].context.trace_id.to_bytes(16, "big").hex()
    assert group["calls"] == 2
    assert group["usd"] == pytest.approx(2 * (1000 * 1.0 + 200 * 5.0) / MTOK)
    # Its agent is the one `spanreplay runs` lists the trace under: the instrumentation that made it.
    listed = invoke("runs", str(path), "--json")
    assert listed.exit_code == 0, listed.output
    (run,) = json.loads(listed.stdout)
    assert (run["run_id"], run["agent"]) == (group["run"], "genai")
    assert group["agent"] == "genai"
    assert cost_json(str(path))["groups"][0]["agent"] == "genai"
    assert report["outliers"] == []


@pytest.mark.parametrize("kind", ["jaeger", "tempo"])
def test_jaeger_and_tempo_give_the_same_costs_as_the_files(source: str, kind: str) -> None:
    from fixtures.backends import BackendServer, serving

    backend = BackendServer(kind)
    backend.add(iter_spans(source))
    with serving(backend):
        from_backend = cost_json(f"{kind}+{backend.url}", "--by", "run")
    from_files = cost_json(source, "--by", "run")

    def facts(report: dict[str, Any]) -> list[dict[str, Any]]:
        # Jaeger keeps microseconds: the start times agree to the microsecond, not the nanosecond.
        return [{k: v for k, v in g.items() if k != "started"} for g in report["groups"]]

    assert facts(from_backend) == facts(from_files)
    assert [o["run_id"] for o in from_backend["outliers"]] == [o["run_id"] for o in from_files["outliers"]]


server = pytest.fixture(serve, name="server")


def test_the_sdks_own_span_nested_in_spanreplays_is_the_same_call_counted_once(
    server: MessagesAPIServer, trace_dir: Path, provider: TracerProvider
) -> None:
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(zero_code=False, sdk_spans=True)
    try:
        server.script(reply(text("hi"), input_tokens=100, output_tokens=10))
        client = anthropic.Anthropic(base_url=server.url, api_key="k", open_telemetry={"tracer_provider": provider})
        with client, spanreplay.record(agent="sdk"):
            client.messages.create(model=SONNET, max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    finally:
        instrumentor.uninstrument()
    names = [span.name for span in iter_spans(trace_dir)]
    assert any(name.startswith("anthropic.") for name in names), names
    total = cost_json(str(trace_dir))["total"]
    assert total["calls"] == 1
    assert total["usd"] == pytest.approx((100 * 3 + 10 * 15) / MTOK)


PG_DSN = os.environ.get("SPANREPLAY_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A fresh schema with the spanreplay tables; fails in CI, skips elsewhere, without a server."""
    try:
        import psycopg
    except ImportError:
        _unavailable("psycopg is not installed (pip install -e '.[test]')")
    from spanreplay.postgres import upgrade

    schema = f"sr_cost_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(PG_DSN, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
    except psycopg.Error as exc:
        _unavailable(f"{PG_DSN} does not answer ({str(exc).strip()})")
    dsn = f"{PG_DSN}{'&' if '?' in PG_DSN else '?'}options=-csearch_path%3D{schema}"
    upgrade(dsn)
    yield dsn
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _unavailable(reason: str) -> None:
    message = f"The Postgres cost test cannot run: {reason}; start the server or set SPANREPLAY_TEST_PG_DSN."
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def test_postgres_gives_the_same_costs_and_outliers_as_the_trace_files(
    pg_dsn: str, server: MessagesAPIServer, tmp_path: Path, provider: TracerProvider
) -> None:
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn)
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(zero_code=False)
    try:
        fleet = record_fleet(server)
    finally:
        instrumentor.uninstrument()
    provider.force_flush()
    from_files = {g["run"]: g for g in cost_json(str(directory), "--by", "run")["groups"]}
    from_db = {g["run"]: g for g in cost_json(pg_dsn, "--by", "run")["groups"]}
    # Postgres keeps the boundaries: another instrumentation's span inside a run is not a row.
    assert from_files.pop(fleet.legacy)["calls"] == 2
    assert from_db.pop(fleet.legacy)["calls"] == 1
    assert from_db == from_files
    db_runs = {r["run_id"]: r for r in json.loads(invoke("runs", pg_dsn, "--json").stdout)}
    for run_id, group in from_files.items():
        assert db_runs[run_id]["usd"] == pytest.approx(group["usd"], rel=1e-12)
    from_db_outliers = {o["run_id"]: o["causes"] for o in cost_json(pg_dsn)["outliers"]}
    from_files_outliers = {o["run_id"]: o["causes"] for o in cost_json(str(directory))["outliers"]}
    assert set(from_db_outliers) == {fleet.loop, fleet.growing}
    assert from_db_outliers == from_files_outliers


# --- bad input ----------------------------------------------------------------------------------------


def test_json_and_csv_together_is_a_usage_error(source: str) -> None:
    result = invoke("cost", source, "--json", "--csv")
    assert result.exit_code == 2
    assert "pick one" in result.output


def test_a_date_that_is_not_a_date_is_one_sentence(source: str) -> None:
    result = invoke("cost", source, "--since", "last tuesday")
    assert result.exit_code == 2
    assert "'last tuesday' is not a date; write it as 2026-11-01" in result.output


def test_a_broken_price_file_exits_2_naming_it(source: str, tmp_path: Path) -> None:
    prices = tmp_path / "p.toml"
    prices.write_text("[models.x]\ninput = 'free'\noutput = 0\n")
    result = invoke("cost", source, "--prices", str(prices))
    assert result.exit_code == 2
    assert f"Price file {prices}: models.x.input is 'free'" in result.stderr


def test_a_source_that_is_not_a_trace_says_which_file(tmp_path: Path) -> None:
    bad = tmp_path / "notes.txt"
    bad.write_text("hello\n")
    result = invoke("cost", str(bad))
    assert result.exit_code == 2
    assert str(bad) in result.stderr


_numbers = st.one_of(
    st.integers(min_value=-10, max_value=10**12),
    st.floats(allow_nan=True),
    st.text(max_size=6),
    st.booleans(),
    st.none(),
)


# Generation time follows the machine's load, not the code: no deadline, no too-slow check.
@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "gen_ai.usage.input_tokens",
                "gen_ai.usage.output_tokens",
                "gen_ai.usage.cache_read.input_tokens",
                "gen_ai.usage.cache_write.input_tokens",
                "gen_ai.usage.cache_creation.input_tokens",
                "gen_ai.usage.prompt_tokens",
                "anthropic.usage.cache_creation.ephemeral_1h_input_tokens",
            ]
        ),
        _numbers,
    )
)
def test_usage_attributes_of_any_shape_give_non_negative_tokens_or_none(attributes: dict[str, Any]) -> None:
    usage = usage_of(attributes)
    if usage is None:
        return
    assert isinstance(usage, Usage)
    for value in (usage.input, usage.output, usage.cache_read, usage.cache_write, usage.cache_write_1h):
        assert isinstance(value, int)
        assert value >= 0
    assert usage.cache_write_1h <= usage.cache_write


# --- the plot -------------------------------------------------------------------------------------------


def _need_matplotlib() -> None:
    """matplotlib present; fails in CI (which installs the plot extra), skips elsewhere, when it is not."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        if IN_CI:
            pytest.fail("matplotlib is not installed; CI installs spanreplay[plot] (see .ci/run).")
        pytest.skip("matplotlib is not installed (pip install 'spanreplay[plot]')")


def test_plot_draws_tokens_and_usd_per_day_with_the_outliers_in_red(source: str, tmp_path: Path) -> None:
    _need_matplotlib()
    marked, plain = tmp_path / "marked.png", tmp_path / "plain.png"
    result = invoke("cost", source, "--by", "day", "--plot", str(marked))
    assert result.exit_code == 0, result.output
    assert f"plot written to {marked}" in result.stdout
    assert invoke("cost", source, "--plot", str(plain), "--outlier-factor", "100", "--json").exit_code == 0
    width, height, rows = read_png(marked)
    assert (width, height) == (1000, 600)
    assert count_colour(rows, OUTLIER_COLOR, tolerance=10) > 100
    # Without outliers nothing is red; the bars (input tokens in blue) are there either way.
    _, _, plain_rows = read_png(plain)
    assert count_colour(plain_rows, OUTLIER_COLOR, tolerance=10) == 0
    assert count_colour(plain_rows, "#1f77b4", tolerance=10) > 300


def test_plot_without_matplotlib_says_how_to_install_it(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = invoke("cost", source, "--plot", str(tmp_path / "x.png"))
    assert result.exit_code == 2
    assert "pip install 'spanreplay[plot]'" in result.stderr

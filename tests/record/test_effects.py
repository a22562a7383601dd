"""Side effects (``effect=True``): the intent is written before the work runs, and survives SIGKILL.

A process killed inside a payment leaves its intent (run, seq, call id, masked
input) in the trace file and in Postgres; ``spanreplay show`` lists the step as
started, never finished; a replay that reaches it raises UnfinishedEffectError,
which says the payment may have happened; a fork may not go live there unless
it allows effects.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.cli import EXIT_REPRODUCED, cli
from spanreplay.replaying.effects import refuse_live_effect, unfinished_effects

EMAIL = "ann.lee@example.com"

# Shared by the recording subprocess and the replaying test. The kill happens only
# where PAYER_KILL is set (the subprocess): a replay that ran the body would not die,
# it would count a charge, which the tests look for.
AGENT = textwrap.dedent(
    """
    import os
    import signal
    import sys

    import spanreplay

    CHARGES = []

    @spanreplay.tool
    def quote(order: str) -> dict:
        return {"order": order, "amount": 4200}

    @spanreplay.tool(effect=True)
    def charge(order: str, amount: int, email: str) -> dict:
        CHARGES.append(order)
        if os.environ.get("PAYER_KILL") == "1":
            print("CHARGING", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        return {"charged": amount, "receipt": f"r-{order}"}

    def main() -> dict:
        q = quote("A-17")
        spanreplay.checkpoint("cart", {"order": q["order"], "total": q["amount"]})
        return charge(q["order"], q["amount"], EMAIL)

    if __name__ == "__main__":
        from opentelemetry.sdk.trace import TracerProvider

        spanreplay.configure(
            trace_dir=sys.argv[1], tracer_provider=TracerProvider(), raise_internal_errors=True,
            postgres=sys.argv[3] if len(sys.argv) > 3 else None,
        )
        with spanreplay.record(agent="payer", run_id=sys.argv[2]):
            main()
    """
).replace("EMAIL", repr(EMAIL))


@pytest.fixture
def payer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    (tmp_path / "payer_agent.py").write_text(AGENT)
    monkeypatch.syspath_prepend(str(tmp_path))
    import payer_agent

    yield payer_agent
    sys.modules.pop("payer_agent", None)


def _record_and_kill(tmp_path: Path, trace_dir: Path, run_id: str, dsn: str | None = None) -> None:
    """Run the agent in a child that SIGKILLs itself inside ``charge``."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "PAYER_KILL": "1",
        # Every step waits for its commit, however loaded the machine: the intent is in before the kill.
        "SPANREPLAY_POSTGRES_WAIT": "60",
    }
    args = [sys.executable, str(tmp_path / "payer_agent.py"), str(trace_dir), run_id, *([dsn] if dsn else [])]
    proc = subprocess.run(args, capture_output=True, env=env, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert proc.stdout == b"CHARGING\n"


def _query(dsn: str, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def _show(*args: str) -> Any:
    return CliRunner().invoke(cli, ["show", *args], prog_name="spanreplay")


# --- the kill ----------------------------------------------------------------------------


@pytest.mark.slow
def test_sigkill_inside_an_effect_leaves_the_intent_in_the_file_and_in_postgres(
    tmp_path: Path, pg_dsn: str, payer: ModuleType
) -> None:
    trace_dir = tmp_path / "traces"
    run_id = "run_20260101_000000_c4a26e01"
    _record_and_kill(tmp_path, trace_dir, run_id, pg_dsn)

    # The file: the intent line, written when the span started; no line ended it.
    lines = (trace_dir / f"{run_id}.jsonl").read_bytes().splitlines()
    intents = [line for line in lines if b"execute_tool charge" in line]
    assert len(intents) == 1
    assert EMAIL.encode() not in intents[0]  # the input was masked before it was written
    log = spanreplay.load(trace_dir, run_id)
    assert log.run.status == "crashed"
    [intent] = unfinished_effects(log)
    assert (intent.seq, intent.call_id, intent.kind, intent.key) == (3, "tool:charge#0", "tool", "charge")
    assert intent.effect
    assert intent.unfinished
    assert (intent.output_json, intent.error, intent.end_ns) == (None, None, 0)
    assert intent.input["order"] == "A-17"
    assert intent.input["amount"] == 4200
    assert intent.input["email"] != EMAIL
    assert "email" in intent.attributes["spanreplay.input.masked"]

    # Postgres: the intent row was committed before the work ran, and is there after the kill.
    [row] = _query(
        pg_dsn,
        "SELECT step_number, step_type, key, call_id, input->>'order', input->>'email', output_text, error_text, "
        "end_ns FROM agent_steps WHERE run_id = %s AND key = 'charge'",
        (run_id,),
    )
    assert row[:5] == (3, "tool", "charge", "tool:charge#0", "A-17")
    assert row[5] == intent.input["email"]
    assert row[6:] == (None, None, 0)
    assert spanreplay.load(pg_dsn, run_id).events == log.events  # the same log from either source

    # show lists it as started, never finished, from either source.
    for source in (str(trace_dir), pg_dsn):
        shown = _show(source, run_id)
        assert shown.exit_code == 0, shown.output
        [line] = [line for line in shown.output.splitlines() if "tool:charge#0" in line]
        assert "started, never finished" in line
        as_json = orjson.loads(_show(source, run_id, "--json").output)
        step = as_json["steps"][2]
        assert (step["call_id"], step["status"], step["effect"], step["output"]) == (
            "tool:charge#0",
            "unfinished",
            True,
            None,
        )
    detail = _show(str(trace_dir), run_id, "--seq", "3")
    assert "started, never finished" in detail.output
    assert "may have happened" in detail.output

    # Replay of the crashed run reaches it and says the payment may have happened.
    for source in (str(trace_dir), pg_dsn):
        replaying = spanreplay.replay(source, run_id)
        # Postgres holds no salt: masked values are compared by kind there, and the replay says so.
        salt_warning = (
            pytest.warns(spanreplay.SpanReplayWarning, match="salt is not here")
            if source == pg_dsn
            else contextlib.nullcontext()
        )
        with pytest.raises(spanreplay.UnfinishedEffectError) as caught, salt_warning, replaying:
            payer.main()
        assert replaying.outcome == "reproduced"  # the crash point was reached
        error = caught.value
        assert isinstance(error, spanreplay.ReplayDivergenceError)
        assert (error.run_id, error.seq, error.call_id, error.recorded) == (run_id, 3, "tool:charge#0", None)
        assert error.event == intent
        message = str(error)
        assert "tool 'charge'" in message
        assert "may have happened" in message
        assert payer.CHARGES == []  # the real work never ran
        # What a fork does with it: no going live there unless effects are allowed.
        with pytest.raises(spanreplay.LiveEffectRefusedError, match="tool 'charge'"):
            refuse_live_effect(error.event, run_id=run_id)
        refuse_live_effect(error.event, run_id=run_id, allow_effects=True)


@pytest.mark.slow
def test_replaying_a_run_killed_in_an_effect_from_the_cli_says_the_effect_may_have_happened(
    tmp_path: Path, payer: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace_dir = tmp_path / "traces"
    run_id = "run_20260101_000000_c4a26e02"
    _record_and_kill(tmp_path, trace_dir, run_id)
    result = CliRunner().invoke(
        cli, ["replay", str(trace_dir), run_id, "--entry", "payer_agent:main"], prog_name="spanreplay"
    )
    assert result.exit_code == EXIT_REPRODUCED, result.output
    assert "tool 'charge'" in result.output
    assert "may have happened" in result.output
    assert payer.CHARGES == []


# --- in process: before the work, after the work ----------------------------------------


def _lines(path: Path) -> list[dict[str, Any]]:
    """The spans of a trace file, as (name, ended, attributes) dicts."""
    out = []
    for line in path.read_bytes().splitlines():
        for resource in orjson.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    attributes = {a["key"]: a["value"] for a in span["attributes"]}
                    out.append({"name": span["name"], "ended": span.get("endTimeUnixNano", "0") != "0", **attributes})
    return out


def test_the_intent_is_in_the_trace_file_before_the_work_runs(trace_dir: Path) -> None:
    seen: list[list[dict[str, Any]]] = []

    @spanreplay.tool(effect=True)
    def send_email(to: str, body: str) -> str:
        seen.append(_lines(trace_dir / f"{run.run_id}.jsonl"))
        return "sent"

    with spanreplay.record(agent="mailer") as run:
        assert send_email(EMAIL, "your refund") == "sent"

    [before] = seen
    [intent] = [span for span in before if span["name"] == "execute_tool send_email"]
    assert not intent["ended"]
    assert intent["spanreplay.effect"] == {"boolValue": True}
    assert intent["spanreplay.call_id"] == {"stringValue": "tool:send_email#0"}
    assert EMAIL not in orjson.dumps(intent).decode()
    # After: the ended copy follows, and the log holds the finished step once.
    after = [s for s in _lines(trace_dir / f"{run.run_id}.jsonl") if s["name"] == "execute_tool send_email"]
    assert [s["ended"] for s in after] == [False, True]
    [event] = spanreplay.load(trace_dir, run.run_id).events
    assert event.effect
    assert not event.unfinished
    assert event.output == "sent"


def test_a_plain_tool_writes_no_intent(trace_dir: Path) -> None:
    @spanreplay.tool
    def lookup(q: str) -> str:
        return q.upper()

    with spanreplay.record() as run:
        lookup("x")
    spans = _lines(trace_dir / f"{run.run_id}.jsonl")
    assert [s["name"] for s in spans if "spanreplay.seq" in s] == ["execute_tool lookup"]
    [event] = spanreplay.load(trace_dir, run.run_id).events
    assert not event.effect


def test_boundary_and_async_tools_take_effect_too(trace_dir: Path) -> None:
    @spanreplay.tool(effect=True, name="refund")
    async def refund_order(order: str) -> dict:
        await asyncio.sleep(0)
        return {"refunded": order}

    async def agent() -> tuple[Any, Any]:
        first = await refund_order("A-1")
        second = spanreplay.boundary("http", "post /mail", {"to": "x"}, lambda: 202, effect=True)
        return first, second

    with spanreplay.record() as run:
        assert asyncio.run(agent()) == ({"refunded": "A-1"}, 202)
    names = [s["name"] for s in _lines(trace_dir / f"{run.run_id}.jsonl") if "spanreplay.seq" in s]
    assert names == ["execute_tool refund", "execute_tool refund", "http post /mail", "http post /mail"]
    log = spanreplay.load(trace_dir, run.run_id)
    assert [(e.key, e.effect, e.unfinished) for e in log] == [("refund", True, False), ("post /mail", True, False)]
    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        assert asyncio.run(agent()) == ({"refunded": "A-1"}, 202)
    assert replaying.outcome == "completed"


def test_an_effect_that_fails_records_its_error_as_the_outcome(trace_dir: Path) -> None:
    @spanreplay.tool(effect=True)
    def pay(amount: int) -> None:
        raise ConnectionError("the bank hung up")

    with pytest.raises(ConnectionError), spanreplay.record() as run:
        pay(5)
    [event] = spanreplay.load(trace_dir, run.run_id).events
    assert event.effect
    assert not event.unfinished
    assert event.error is not None
    with pytest.raises(ConnectionError, match="the bank hung up"), spanreplay.replay(trace_dir, run.run_id) as again:
        pay(5)
    assert again.outcome == "reproduced"


def test_only_a_side_effect_that_never_ended_may_lack_an_outcome(trace_dir: Path) -> None:
    import msgspec

    from spanreplay.model.codec import span_to_event
    from spanreplay.readers import iter_spans

    @spanreplay.tool(effect=True)
    def pay(amount: int) -> int:
        return amount

    with spanreplay.record() as run:
        pay(3)
    [intent] = [
        s for s in iter_spans(trace_dir / f"{run.run_id}.jsonl") if "spanreplay.seq" in s.attributes and not s.ended
    ]
    assert span_to_event(intent).unfinished
    without = {k: v for k, v in intent.attributes.items() if k != "spanreplay.effect"}
    broken = [
        msgspec.structs.replace(intent, attributes=without),  # a plain boundary that never ended
        msgspec.structs.replace(intent, end_ns=intent.start_ns + 1),  # ended, yet no outcome
        msgspec.structs.replace(intent, attributes={**intent.attributes, "spanreplay.effect": "true"}),
        msgspec.structs.replace(
            intent, attributes={k: v for k, v in intent.attributes.items() if not k.startswith("spanreplay.input")}
        ),
    ]
    for span in broken:
        with pytest.raises(spanreplay.PayloadIntegrityError):
            span_to_event(span)


# --- Postgres ------------------------------------------------------------------------------


@pytest.fixture
def pg_recording(
    pg_dsn: str, tmp_path: Path, provider: TracerProvider, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str]:
    monkeypatch.setenv("SPANREPLAY_POSTGRES_WAIT", "60")
    directory = tmp_path / "traces"
    spanreplay.configure(trace_dir=directory, tracer_provider=provider, raise_internal_errors=True, postgres=pg_dsn)
    return directory, pg_dsn


def test_the_intent_row_is_committed_before_the_work_runs_and_filled_in_after(
    pg_recording: tuple[Path, str], provider: TracerProvider
) -> None:
    directory, dsn = pg_recording
    seen: list[list[tuple[Any, ...]]] = []
    sql = "SELECT step_number, call_id, output_text, end_ns FROM agent_steps WHERE key = 'pay'"

    @spanreplay.tool(effect=True)
    def pay(amount: int) -> dict:
        seen.append(_query(dsn, sql))  # another connection: sees only what was committed
        return {"paid": amount}

    with spanreplay.record() as run:
        pay(12)
    assert seen == [[(1, "tool:pay#0", None, 0)]]
    provider.force_flush()
    [(seq, call_id, output, end_ns)] = _query(dsn, sql)
    assert (seq, call_id, output) == (1, "tool:pay#0", '{"paid":12}')
    assert end_ns > 0
    assert spanreplay.load(dsn, run.run_id).events == spanreplay.load(directory, run.run_id).events


def test_the_run_totals_count_an_effect_once_and_its_failure(
    pg_recording: tuple[Path, str], provider: TracerProvider
) -> None:
    _, dsn = pg_recording

    @spanreplay.tool(effect=True)
    def pay(amount: int) -> None:
        raise ValueError("declined")

    @spanreplay.tool
    def note(text: str) -> str:
        return text

    with spanreplay.record() as run:
        note("a")
        for amount in (1, 2):
            with contextlib.suppress(ValueError):
                pay(amount)
    provider.force_flush()
    [(recorded, failed)] = _query(
        dsn, "SELECT steps_recorded, steps_failed FROM agent_runs WHERE run_id = %s", (run.run_id,)
    )
    assert (recorded, failed) == (3, 2)


def test_exporting_a_file_with_intents_gives_the_same_rows(pg_dsn: str, trace_dir: Path, tmp_path: Path) -> None:
    from spanreplay.recording.postgres.backfill import export

    @spanreplay.tool(effect=True)
    def pay(amount: int) -> int:
        return amount

    with spanreplay.record() as run:
        pay(1)
        pay(2)
    done = export(trace_dir, pg_dsn)
    assert (done.steps_seen, done.steps_added) == (2, 2)  # an intent and its outcome are one step
    assert _query(pg_dsn, "SELECT step_number, output_text FROM agent_steps ORDER BY step_number") == [
        (1, "1"),
        (2, "2"),
    ]
    assert spanreplay.load(pg_dsn, run.run_id).events == spanreplay.load(trace_dir, run.run_id).events
    assert export(trace_dir, pg_dsn).steps_added == 0

    # The same run cut where a kill inside the second payment would have left it.
    lines = (trace_dir / f"{run.run_id}.jsonl").read_bytes().splitlines(keepends=True)
    assert [b"execute_tool pay" in line for line in lines] == [False, True, True, True, True, False]
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    (crashed / "run.jsonl").write_bytes(b"".join(lines[:4]))
    with psycopg_connect(pg_dsn) as conn:
        conn.execute("DELETE FROM agent_steps")  # no cascade since the tables are partitioned
        conn.execute("DELETE FROM agent_runs")
    done = export(crashed, pg_dsn)
    assert (done.steps_seen, done.steps_added) == (2, 2)
    assert _query(pg_dsn, "SELECT step_number, output_text, end_ns FROM agent_steps ORDER BY step_number")[1] == (
        2,
        None,
        0,
    )
    log = spanreplay.load(pg_dsn, run.run_id)
    assert [e.seq for e in unfinished_effects(log)] == [2]
    assert log.events == spanreplay.load(crashed, run.run_id).events


def psycopg_connect(dsn: str) -> Any:
    import psycopg

    return psycopg.connect(dsn, autocommit=True)


# --- the fork's hook -------------------------------------------------------------------------


def test_refuse_live_effect_refuses_an_unfinished_effect_unless_allowed() -> None:
    intent = spanreplay.Event(
        run_id="r", seq=4, call_id="tool:pay#0", kind="tool", key="pay", input_json=b'{"amount":5}', effect=True
    )
    with pytest.raises(spanreplay.LiveEffectRefusedError) as caught:
        refuse_live_effect(intent, run_id="r")
    assert isinstance(caught.value, spanreplay.UnfinishedEffectError)
    assert isinstance(caught.value, spanreplay.ReplayDivergenceError)
    assert (caught.value.seq, caught.value.call_id, caught.value.event) == (4, "tool:pay#0", intent)
    assert "allow_effects=True" in str(caught.value)
    assert "--allow-effects" in str(caught.value)
    assert "tool 'pay'" in str(caught.value)
    assert "may have happened" in str(caught.value)
    refuse_live_effect(intent, run_id="r", allow_effects=True)
    finished = spanreplay.Event(
        run_id="r", seq=4, call_id="tool:pay#0", kind="tool", key="pay", input_json=b"{}", output_json=b"1", effect=True
    )
    refuse_live_effect(finished, run_id="r")
    refuse_live_effect(None, run_id="r")
    plain = spanreplay.Event(run_id="r", seq=1, call_id="tool:x#0", kind="tool", key="x", input_json=b"{}")
    refuse_live_effect(plain, run_id="r")


@pytest.mark.slow
def test_a_fork_refuses_to_go_live_at_an_unfinished_effect_unless_effects_are_allowed(
    tmp_path: Path, payer: ModuleType
) -> None:
    trace_dir = tmp_path / "traces"
    run_id = "run_20260101_000000_f04c0e11"
    _record_and_kill(tmp_path, trace_dir, run_id)
    spanreplay.configure(trace_dir=tmp_path / "forks", tracer_provider=TracerProvider(), raise_internal_errors=True)
    try:
        # at=None: the fork serves the quote and the checkpoint, then would charge live.
        with (
            pytest.raises(spanreplay.LiveEffectRefusedError, match="tool 'charge'"),
            spanreplay.fork(trace_dir, run_id),
        ):
            payer.main()
        assert payer.CHARGES == []
        # A fork point after the charge cannot serve it (no outcome was recorded): it fails closed.
        with pytest.raises(spanreplay.UnfinishedEffectError), spanreplay.fork(trace_dir, run_id, at=4):
            payer.main()
        assert payer.CHARGES == []
        # Allowed: the charge runs live in the new run, which names its parent.
        with spanreplay.fork(trace_dir, run_id, allow_effects=True) as forked:
            assert payer.main()["charged"] == 4200
        assert payer.CHARGES == ["A-17"]
        assert (forked.forked_at, spanreplay.load(tmp_path / "forks", forked.run_id).run.forked_from) == (3, run_id)
    finally:
        spanreplay.reset()


@pytest.mark.slow
def test_a_fork_whose_code_catches_the_refusal_still_ends_with_it(tmp_path: Path, payer: ModuleType) -> None:
    trace_dir = tmp_path / "traces"
    run_id = "run_20260101_000000_f04c0e12"
    _record_and_kill(tmp_path, trace_dir, run_id)
    spanreplay.configure(trace_dir=tmp_path / "forks", tracer_provider=TracerProvider(), raise_internal_errors=True)
    try:
        for at in (None, 4):  # refused live at the charge; or a fork point after it, with nothing to serve
            # The agent swallows the error: the fork must not end as if the charge were done.
            with pytest.raises(spanreplay.UnfinishedEffectError), spanreplay.fork(trace_dir, run_id, at=at):  # noqa: SIM117
                with contextlib.suppress(spanreplay.UnfinishedEffectError):
                    payer.main()
        assert payer.CHARGES == []
    finally:
        spanreplay.reset()

"""Replay mode: served from the recording, never the real work; divergence named precisely."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay


class QuotaError(Exception):
    def __init__(self, message: str, status_code: int = 500) -> None:
        super().__init__(message)
        self.status_code = status_code


class WrappedResponseError(Exception):
    """Cannot be rebuilt from its message: the constructor wants a response."""

    def __init__(self, response: dict[str, int]) -> None:
        super().__init__(f"upstream said {response['status']}")


class RealWork:
    """The agent's real tools. Once disarmed, any call fails the test loudly."""

    def __init__(self) -> None:
        self.armed = True
        self.calls: list[str] = []
        self.fail_charge: BaseException | None = None

    def _enter(self, name: str) -> None:
        if not self.armed:
            pytest.fail(f"replay called the real {name}()")
        self.calls.append(name)


WORK = RealWork()


@pytest.fixture(autouse=True)
def _fresh_work() -> None:
    WORK.__init__()  # type: ignore[misc]


@spanreplay.tool
def search(query: str, request_id: str = "r-1") -> list[str]:
    WORK._enter("search")
    return [f"{query}:{uuid.uuid4().hex[:6]}"]


@spanreplay.tool
async def lookup(order_id: int) -> dict[str, Any]:
    WORK._enter("lookup")
    await asyncio.sleep(0)
    return {"order": order_id, "eta_days": uuid.uuid4().int % 9}


@spanreplay.tool
def charge(amount: int) -> str:
    WORK._enter("charge")
    if WORK.fail_charge is not None:
        raise WORK.fail_charge
    return "ok"


def agent(steps: list[Any]) -> None:
    """A small agent: its branches depend on the clock and on a random draw."""
    steps.append(search("shoes"))
    now = spanreplay.now()
    steps.append(now)
    if spanreplay.random() < 2:
        steps.append(spanreplay.uuid4())
    steps.append(asyncio.run(lookup(41 if now.microsecond % 2 else 42)))
    steps.append(charge(10))


def _record(body: Callable[[], None], *, agent_name: str = "shop") -> str:
    with spanreplay.record(agent=agent_name) as run:
        body()
    return run.run_id


def _record_failing(body: Callable[[], None], exc_type: type[BaseException]) -> str:
    with pytest.raises(exc_type), spanreplay.record(agent="shop") as run:
        body()
    return run.run_id


def _line(message: str, side: str) -> str:
    match = re.search(rf"^{side}: (.*)$", message, re.MULTILINE)
    assert match is not None, message
    return match.group(1)


# --- serving -----------------------------------------------------------------------


def test_replay_serves_every_recorded_result_without_calling_the_real_work(trace_dir: Path) -> None:
    recorded: list[Any] = []
    run_id = _record(lambda: agent(recorded))
    assert WORK.calls == ["search", "lookup", "charge"]
    WORK.armed = False
    replayed: list[Any] = []
    with spanreplay.replay(trace_dir, run_id) as run:
        assert run.mode is spanreplay.Mode.REPLAY
        assert spanreplay.current_run() is run
        agent(replayed)
    assert replayed == recorded
    assert isinstance(replayed[1], datetime)
    assert isinstance(replayed[2], uuid.UUID)
    assert run.outcome == "completed"
    assert isinstance(run.events, spanreplay.EventLog)
    assert len(run.events) == 6


def test_replay_serves_by_call_id_through_run_boundary(trace_dir: Path) -> None:
    with spanreplay.record() as run:
        first = run.boundary("kv", "get", {"k": 1}, lambda: "one")
        second = run.boundary("kv", "get", {"k": 2}, lambda: "two")

    def never() -> str:
        pytest.fail("replay ran the real work")

    with spanreplay.replay(trace_dir, run.run_id) as replaying:
        assert replaying.boundary("kv", "get", {"k": 1}, never) == first
        assert replaying.boundary("kv", "get", {"k": 2}, never) == second
    assert replaying.outcome == "completed"


def test_async_with_replays_an_async_agent(trace_dir: Path) -> None:
    async def main() -> list[dict[str, Any]]:
        return [await lookup(1), await lookup(2)]

    async def record() -> tuple[str, list[dict[str, Any]]]:
        async with spanreplay.record() as run:
            return run.run_id, await main()

    run_id, recorded = asyncio.run(record())
    WORK.armed = False

    async def replay() -> list[dict[str, Any]]:
        async with spanreplay.replay(trace_dir, run_id):
            return await main()

    assert asyncio.run(replay()) == recorded


def test_a_callable_that_returned_a_coroutine_replays_as_an_awaitable(trace_dir: Path) -> None:
    async def fetch(url: str) -> str:
        WORK._enter("fetch")
        await asyncio.sleep(0)
        return f"body of {url}"

    async def main() -> str:
        return await spanreplay.boundary("http", "get", {"url": "u"}, lambda: fetch("u"))

    async def record() -> tuple[str, str]:
        async with spanreplay.record() as run:
            return run.run_id, await main()

    run_id, recorded = asyncio.run(record())
    WORK.armed = False

    async def replay() -> str:
        async with spanreplay.replay(trace_dir, run_id):
            return await main()

    assert asyncio.run(replay()) == recorded == "body of u"


def test_replay_accepts_an_event_log(trace_dir: Path) -> None:
    run_id = _record(lambda: search("x") and None)
    log = spanreplay.load(trace_dir, run_id)
    WORK.armed = False
    with spanreplay.replay(log) as run:
        search("x")
    assert run.events is log


def test_replay_emits_no_spans_to_the_production_exporters(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    run_id = _record(lambda: agent([]))
    assert memory_exporter.get_finished_spans()
    memory_exporter.clear()
    before = {p: p.read_bytes() for p in trace_dir.rglob("*") if p.is_file()}
    WORK.armed = False
    with spanreplay.replay(trace_dir, run_id):
        agent([])
    assert memory_exporter.get_finished_spans() == ()
    assert {p: p.read_bytes() for p in trace_dir.rglob("*") if p.is_file()} == before


# --- recorded failures -------------------------------------------------------------


def test_a_recorded_error_is_raised_again_at_the_same_seq_with_its_fields(trace_dir: Path) -> None:
    WORK.fail_charge = QuotaError("card declined", status_code=402)
    recorded: list[Any] = []
    run_id = _record_failing(lambda: agent(recorded), QuotaError)
    log = spanreplay.load(trace_dir, run_id)
    failed = [e.seq for e in log if e.failed]
    assert failed == [6]
    WORK.armed = False
    replayed: list[Any] = []
    run = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(QuotaError) as caught, run:
        agent(replayed)
    assert str(caught.value) == "card declined"
    assert caught.value.status_code == 402
    assert replayed == recorded  # the same five steps ran before it, so it came at seq 6
    assert run.outcome == "reproduced"


def test_an_error_that_cannot_be_rebuilt_replays_as_recorded_error_and_counts_as_reproduced(
    trace_dir: Path,
) -> None:
    WORK.fail_charge = WrappedResponseError({"status": 503})
    run_id = _record_failing(lambda: agent([]), WrappedResponseError)
    WORK.armed = False
    run = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(spanreplay.RecordedError) as caught, run:
        agent([])
    assert caught.value.type_name == "WrappedResponseError"
    assert caught.value.message == "upstream said 503"
    assert f"{__name__}.WrappedResponseError" in str(caught.value)
    assert run.outcome == "reproduced"


def test_an_os_error_replays_as_its_own_subclass_with_errno(trace_dir: Path) -> None:
    def read() -> str:
        with open(trace_dir.parent / "missing.txt") as f:
            return f.read()

    with pytest.raises(FileNotFoundError), spanreplay.record() as run:
        spanreplay.boundary("file", "read", None, read)
    with pytest.raises(FileNotFoundError) as caught, spanreplay.replay(trace_dir, run.run_id):
        spanreplay.boundary("file", "read", None, lambda: pytest.fail("read the real file"))
    assert caught.value.errno == 2
    assert caught.value.filename == str(trace_dir.parent / "missing.txt")


# --- divergence --------------------------------------------------------------------


def test_a_call_the_recording_lacks_raises_unexpected_call_naming_both_sides(trace_dir: Path) -> None:
    run_id = _record(lambda: search("a") and None)
    WORK.armed = False
    run = spanreplay.replay(trace_dir, run_id)

    def one_call_more() -> None:
        search("a")
        spanreplay.now()

    with pytest.raises(spanreplay.UnexpectedCallError) as caught, run:
        one_call_more()
    err = caught.value
    message = str(err)
    assert run_id in message
    assert (err.run_id, err.seq, err.call_id, err.recorded) == (run_id, 2, "clock:now#0", None)
    assert "nothing more" in _line(message, "Recorded")
    attempted = _line(message, "Attempted")
    assert "clock 'now'" in attempted
    assert "clock:now#0" in attempted
    # The headline names the call's seq, as .seq does; the recorded side says where the recording ends;
    # the attempted side repeats no other number.
    assert "diverged at seq 2 " in message.split("\n", 1)[0]
    assert "last step is seq 1" in _line(message, "Recorded")
    assert "seq" not in attempted
    assert run.outcome == "diverged"


def test_a_different_call_at_that_point_raises_different_call_naming_both_sides(trace_dir: Path) -> None:
    run_id = _record(lambda: search("a") and None)
    WORK.armed = False
    with pytest.raises(spanreplay.DifferentCallError) as caught, spanreplay.replay(trace_dir, run_id):
        asyncio.run(lookup(3))
    err = caught.value
    message = str(err)
    assert run_id in message
    assert "seq 1" in message
    recorded, attempted = _line(message, "Recorded"), _line(message, "Attempted")
    assert "tool 'search'" in recorded
    assert "tool:search#0" in recorded
    assert '"query":"a"' in recorded
    assert "tool 'lookup'" in attempted
    assert "tool:lookup#0" in attempted
    assert '"order_id":3' in attempted
    assert err.call_id == "tool:lookup#0"
    assert err.seq == 1


def test_a_changed_input_raises_input_changed_with_a_diff_recorded_first(trace_dir: Path) -> None:
    run_id = _record(lambda: search("red shoes") and None)
    WORK.armed = False
    with pytest.raises(spanreplay.InputChangedError) as caught, spanreplay.replay(trace_dir, run_id):
        search("blue shoes")
    err = caught.value
    message = str(err)
    assert run_id in message
    assert "seq 1" in message
    assert "tool:search#0" in message
    assert "red shoes" in _line(message, "Recorded")
    assert "blue shoes" in _line(message, "Attempted")
    assert '-  "query": "red shoes"' in err.diff
    assert '+  "query": "blue shoes"' in err.diff
    assert err.diff in message


def test_a_run_that_ends_early_raises_leftover_events_listing_them(trace_dir: Path) -> None:
    run_id = _record(lambda: agent([]))
    WORK.armed = False
    run = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(spanreplay.LeftoverEventsError) as caught, run:
        search("shoes")
    err = caught.value
    message = str(err)
    assert run_id in message
    assert err.leftover == ("clock:now#0", "random:random#0", "uuid:uuid4#0", "tool:lookup#0", "tool:charge#0")
    assert err.seq == 2
    assert "5 recorded event(s)" in message
    assert "first at seq 2" in message
    assert "clock 'now'" in _line(message, "Recorded")
    assert "clock:now#0" in _line(message, "Recorded")
    assert _line(message, "Attempted") == "nothing more, the run ended"
    assert "tool:charge#0" in message
    assert run.outcome == "diverged"


def test_leftover_events_are_allowed_when_not_strict(trace_dir: Path) -> None:
    run_id = _record(lambda: agent([]))
    WORK.armed = False
    with spanreplay.replay(trace_dir, run_id, require_all_steps=False) as run:
        search("shoes")
    assert run.outcome == "completed"


def test_a_recorded_failure_that_no_longer_happens_raises_outcome_changed(trace_dir: Path) -> None:
    def body() -> None:
        search("x")
        raise ValueError("bad answer")

    run_id = _record_failing(body, ValueError)
    WORK.armed = False
    with pytest.raises(spanreplay.OutcomeChangedError) as caught, spanreplay.replay(trace_dir, run_id):
        search("x")
    message = str(caught.value)
    assert run_id in message
    assert _line(message, "Recorded") == "the run failed with ValueError: bad answer"
    assert _line(message, "Attempted") == "the run completed without error"
    assert caught.value.recorded == "ValueError: bad answer"
    assert caught.value.attempted == "completed without error"


def test_a_new_failure_between_matching_steps_raises_outcome_changed(trace_dir: Path) -> None:
    run_id = _record(lambda: search("x") and None)
    WORK.armed = False

    def parse_wrong() -> None:
        search("x")
        raise KeyError("parsed wrong")

    with pytest.raises(spanreplay.OutcomeChangedError) as caught, spanreplay.replay(trace_dir, run_id):
        parse_wrong()
    message = str(caught.value)
    assert "but the recorded run did not fail" in message
    assert _line(message, "Recorded") == "the run did not fail (status ok)"
    assert _line(message, "Attempted") == "the run failed with KeyError: 'parsed wrong'"
    assert caught.value.attempted == "KeyError: 'parsed wrong'"
    assert isinstance(caught.value.__cause__, KeyError)


def test_a_recorded_failure_that_recurs_from_the_agent_code_counts_as_reproduced(trace_dir: Path) -> None:
    def body() -> None:
        if search("x"):
            raise ValueError("bad answer")

    run_id = _record_failing(body, ValueError)
    WORK.armed = False
    run = spanreplay.replay(trace_dir, run_id)
    with pytest.raises(ValueError, match="bad answer"), run:
        body()
    assert run.outcome == "reproduced"


# --- ignore_paths -------------------------------------------------------------------


def test_ignore_paths_leave_volatile_fields_out_of_the_comparison(trace_dir: Path) -> None:
    def ask(request_id: str, stamp: int) -> Any:
        payload = {"q": "hi", "request_id": request_id, "messages": [{"text": "a", "ts": stamp}]}
        return spanreplay.boundary("model", "m", payload, lambda: "reply")

    with spanreplay.record() as run:
        ask("req-1", 1)
    with spanreplay.replay(trace_dir, run.run_id, ignore_paths=["request_id", "messages[*].ts"]) as replaying:
        assert ask("req-2", 2) == "reply"
    assert replaying.outcome == "completed"
    with pytest.raises(spanreplay.InputChangedError) as caught, spanreplay.replay(trace_dir, run.run_id):
        ask("req-2", 1)
    assert "request_id" in caught.value.diff


def test_ignore_paths_do_not_hide_other_changes(trace_dir: Path) -> None:
    with spanreplay.record() as run:
        spanreplay.boundary("model", "m", {"q": "hi", "id": 1}, lambda: "reply")
    with (
        pytest.raises(spanreplay.InputChangedError) as caught,
        spanreplay.replay(trace_dir, run.run_id, ignore_paths=["id"]),
    ):
        spanreplay.boundary("model", "m", {"q": "bye", "id": 2}, lambda: "reply")
    assert '"q": "bye"' in caught.value.diff
    assert '"id"' not in caught.value.diff


def test_a_malformed_ignore_path_is_a_configuration_error(trace_dir: Path) -> None:
    run_id = _record(lambda: search("x") and None)
    with pytest.raises(spanreplay.ConfigurationError, match="messages"):
        spanreplay.replay(trace_dir, run_id, ignore_paths=["messages[x"])


def test_a_failure_recorded_under_a_former_type_name_is_still_reproduced() -> None:
    with pytest.warns(DeprecationWarning, match="TraceFailed is now spanreplay.errors.TraceFailedError"):
        former = spanreplay.errors.TraceFailed  # type: ignore[attr-defined]
    assert former is spanreplay.errors.TraceFailedError
    recorded = spanreplay.ErrorInfo("TraceFailed", "spanreplay.errors", "LookupError: order B-2 is lost")
    log = spanreplay.EventLog(spanreplay.RunInfo("run_old", status="error", error=recorded), ())
    run = spanreplay.replay(log)
    with pytest.raises(spanreplay.errors.TraceFailedError), run:
        raise spanreplay.errors.TraceFailedError("LookupError: order B-2 is lost")
    assert run.outcome == "reproduced"

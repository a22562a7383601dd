"""Each private name spanreplay reads fails soft when an SDK release takes it away.

An accelerator (``spanreplay._accelerators``) whose private names are missing or
changed goes off at its preflight with one log line, and the public path serves:
the agent records and replays the same objects. A name the instrumentation
stands on (a wrapped SDK method) missing, or taking other parameters, leaves the
SDK uninstrumented with one log line: the agent runs, unrecorded, unbroken.

Each test changes the real library the way a release could (a helper gone, a
field kept elsewhere or as another type, a method with other parameters), then
records and replays an agent through the local Messages API server.
"""

from __future__ import annotations

import collections
import importlib
import logging
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic import _base_client
from anthropic.lib.tools import _beta_runner
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.trace import Tracer

import spanreplay
from helpers.accelerators import needs_accelerator
from helpers.messages_api_server import MODEL, MessagesAPIServer, instrument, reply, serve, text, tool_use
from spanreplay import _accelerators
from spanreplay.instrumentation.anthropic import AnthropicInstrumentor, _direct

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

ARGS: dict[str, Any] = {"model": MODEL, "max_tokens": 256, "messages": [{"role": "user", "content": "A-17?"}]}


def agent(client: anthropic.Anthropic) -> list[Any]:
    """A plain call answered with a tool use, then a stream: both replay paths."""
    first = client.messages.create(**ARGS)
    with client.messages.stream(**ARGS) as stream:
        events = list(stream)
        return [first, first._request_id, events, stream.get_final_message()]


def round_trip(server: MessagesAPIServer, trace_dir: Path) -> tuple[list[Any], list[Any], spanreplay.EventLog]:
    server.script(
        reply(text("Checking."), tool_use("get_order_status", {"order_id": "A-17"}, "toolu_1")),
        reply(text("It shipped yesterday.")),
    )
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client:
        with spanreplay.record() as run:
            recorded = agent(client)
        server.stop()
        log = spanreplay.load(trace_dir, run.run_id)
        with spanreplay.replay(log) as replay:
            replayed = agent(client)
    assert replay.outcome == "completed"
    return recorded, replayed, log


@pytest.fixture
def rechecked() -> Iterator[Callable[[], None]]:
    """``recheck``: run every accelerator's preflight again; once more afterwards, on the library as it was."""
    yield _accelerators.recheck
    _accelerators.recheck()


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "spanreplay" and r.levelno >= logging.WARNING]


def assert_soft(caplog: pytest.LogCaptureFixture, name: str, problem: str) -> None:
    """One log line says the accelerator ``name`` went off, and why."""
    lines = [line for line in warnings_of(caplog) if f"the {name} accelerator is off" in line]
    assert len(lines) == 1, warnings_of(caplog)
    assert problem in lines[0]
    assert "serves instead (the same results, slower)" in lines[0]
    assert not _accelerators.ACCELERATORS[name].on


# --- accelerators: off, one line, the same objects ------------------------------------------------


@needs_accelerator("direct")
def test_without_the_sdks_private_model_helpers_the_sdk_path_replays(
    server: MessagesAPIServer,
    trace_dir: Path,
    instrumented: None,
    rechecked: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from anthropic import _models

    served: list[Any] = []
    try:
        with pytest.MonkeyPatch.context() as patch:
            # A release without the helper: the direct path's module finds it missing on import.
            patch.delattr(_models, "_build_discriminated_union_meta")
            importlib.reload(_direct)
            assert not _direct.ENABLED
            serve = _direct.serve
            monkeypatch.setattr(_direct, "serve", lambda *a: served.append(a) or serve(*a))
            with caplog.at_level(logging.WARNING, logger="spanreplay"):
                rechecked()
                recorded, replayed, _ = round_trip(server, trace_dir)
            assert_soft(caplog, "direct", "lacks the private model helpers the direct replay path builds with")
    finally:
        monkeypatch.undo()
        importlib.reload(_direct)
    assert replayed == recorded
    assert served == []
    assert recorded[0].content[1].input == {"order_id": "A-17"}


@needs_accelerator("direct")
def test_a_client_field_kept_elsewhere_turns_the_direct_path_off(
    server: MessagesAPIServer,
    trace_dir: Path,
    instrumented: None,
    rechecked: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A release that keeps _strict_response_validation on the class, not on each client.
    init = anthropic.Anthropic.__init__

    def moved(self: anthropic.Anthropic, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        del self.__dict__["_strict_response_validation"]

    monkeypatch.setattr(anthropic.Anthropic, "__init__", moved)
    monkeypatch.setattr(anthropic.Anthropic, "_strict_response_validation", False, raising=False)
    with caplog.at_level(logging.WARNING, logger="spanreplay"):
        rechecked()
        recorded, replayed, _ = round_trip(server, trace_dir)
    assert_soft(caplog, "direct", "client keeps no _strict_response_validation")
    assert replayed == recorded


@needs_accelerator("boundary_spans")
def test_a_tracer_whose_span_limits_changed_type_records_through_start_span(
    server: MessagesAPIServer,
    trace_dir: Path,
    instrumented: None,
    rechecked: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    init = Tracer.__init__

    def changed(self: Tracer, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        # The same limits, in another type: the SDK's own spans read them as before.
        self._span_limits = types.SimpleNamespace(**vars(self._span_limits))  # type: ignore[assignment]

    monkeypatch.setattr(Tracer, "__init__", changed)
    with caplog.at_level(logging.WARNING, logger="spanreplay"):
        rechecked()
        recorded, replayed, log = round_trip(server, trace_dir)
    assert_soft(caplog, "boundary_spans", "Tracer has no _span_limits")
    assert replayed == recorded
    assert [event.kind for event in log.events] == ["model", "model"]


@needs_accelerator("attribute_dict")
def test_spans_whose_attributes_are_kept_another_way_are_read_through_the_public_property(
    server: MessagesAPIServer,
    trace_dir: Path,
    instrumented: None,
    rechecked: Callable[[], None],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    init = BoundedAttributes.__init__

    def ordered(self: BoundedAttributes, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self._dict = collections.OrderedDict(self._dict)

    monkeypatch.setattr(BoundedAttributes, "__init__", ordered)
    with caplog.at_level(logging.WARNING, logger="spanreplay"):
        rechecked()
        recorded, replayed, log = round_trip(server, trace_dir)
    assert_soft(caplog, "attribute_dict", "no longer keep their attributes in _attributes._dict")
    assert replayed == recorded
    assert [event.kind for event in log.events] == ["model", "model"]


def test_accelerate_false_turns_every_accelerator_off_and_the_agent_sees_the_same(
    server: MessagesAPIServer, trace_dir: Path, provider: Any, instrumented: None, caplog: pytest.LogCaptureFixture
) -> None:
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=True, accelerate=False)
    try:
        assert not any(a.on for a in _accelerators.ACCELERATORS.values())
        with caplog.at_level(logging.WARNING, logger="spanreplay"):
            recorded, replayed, _ = round_trip(server, trace_dir)
        assert replayed == recorded
        assert warnings_of(caplog) == []  # off by choice: nothing to say
    finally:
        spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=True)
    assert all(a.on for a in _accelerators.ACCELERATORS.values()) == _accelerators.accelerate()


# --- names the instrumentation stands on: uninstrumented, one line, unbroken ------------------------


def _instrument_logs(caplog: pytest.LogCaptureFixture) -> list[str]:
    instrumentor = AnthropicInstrumentor()
    with caplog.at_level(logging.WARNING, logger="spanreplay"):
        instrumentor.instrument(zero_code=False)
    assert not instrumentor.is_instrumented_by_opentelemetry
    return warnings_of(caplog)


def _runs_unrecorded(server: MessagesAPIServer, trace_dir: Path) -> None:
    server.script(reply(text("Live.")))
    with anthropic.Anthropic(base_url=server.url, api_key="test-key") as client, spanreplay.record() as run:
        assert client.messages.create(**ARGS).content[0].text == "Live."  # type: ignore[union-attr]
    assert list(spanreplay.load(trace_dir, run.run_id).events) == []


def test_a_tool_runner_without_its_wrapped_method_leaves_the_sdk_uninstrumented(
    server: MessagesAPIServer, trace_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(_beta_runner.BaseSyncToolRunner, "_run_toolset_member")
    (line,) = _instrument_logs(caplog)
    assert f"anthropic {anthropic.__version__} has no BaseSyncToolRunner._run_toolset_member" in line
    assert "so Anthropic calls are not recorded or replayed" in line
    _runs_unrecorded(server, trace_dir)


def test_an_attempt_method_with_other_parameters_leaves_the_sdk_uninstrumented(
    server: MessagesAPIServer, trace_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempt = _base_client.SyncAPIClient._attempt_request

    def renamed(self: Any, request_options: Any, *args: Any, **kwargs: Any) -> Any:
        return attempt(self, request_options, *args, **kwargs)

    monkeypatch.setattr(_base_client.SyncAPIClient, "_attempt_request", renamed)
    (line,) = _instrument_logs(caplog)
    assert "has a SyncAPIClient._attempt_request(request_options, args, kwargs), not (options, ...)" in line
    _runs_unrecorded(server, trace_dir)


def test_a_client_whose_tracer_is_no_property_still_records_and_replays(
    server: MessagesAPIServer, trace_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The SDK's spans are silenced through the _tracer property; without it they are left as they are.
    monkeypatch.setattr(_base_client.BaseClient, "_tracer", None)
    instrumentor = AnthropicInstrumentor()
    instrumentor.instrument(zero_code=False)
    try:
        recorded, replayed, _ = round_trip(server, trace_dir)
    finally:
        instrumentor.uninstrument()
    assert replayed == recorded
    assert _base_client.BaseClient.__dict__["_tracer"] is None

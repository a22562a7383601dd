"""A Claude agent recorded by OpenInference's, OpenLLMetry's, then the SDK's own telemetry, replayed by spanreplay.

The instrumentors run in a virtual environment of their own
(``foreign_instrumentors``: they register an ``anthropic`` instrumentor entry
point, as spanreplay does); the agent is recorded there against the local
Messages API server into a Collector proto file. Here, with spanreplay alone,
that file is listed, costed and replayed with the server stopped. Where the
environment cannot be built the tests skip, except under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import anthropic
import pytest
from click.testing import CliRunner

import spanreplay
from helpers.foreign_fixtures import ANSWER, TOOLS_RUN, total_tokens, trace_id
from helpers.foreign_instrumentors import INSTRUMENTORS, InstrumentorsUnavailable, ensure_installed, record
from helpers.messages_api_server import MessagesAPIServer, instrument, support_model
from spanreplay.cli import cli

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "helpers"))
import foreign_agent

pytestmark = pytest.mark.slow
instrumented = pytest.fixture(instrument, name="instrumented")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture(scope="module", autouse=True)
def instrumentors() -> None:
    try:
        ensure_installed()
    except InstrumentorsUnavailable as exc:
        if IN_CI:
            raise
        pytest.skip(str(exc))


@pytest.fixture(name="server")
def support_server() -> Iterator[MessagesAPIServer]:
    with MessagesAPIServer(default=support_model) as server:
        yield server


@pytest.mark.parametrize("stream", [False, True], ids=["create", "stream"])
@pytest.mark.parametrize("which", INSTRUMENTORS)
def test_recorded_by_another_instrumentor_listed_costed_and_replayed_offline(
    instrumented: None, server: MessagesAPIServer, tmp_path: Path, which: str, stream: bool
) -> None:
    path = tmp_path / "collector.binpb"
    recorded = record(which, server.url, path, stream=stream)
    assert recorded == {"answer": ANSWER, "tools": TOOLS_RUN}
    server.stop()  # from here on, the API is unreachable

    (run,) = spanreplay.runs(path)
    assert run.run_id == trace_id(path)
    assert run.agent == which
    assert run.model_calls == 3
    assert run.tokens == total_tokens(path) > 0

    costed = CliRunner().invoke(cli, ["cost", str(path), "--by", "run", "--json"])
    assert costed.exit_code == 0, costed.output
    (group,) = json.loads(costed.stdout)["groups"]
    assert group["run"] == run.run_id
    assert group["calls"] == 3
    assert group["total_tokens"] == run.tokens

    foreign_agent.TOOL_LOG.clear()
    with contextlib.ExitStack() as stack:
        if which == "anthropic-sdk":
            stack.enter_context(pytest.warns(spanreplay.SpanReplayWarning, match="no tool definitions"))
        replayed = stack.enter_context(spanreplay.replay(path, run.run_id))
        client = stack.enter_context(anthropic.Anthropic(base_url=server.url, api_key="offline", max_retries=0))
        answer = foreign_agent.answer(client, stream=stream)
    assert answer == recorded["answer"]
    assert replayed.outcome == "completed"
    assert foreign_agent.TOOL_LOG == TOOLS_RUN

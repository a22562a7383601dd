"""The fixed agent of the cross-release fixtures, and the script that records it.

``tests/fixtures/releases/`` holds one trace of this agent per anthropic release
it was recorded under; ``tests/instrumentation/test_anthropic_releases.py``
replays each under whatever anthropic is installed. Record a fixture with the
release to record under installed, from the repository root:

    PYTHONPATH=src python tests/helpers/release_fixture.py

It writes ``tests/fixtures/releases/run_anthropic_<version>.jsonl`` (the run id
names the release) against the local Messages API server.

The agent sends the same requests under every release (its assistant turn is
written from the fields it read, not dumped from the SDK's model, whose dump
grows fields from release to release), so a trace from one release matches the
calls another makes.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import anthropic

import spanreplay
from spanreplay.testing.messages_api import MODEL, MessagesAPIServer, Reply, api_error, reply, text, tool_use

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "releases"

USER = {"role": "user", "content": "Where is order A-17?"}
TOOL = {
    "name": "get_order_status",
    "description": "The shipping status of an order.",
    "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
}


def run_id(version: str) -> str:
    return "run_anthropic_" + version.replace(".", "_")


def script() -> list[Reply]:
    """The server's answers, in the order the agent asks."""
    return [
        reply(
            text("Let me look that up."),
            tool_use("get_order_status", {"order_id": "A-17"}, "toolu_fixture_1"),
            id="msg_fixture_1",
            input_tokens=310,
            output_tokens=41,
            cache_read=120,
            cache_write=16,
        ),
        reply(text("Order A-17 shipped yesterday."), id="msg_fixture_2", input_tokens=402, output_tokens=9),
        reply(text("It arrives on Friday between nine and"), id="msg_fixture_3", stop_reason="max_tokens"),
        api_error(429, "Number of requests has exceeded your rate limit"),
    ]


def failure(exc: BaseException) -> tuple[Any, ...]:
    """What an agent reads of an API error."""
    return (
        type(exc).__name__,
        getattr(exc, "status_code", None),
        getattr(exc, "request_id", None),
        getattr(exc, "body", None),
        str(exc),
    )


def agent(client: anthropic.Anthropic) -> dict[str, Any]:
    """A tool use, its result, a stream cut by max_tokens, a rate limit: what the agent saw of each."""
    seen: dict[str, Any] = {}
    first = client.messages.create(model=MODEL, max_tokens=256, messages=[USER], tools=[TOOL])  # type: ignore[list-item]
    seen["first"] = first
    use = next(block for block in first.content if block.type == "tool_use")
    assistant = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": first.content[0].text},  # type: ignore[union-attr]
            {"type": "tool_use", "id": use.id, "name": use.name, "input": use.input},
        ],
    }
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "shipped"}]}
    conversation = [USER, assistant, result]
    seen["second"] = client.messages.create(model=MODEL, max_tokens=256, messages=conversation, tools=[TOOL])  # type: ignore[arg-type,list-item]
    follow_up = [*conversation, {"role": "assistant", "content": "Order A-17 shipped yesterday."}]
    follow_up.append({"role": "user", "content": "When does it arrive?"})
    events = list(client.messages.create(model=MODEL, max_tokens=8, messages=follow_up, stream=True))  # type: ignore[arg-type]
    seen["events"] = events
    try:
        client.with_options(max_retries=0).messages.create(model=MODEL, max_tokens=256, messages=follow_up)  # type: ignore[arg-type]
    except anthropic.APIStatusError as exc:
        seen["error"] = failure(exc)
    return seen


def record(into: Path) -> Path:
    """Record the agent under the installed anthropic; the trace file written into ``into``."""
    run = run_id(anthropic.__version__)
    with tempfile.TemporaryDirectory() as work:
        traces = Path(work) / "traces"
        spanreplay.configure(service_name="release-fixture", trace_dir=traces)
        from spanreplay.instrumentation.anthropic import instrument_anthropic

        instrument_anthropic(zero_code=False)
        with MessagesAPIServer() as server:
            server.script(*script())
            with (
                anthropic.Anthropic(base_url=server.url, api_key="fixture-key") as client,
                spanreplay.record(agent="release-fixture", run_id=run),
            ):
                agent(client)
        spanreplay.reset()
        into.mkdir(parents=True, exist_ok=True)
        target = into / f"{run}.jsonl"
        shutil.copyfile(traces / f"{run}.jsonl", target)
        return target


if __name__ == "__main__":
    print(record(Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES))

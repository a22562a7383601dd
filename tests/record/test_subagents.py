"""Sub-agents on record: ``record(agent=...)`` and ``@agent`` inside an open run open a child run.

The child has its own run id and names its parent (``spanreplay.run.parent``); its
run span is a child of the parent's current span in the same trace; its boundary
spans are children of its own run span and carry its agent. The parent records the
step that opened it. ``spanreplay runs`` lists the tree and ``cost --by agent``
gives each sub-agent its own calls.
"""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanreplay
from spanreplay import semconv as sc
from spanreplay.cli import cli

SONNET = "claude-sonnet-4-6"
MTOK = 1_000_000


@spanreplay.tool
def search(query: str) -> str:
    return f"results for {query}"


def model(prompt: str, input_tokens: int, output_tokens: int) -> str:
    """A model call whose span carries usage, as an instrumented SDK writes it."""
    attributes = {
        sc.GEN_AI_OPERATION_NAME: sc.OPERATION_CHAT,
        sc.GEN_AI_REQUEST_MODEL: SONNET,
        sc.GEN_AI_USAGE_INPUT_TOKENS: input_tokens,
        sc.GEN_AI_USAGE_OUTPUT_TOKENS: output_tokens,
    }
    return spanreplay.boundary(
        sc.KIND_MODEL, SONNET, {"prompt": prompt}, lambda: f"answer to {prompt}", attributes=attributes
    )


def researcher(topic: str) -> str:
    with spanreplay.record(agent="researcher"):
        found = search(topic)
        return model(found, 1000, 100)


def supervisor() -> str:
    plan = model("plan", 2000, 200)
    return plan + " / " + researcher("otters")


def record_supervisor() -> str:
    with spanreplay.record(agent="supervisor") as run:
        supervisor()
    return run.run_id


def by_run(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        run_id = (span.attributes or {}).get(sc.RUN_ID)
        if isinstance(run_id, str):
            out.setdefault(run_id, []).append(span)
    return out


def run_span(spans: list[ReadableSpan]) -> ReadableSpan:
    (root,) = [s for s in spans if sc.RUN_STATUS in (s.attributes or {})]
    return root


def test_a_sub_agent_is_a_child_run_in_the_parents_trace(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    parent_id = record_supervisor()
    runs = {run.run_id: run for run in spanreplay.runs(trace_dir)}
    assert len(runs) == 2
    (child_id,) = [run_id for run_id in runs if run_id != parent_id]
    child = runs[child_id]
    assert (child.agent, child.parent, child.steps) == ("researcher", parent_id, 2)
    assert runs[parent_id].parent is None
    assert runs[parent_id].trace_id == child.trace_id

    spans = by_run(memory_exporter.get_finished_spans())
    parent_root, child_root = run_span(spans[parent_id]), run_span(spans[child_id])
    assert child_root.name == "invoke_agent researcher"
    assert child_root.attributes is not None
    assert child_root.attributes[sc.RUN_PARENT] == parent_id
    assert child_root.attributes[sc.GEN_AI_AGENT_NAME] == "researcher"
    assert sc.RUN_PARENT not in (parent_root.attributes or {})
    assert child_root.context.trace_id == parent_root.context.trace_id
    # Opened from the supervisor's own code: its run span is the child's parent.
    assert child_root.parent is not None
    assert child_root.parent.span_id == parent_root.context.span_id
    for span in spans[child_id]:
        if span is child_root:
            continue
        assert span.parent is not None
        assert span.parent.span_id == child_root.context.span_id
        assert (span.attributes or {})[sc.GEN_AI_AGENT_NAME] == "researcher"
    # The parent's boundaries carry no agent of their own (the run span says it).
    assert all(sc.GEN_AI_AGENT_NAME not in (s.attributes or {}) for s in spans[parent_id] if s is not parent_root)

    log = spanreplay.load(trace_dir, parent_id)
    assert [(e.seq, e.kind, e.key) for e in log.events] == [(1, "model", SONNET), (2, "agent", "researcher")]
    assert log.events[1].output == {"run_id": child_id}
    assert [(e.kind, e.key) for e in spanreplay.load(trace_dir, child_id).events] == [
        ("tool", "search"),
        ("model", SONNET),
    ]


def test_a_sub_agent_called_from_a_tool_is_a_child_of_that_tools_span(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    @spanreplay.tool
    def delegate(topic: str) -> str:
        return researcher(topic)

    with spanreplay.record(agent="supervisor") as run:
        delegate("otters")
    spans = by_run(memory_exporter.get_finished_spans())
    (child_id,) = [run_id for run_id in spans if run_id != run.run_id]
    (tool_span,) = [s for s in spans[run.run_id] if s.name == "execute_tool delegate"]
    child_root = run_span(spans[child_id])
    assert child_root.parent is not None
    assert child_root.parent.span_id == tool_span.context.span_id
    # The step that opened the child is nested in the tool's call.
    log = spanreplay.load(trace_dir, run.run_id)
    assert [e.call_id for e in log.events] == ["tool:delegate#0", "tool:delegate#0/agent:researcher#0"]


def test_agent_decorator_opens_a_child_run_named_after_the_function(trace_dir: Path) -> None:
    @spanreplay.agent
    def writer(text: str) -> str:
        return search(text)

    @spanreplay.agent(name="critic")
    def review(text: str) -> str:
        return search("critique " + text)

    with spanreplay.record(agent="supervisor") as run:
        assert writer("a") == "results for a"
        assert review("b") == "results for critique b"
    children = [r for r in spanreplay.runs(trace_dir) if r.parent == run.run_id]
    assert sorted(r.agent for r in children) == ["critic", "writer"]
    assert writer.__name__ == "writer"
    # Outside any run, it opens a top-level run.
    assert writer("c") == "results for c"
    top = [r for r in spanreplay.runs(trace_dir) if r.agent == "writer" and r.parent is None]
    assert len(top) == 1
    assert top[0].steps == 1


def test_parallel_sub_agents_are_child_runs_each(trace_dir: Path) -> None:
    @spanreplay.agent
    async def scout(topic: str) -> str:
        await asyncio.sleep(0.001 if topic == "a" else 0)
        return search(topic) + str(spanreplay.random())

    @spanreplay.agent
    def worker(topic: str) -> str:
        return search(topic)

    async def main() -> list[str]:
        return list(await asyncio.gather(scout("a"), scout("b")))

    with spanreplay.record(agent="supervisor") as run:
        asyncio.run(main())
        threads = [threading.Thread(target=worker, args=(t,)) for t in ("x", "y")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    children = {r.run_id: r for r in spanreplay.runs(trace_dir) if r.parent == run.run_id}
    assert sorted(r.agent for r in children.values()) == ["scout", "scout", "worker", "worker"]
    opened = [e for e in spanreplay.load(trace_dir, run.run_id).events if e.kind == sc.KIND_AGENT]
    # Each opening is in the branch of the task or thread that made it, and names its own child.
    branches = sorted((e.call_id.split("/")[0].rpartition(".")[2], e.call_id.split("/")[1]) for e in opened)
    assert branches == [
        ("scout#0", "agent:scout#0"),
        ("scout#1", "agent:scout#0"),
        ("worker#0", "agent:worker#0"),
        ("worker#1", "agent:worker#0"),
    ]
    assert sorted(e.output["run_id"] for e in opened) == sorted(children)
    # Each child holds only its own sub-agent's steps.
    inputs = sorted(spanreplay.load(trace_dir, run_id).events[0].input["query"] for run_id in children)
    assert inputs == ["a", "b", "x", "y"]


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), prog_name="spanreplay")
    assert result.exit_code == 0, result.output
    return result


def test_runs_lists_sub_agents_under_their_parent(trace_dir: Path) -> None:
    first = record_supervisor()
    second = record_supervisor()
    listed = json.loads(invoke("runs", str(trace_dir), "--json").stdout)
    parents = {run["run_id"]: run["parent"] for run in listed}
    assert parents[first] is None
    assert parents[second] is None
    table = invoke("runs", str(trace_dir)).stdout
    lines = [line for line in table.splitlines() if "run_" in line]
    order = [next(word for word in line.split() if word.startswith("run_")) for line in lines]
    # Each parent is followed by its own child, marked as nested.
    children = {parent: run_id for run_id, parent in parents.items() if parent}
    assert order == [first, children[first], second, children[second]]
    assert "└ " + children[first] in lines[1]
    assert "└" not in lines[0]


def test_cost_by_agent_gives_each_sub_agent_its_own_calls(trace_dir: Path) -> None:
    record_supervisor()
    groups = json.loads(invoke("cost", str(trace_dir), "--by", "agent", "--json").stdout)["groups"]
    by_agent = {group["agent"]: group for group in groups}
    assert set(by_agent) == {"supervisor", "researcher"}
    assert by_agent["supervisor"]["calls"] == 1
    assert by_agent["researcher"]["calls"] == 1
    assert by_agent["supervisor"]["usd"] == round((2000 * 3 + 200 * 15) / MTOK, 10)
    assert by_agent["researcher"]["usd"] == round((1000 * 3 + 100 * 15) / MTOK, 10)

"""Record mode: the spans a run and its boundaries emit, as DESIGN.md's span schema says."""

from __future__ import annotations

import ast
import asyncio
import hashlib
import importlib.util
import re
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import spanreplay
from spanreplay import semconv as sc


class QuotaError(Exception):
    def __init__(self, message: str, status_code: int = 500) -> None:
        super().__init__(message)
        self.status_code = status_code


@spanreplay.tool
def search(query: str, limit: int = 3) -> list[str]:
    return [f"{query}-{i}" for i in range(limit)]


@spanreplay.tool(name="lookup_order")
async def lookup(order_id: int) -> dict[str, Any]:
    await asyncio.sleep(0)
    return {"order": order_id, "state": "shipped"}


@spanreplay.tool
def charge(amount: int) -> None:
    raise QuotaError(f"card declined for {amount}", status_code=402)


def _spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return list(exporter.get_finished_spans())


def _by_name(exporter: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [s for s in _spans(exporter) if s.name == name]
    assert len(found) == 1, [s.name for s in _spans(exporter)]
    return found[0]


def _payload(attrs: Any, name: str) -> bytes:
    """A payload attribute's bytes, checked against its size and digest by hand."""
    value = attrs[name]
    data = (value if isinstance(value, str) else "".join(value)).encode()
    assert attrs[name + ".size"] == len(data)
    assert attrs[name + ".sha256"] == hashlib.sha256(data).hexdigest()
    return data


# --- the run root span ---------------------------------------------------------------


def test_the_run_root_span_is_invoke_agent_with_run_id_and_ok_status(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with spanreplay.record(agent="support") as run:
        search("shoes")
    root = _by_name(memory_exporter, "invoke_agent support")
    attrs = root.attributes or {}
    assert root.parent is None
    assert attrs["spanreplay.run.id"] == run.run_id
    assert attrs["spanreplay.run.status"] == "ok"
    assert attrs["spanreplay.run.steps"] == 1
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "support"
    assert "spanreplay.run.error" not in attrs
    assert root.status.status_code is StatusCode.OK
    assert re.fullmatch(r"run_\d{8}_\d{6}_[0-9a-f]{8}", run.run_id)


def test_a_run_that_raises_ends_with_error_status_and_the_error_payload(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with pytest.raises(RuntimeError), spanreplay.record(agent="support"):
        raise RuntimeError("gave up after 3 tries")
    root = _by_name(memory_exporter, "invoke_agent support")
    attrs = root.attributes or {}
    assert attrs["spanreplay.run.status"] == "error"
    assert attrs["error.type"] == "RuntimeError"
    error = orjson.loads(_payload(attrs, "spanreplay.run.error"))
    assert error["type"] == "RuntimeError"
    assert error["module"] == "builtins"
    assert error["message"] == "gave up after 3 tries"
    assert root.status.status_code is StatusCode.ERROR


def test_a_given_run_id_is_used_and_an_unsafe_one_is_refused(trace_dir: Path) -> None:
    with spanreplay.record(agent="a", run_id="nightly-42") as run:
        pass
    assert run.run_id == "nightly-42"
    with pytest.raises(spanreplay.ConfigurationError, match="cannot name a trace file"):
        spanreplay.record(agent="a", run_id="../../etc/passwd")


# --- boundary spans ------------------------------------------------------------------


def test_a_tool_span_follows_the_genai_conventions_and_carries_the_replay_payload(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with spanreplay.record(agent="support") as run:
        search("shoes", limit=2)
    root = _by_name(memory_exporter, "invoke_agent support")
    span = _by_name(memory_exporter, "execute_tool search")
    attrs = span.attributes or {}
    assert span.kind is SpanKind.INTERNAL
    assert span.parent is not None
    assert span.parent.span_id == root.context.span_id
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["gen_ai.tool.name"] == "search"
    assert attrs["spanreplay.run.id"] == run.run_id
    assert attrs["spanreplay.seq"] == 1
    assert attrs["spanreplay.call_id"] == "tool:search#0"
    assert attrs["spanreplay.kind"] == "tool"
    assert attrs["spanreplay.key"] == "search"
    assert attrs["spanreplay.schema_version"] == sc.SCHEMA_VERSION
    assert orjson.loads(_payload(attrs, "spanreplay.input")) == {"query": "shoes", "limit": 2}
    assert orjson.loads(_payload(attrs, "spanreplay.output")) == ["shoes-0", "shoes-1"]
    assert "spanreplay.error" not in attrs


def test_the_tool_input_is_the_bound_arguments_with_defaults(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with spanreplay.record():
        search(query="hats")
    attrs = _by_name(memory_exporter, "execute_tool search").attributes or {}
    assert orjson.loads(_payload(attrs, "spanreplay.input")) == {"query": "hats", "limit": 3}


def test_a_method_tool_leaves_self_out_of_the_input(trace_dir: Path, memory_exporter: InMemorySpanExporter) -> None:
    class Catalog:
        @spanreplay.tool
        def price(self, sku: str) -> int:
            return 12

    with spanreplay.record():
        assert Catalog().price("A1") == 12
    attrs = _by_name(memory_exporter, "execute_tool price").attributes or {}
    assert orjson.loads(_payload(attrs, "spanreplay.input")) == {"sku": "A1"}


def test_an_async_tool_with_a_given_name_is_recorded_under_that_name(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    async def agent() -> dict[str, Any]:
        async with spanreplay.record(agent="async"):
            return await lookup(7)

    assert asyncio.run(agent()) == {"order": 7, "state": "shipped"}
    attrs = _by_name(memory_exporter, "execute_tool lookup_order").attributes or {}
    assert attrs["gen_ai.tool.name"] == "lookup_order"
    assert attrs["spanreplay.call_id"] == "tool:lookup_order#0"
    assert orjson.loads(_payload(attrs, "spanreplay.output")) == {"order": 7, "state": "shipped"}


def test_a_failed_boundary_records_the_error_with_its_fields_and_no_output(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with pytest.raises(QuotaError), spanreplay.record():
        charge(30)
    span = _by_name(memory_exporter, "execute_tool charge")
    attrs = span.attributes or {}
    error = orjson.loads(_payload(attrs, "spanreplay.error"))
    assert error == {
        "type": "QuotaError",
        "module": __name__,
        "message": "card declined for 30",
        "args": ["card declined for 30"],
        "fields": {"status_code": 402},
    }
    assert "spanreplay.output" not in attrs
    assert attrs["error.type"] == "QuotaError"
    assert span.status.status_code is StatusCode.ERROR


def test_seq_counts_every_boundary_and_call_ids_count_each_kind_and_key(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with spanreplay.record():
        search("a")
        spanreplay.now()
        search("b")
        spanreplay.random()
        spanreplay.time()
        spanreplay.now()
    boundaries = sorted(
        (s.attributes or {} for s in _spans(memory_exporter) if "spanreplay.seq" in (s.attributes or {})),
        key=lambda a: a["spanreplay.seq"],
    )
    assert [(a["spanreplay.seq"], a["spanreplay.call_id"]) for a in boundaries] == [
        (1, "tool:search#0"),
        (2, "clock:now#0"),
        (3, "tool:search#1"),
        (4, "random:random#0"),
        (5, "clock:time#0"),
        (6, "clock:now#1"),
    ]


def test_clock_random_and_uuid_boundaries_are_internal_spans_named_by_kind_and_key(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    with spanreplay.record():
        when = spanreplay.now()
        draw = spanreplay.random()
        ident = spanreplay.uuid4()
    assert isinstance(when, datetime)
    assert when.tzinfo is not None
    assert 0.0 <= draw < 1.0
    assert isinstance(ident, uuid.UUID)
    names = {s.name: s for s in _spans(memory_exporter)}
    assert {"clock now", "random random", "uuid uuid4"} <= set(names)
    assert all(names[n].kind is SpanKind.INTERNAL for n in ("clock now", "random random", "uuid uuid4"))
    recorded = orjson.loads(_payload(names["uuid uuid4"].attributes, "spanreplay.output"))
    assert recorded == str(ident)


def test_a_payload_above_2000_bytes_is_an_array_of_chunks_on_the_span(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    text = "naïve café ☕ " * 400
    with spanreplay.record():
        search(text, limit=1)
    attrs = _by_name(memory_exporter, "execute_tool search").attributes or {}
    chunks = attrs["spanreplay.input"]
    assert isinstance(chunks, Sequence)
    assert not isinstance(chunks, str)
    assert len(chunks) > 1
    assert all(len(c.encode()) <= 2000 for c in chunks)
    assert orjson.loads(_payload(attrs, "spanreplay.input"))["query"] == text


def test_custom_boundaries_with_extra_attributes(trace_dir: Path, memory_exporter: InMemorySpanExporter) -> None:
    with spanreplay.record() as run:
        value = run.boundary("db", "orders", {"id": 1}, lambda: {"total": 9}, attributes={"db.system": "sqlite"})
    assert value == {"total": 9}
    span = _by_name(memory_exporter, "db orders")
    attrs = span.attributes or {}
    assert attrs["db.system"] == "sqlite"
    assert attrs["spanreplay.call_id"] == "db:orders#0"
    assert "gen_ai.operation.name" not in attrs


# --- what record must never do -----------------------------------------------------


def test_a_user_exception_passes_through_record_as_the_very_same_object(trace_dir: Path) -> None:
    raised = QuotaError("no", status_code=429)

    def fail() -> None:
        raise raised

    with spanreplay.record(), pytest.raises(QuotaError) as caught:
        spanreplay.boundary("tool", "fail", None, fail)
    assert caught.value is raised
    assert caught.value.__traceback__ is not None


def test_a_user_exception_passes_through_an_async_boundary_as_the_same_object(trace_dir: Path) -> None:
    raised = QuotaError("later", status_code=503)

    async def fail() -> None:
        await asyncio.sleep(0)
        raise raised

    async def agent() -> None:
        async with spanreplay.record():
            await spanreplay.boundary("tool", "fail", None, fail)

    with pytest.raises(QuotaError) as caught:
        asyncio.run(agent())
    assert caught.value is raised


def test_boundary_outside_any_run_just_calls_the_function_and_emits_nothing(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    calls: list[int] = []

    async def work() -> int:
        calls.append(2)
        return 2

    assert spanreplay.current_run() is None
    assert spanreplay.boundary("tool", "x", None, lambda: calls.append(1) or 1) == 1
    assert asyncio.run(spanreplay.boundary("tool", "y", None, work)) == 2
    assert search("free") == ["free-0", "free-1", "free-2"]
    assert calls == [1, 2]
    assert _spans(memory_exporter) == []
    assert not trace_dir.exists() or list(trace_dir.iterdir()) == []


def test_a_boundary_whose_function_returns_an_awaitable_records_the_awaited_result(
    trace_dir: Path, memory_exporter: InMemorySpanExporter
) -> None:
    async def fetch() -> str:
        await asyncio.sleep(0)
        return "body"

    async def agent() -> str:
        async with spanreplay.record():
            # A lambda that returns a coroutine: the common way to wrap an SDK call with arguments.
            return await spanreplay.boundary("http", "get", {"url": "u"}, lambda: fetch())

    assert asyncio.run(agent()) == "body"
    attrs = _by_name(memory_exporter, "http get").attributes or {}
    assert orjson.loads(_payload(attrs, "spanreplay.output")) == "body"


def test_run_object_exposes_run_id_and_mode(trace_dir: Path) -> None:
    with spanreplay.record(agent="a") as run:
        assert spanreplay.current_run() is run
        assert run.mode is spanreplay.Mode.RECORD
    assert spanreplay.current_run() is None


# --- one module holds the names ----------------------------------------------------

# The namespaces of the conventions semconv.py spells: spanreplay's own, GenAI,
# OpenInference, the Anthropic SDK's, OTel's general and exception names, Jaeger's tags.
_NAMESPACES = (
    "spanreplay|gen_ai|llm|openinference|anthropic|input|output|tool|exception|error"
    "|http|server|service|deployment|otel|span|w3c|opentracing"
)
# A whole attribute name, or a prefix of several (``gen_ai.usage.``).
_NAME = re.compile(rf"^({_NAMESPACES})\.[a-z0-9_]+(\.[a-z0-9_]+)*\.?$")
_SRC = Path(spanreplay.__file__).parent
_SEMCONV = _SRC / "semconv.py"
# Files whose dotted literals are not attribute names, and why.
_EXEMPT_FILES = {
    # The lint package's rule table: the qualified names of the calls it flags
    # (``spanreplay.tool``, ``spanreplay.api.runs.boundary``), matched against source code.
    "lint/_visitor.py",
}


def _names_a_module(value: str) -> bool:
    """An import path (``spanreplay.cli._check_run``, ``anthropic._base_client``), not an attribute."""
    try:
        return importlib.util.find_spec(value) is not None
    except (ImportError, ValueError):
        return False


def _logger_names(tree: ast.AST) -> set[int]:
    """The literals that name a logger: passed to ``getLogger`` or bound to a ``*LOGGER`` name."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "getLogger":
            found.update(id(arg) for arg in node.args)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id.endswith("LOGGER") for t in targets):
                found.add(id(node.value))
    return found


def _attribute_literals(path: Path, root: Path = _SRC) -> list[str]:
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    loggers = _logger_names(tree)
    return [
        f"{path.relative_to(root)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and id(node) not in loggers
        and _NAME.match(node.value)
        and not _names_a_module(node.value.rstrip("."))
    ]


def _modules() -> list[Path]:
    return sorted(
        path
        for path in _SRC.rglob("*.py")
        if path != _SEMCONV and path.relative_to(_SRC).as_posix() not in _EXEMPT_FILES
    )


def test_the_name_check_reads_every_module_and_finds_a_spelled_name(tmp_path: Path) -> None:
    modules = _modules()
    assert _SRC / "sources" / "foreign" / "_genai.py" in modules
    assert _SRC / "readers" / "_jaeger_json.py" in modules
    assert _SEMCONV not in modules
    assert _attribute_literals(_SEMCONV) != []  # the names are there, so the check sees them
    spelled = tmp_path / "spelled.py"
    spelled.write_text(
        'import logging\nlogger = logging.getLogger("spanreplay.x")\nimport_path = "spanreplay.cli._check_run"\n'
        'NAME = "gen_ai.usage."\n'
    )
    assert _attribute_literals(spelled, tmp_path) == ["spelled.py:4: 'gen_ai.usage.'"]


def test_attribute_names_are_spelled_only_in_the_semconv_module() -> None:
    found = [hit for path in _modules() for hit in _attribute_literals(path)]
    assert found == [], (
        "span or attribute names spelled outside spanreplay/semconv.py (file:line: literal):\n  "
        + "\n  ".join(found)
        + "\nFix: add each name to src/spanreplay/semconv.py, in the section of the convention it"
        " belongs to (with __all__), and use it as sc.NAME (`from spanreplay import semconv as sc`)."
    )

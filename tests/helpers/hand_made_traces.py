"""Trace files written by hand, span by span, with whatever strings a test wants in them.

A trace is data from outside: these files hold run ids, agent names, tool keys and
error texts no recording would (``../../x``, a key that closes a docstring), in
spans that are otherwise what spanreplay's file exporter writes, payload sizes and
digests included, so the readers take them as they take a recording.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import Any

import orjson

from spanreplay import semconv as sc

_NUMBERS = itertools.count(1)
# 2020-01-01T00:00:00Z: old enough for any retention window.
LONG_AGO_NS = 1_577_836_800_000_000_000


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    return {"stringValue": value}


def _attributes(pairs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in pairs.items()]


def _payload(name: str, value: Any) -> dict[str, Any]:
    data = orjson.dumps(value)
    return {
        name: data.decode(),
        name + sc.SIZE_SUFFIX: len(data),
        name + sc.SHA256_SUFFIX: hashlib.sha256(data).hexdigest(),
    }


def _line(span: dict[str, Any]) -> bytes:
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": _attributes({"service.name": "agent"})},
                "scopeSpans": [{"scope": {"name": "spanreplay", "version": "0.1.0"}, "spans": [span]}],
            }
        ]
    }
    return orjson.dumps(doc) + b"\n"


def run_lines(
    run_id: str,
    *,
    agent: str = "shop",
    key: str = "stock",
    kind: str = "tool",
    error: tuple[str, str, str] | None = None,
    start_ns: int = LONG_AGO_NS,
) -> bytes:
    """The lines of one run of one step: the run span as it started, the step, the run span as it ended.

    Args:
        error: ``(type name, module, message)`` the step raised and the run ended with; None for a run
            that completed (the step returned ``{"left": 3}``).
    """
    number = next(_NUMBERS)
    trace_id = hashlib.sha256(f"{run_id}{number}".encode()).hexdigest()[:32]
    root_id, step_id = f"{number:08x}00000001", f"{number:08x}00000002"
    run = {sc.RUN_ID: run_id, sc.SCHEMA: sc.SCHEMA_VERSION}
    root = {
        "traceId": trace_id,
        "spanId": root_id,
        "name": f"invoke_agent {agent}",
        "kind": 1,
        "startTimeUnixNano": str(start_ns),
    }
    started = {
        **root,
        "attributes": _attributes({**run, sc.RUN_STATUS: sc.RUN_STATUS_RUNNING, sc.GEN_AI_AGENT_NAME: agent}),
        "status": {},
    }
    step: dict[str, Any] = {
        **run,
        sc.SEQ: 1,
        sc.CALL_ID: f"{kind}:{key}#0",
        sc.KIND: kind,
        sc.KEY: key,
        sc.GEN_AI_TOOL_NAME: key,
        **_payload(sc.INPUT, {"item": "lamp"}),
    }
    ended: dict[str, Any] = {**run, sc.GEN_AI_AGENT_NAME: agent, sc.RUN_STEPS: 1}
    if error is None:
        step.update(_payload(sc.OUTPUT, {"left": 3}))
        ended[sc.RUN_STATUS] = sc.RUN_STATUS_OK
        status: dict[str, Any] = {}
    else:
        type_name, module, message = error
        record = {"type": type_name, "module": module, "message": message, "args": [message], "fields": {}}
        step.update({**_payload(sc.ERROR, record), sc.ERROR_TYPE: type_name})
        ended.update({sc.RUN_STATUS: sc.RUN_STATUS_ERROR, sc.ERROR_TYPE: type_name, **_payload(sc.RUN_ERROR, record)})
        status = {"code": 2, "message": type_name}
    step_span = {
        "traceId": trace_id,
        "spanId": step_id,
        "parentSpanId": root_id,
        "name": f"execute_tool {key}",
        "kind": 1,
        "startTimeUnixNano": str(start_ns + 1000),
        "endTimeUnixNano": str(start_ns + 2000),
        "attributes": _attributes(step),
        "status": status,
    }
    ended_span = {**root, "endTimeUnixNano": str(start_ns + 3000), "attributes": _attributes(ended), "status": status}
    return _line(started) + _line(step_span) + _line(ended_span)


def write_run(path: Path, run_id: str, **kwargs: Any) -> Path:
    """Write one hand-made run (see ``run_lines``) to ``path``, its folder made; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(run_lines(run_id, **kwargs))
    return path

"""The model calls a source holds, with their runs: what cost attribution adds up.

A model call is a spanreplay model boundary (``spanreplay.kind = model``) or a
span of another instrumentation that looks like one (``gen_ai.operation.name``
``chat``, ``text_completion`` or ``generate_content``, or GenAI usage
attributes). Its tokens come from the span's own usage attributes; a call
without them (an older or foreign instrumentation, a call that failed before
an answer) is kept, with unknown tokens, never dropped. A foreign span nested
under a spanreplay model span (the SDK's own span, kept with ``sdk_spans``) is
the same call, counted once. Token counting calls (``count_tokens``) are free
and left out.

Sources are opened through ``spanreplay.sources``: files, directories and globs are read span by span;
a Jaeger or Tempo URL gives the traces that hold a run, as ``spanreplay runs``
finds them; a Postgres DSN is read from ``agent_runs`` and ``agent_steps`` in
one snapshot.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay.model import codec as _codec
from spanreplay.model.spans import STATUS_ERROR, SpanRecord
from spanreplay.model.usage import Usage, count_of, model_of, usage_of
from spanreplay.sources import SpanSource, open_source
from spanreplay.sources.foreign import foreign_summaries, is_foreign_span

__all__ = ["CallCollector", "CallSource", "ModelCall", "RunFacts", "read_calls"]

# Operation names of model calls in the GenAI conventions (count_tokens is free: not one).
_MODEL_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
# The conventions' names before input/output tokens (still written by older instrumentations).


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What cost attribution needs of a run: who ran it, when, and how it ended."""

    run_id: str
    agent: str = ""
    status: str = ""
    start_ns: int = 0
    trace_id: str = ""
    # False for the calls of a trace no spanreplay run covers: a foreign run, named by its trace id.
    recorded: bool = True

    @property
    def started(self) -> datetime | None:
        return datetime.fromtimestamp(self.start_ns / 1e9, tz=UTC) if self.start_ns else None


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One model call and the tokens its span says it used (None: the span does not say)."""

    run_id: str
    seq: int | None
    model: str
    start_ns: int
    usage: Usage | None
    failed: bool = False
    # The sha256 of the recorded (masked) input: equal digests are the same request.
    input_digest: str | None = None
    # gen_ai.usage.cost as recorded, priced by whoever recorded the span.
    recorded_cost: float | None = None
    trace_id: str = ""
    span_id: str = ""

    @property
    def started(self) -> datetime | None:
        return datetime.fromtimestamp(self.start_ns / 1e9, tz=UTC) if self.start_ns else None


@dataclass(frozen=True, slots=True)
class CallSource:
    """Every model call of a source, and the runs they belong to."""

    name: str
    runs: Mapping[str, RunFacts]
    calls: tuple[ModelCall, ...]


def read_calls(source: str | os.PathLike[str]) -> CallSource:
    """The model calls and runs of a trace source (file, directory, glob, ``-``, backend URL or DSN).

    Raises:
        TraceFormatError: the source cannot be read (the message names the file and line).
        PostgresError: the database cannot be read.
    """
    name = os.fspath(source)
    opened = open_source(name)
    if isinstance(opened, SpanSource):
        # A backend gives the traces that hold a run that ended, as spanreplay runs lists them.
        return _from_spans(name, opened.spans())
    return _from_postgres(name)


# --- spans -------------------------------------------------------------------------------


def _from_spans(name: str, spans: Iterable[SpanRecord]) -> CallSource:
    collector = CallCollector()
    for span in spans:
        collector.add(span)
    return collector.result(name)


class CallCollector:
    """Takes spans one at a time (as a reader streams them) and keeps what cost needs.

    ``add`` is also the tap a source's listing hands each span to, so that
    ``spanreplay.runs()`` reads the source once for the runs and their cost.
    """

    def __init__(self) -> None:
        self._roots: dict[str, SpanRecord] = {}
        # The parent, run and whether it is a spanreplay model call, of each span a
        # foreign call's run is found through: foreign spans without a run id (links
        # to the run above them) and model calls (to see a call is nested in ours).
        self._parents: dict[tuple[str, str], tuple[str | None, str | None, bool]] = {}
        # The other spans of a run end a walk up at their run, whatever their place:
        # each trace's run stands for them, so that memory does not grow with a
        # run's steps (None: the trace holds spans of several runs).
        self._trace_runs: dict[str, str | None] = {}
        self._candidates: dict[tuple[str, str], SpanRecord] = {}
        # Other instrumentations' model and tool spans outside any run: a trace of them is
        # a run of its own, named and described as ``spanreplay runs`` lists it.
        self._foreign: list[SpanRecord] = []

    def add(self, span: SpanRecord) -> None:
        attributes = span.attributes
        run_id = attributes.get(sc.RUN_ID)
        run = run_id if isinstance(run_id, str) else None
        is_model = attributes.get(sc.KIND) == sc.KIND_MODEL and sc.CALL_ID in attributes
        # Another instrumentation's span has no call id (inside a run it still gets the run id).
        candidate = is_model or (sc.CALL_ID not in attributes and _looks_like_model_call(attributes))
        if run is None or candidate:
            self._parents[span.key] = (span.parent_span_id, run, is_model)
            if run is None and is_foreign_span(span):
                self._foreign.append(span)
        elif self._trace_runs.setdefault(span.trace_id, run) != run:
            self._trace_runs[span.trace_id] = None
        if run is not None and _codec.is_run_span(span):
            previous = self._roots.get(run)
            if previous is None or span.end_ns > previous.end_ns:
                self._roots[run] = span
            return
        if candidate:
            if attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OPERATION_COUNT_TOKENS:
                return
            previous = self._candidates.get(span.key)
            # An exporter retry sends a span twice: keep the copy that ended last.
            if previous is None or span.end_ns > previous.end_ns:
                self._candidates[span.key] = span

    def result(self, name: str) -> CallSource:
        roots = self._roots
        runs = {run_id: _run_facts(run_id, root) for run_id, root in roots.items()}
        calls: list[ModelCall] = []
        foreign: dict[str, RunFacts] | None = None
        for key, span in self._candidates.items():
            run_id = span.attributes.get(sc.RUN_ID)
            seq: int | None = None
            outside = False
            if sc.CALL_ID in span.attributes and isinstance(run_id, str):
                seq = count_of(span.attributes.get(sc.SEQ))
            else:
                owner, inside_model_call = _owner(self._parents, self._trace_runs, key)
                if inside_model_call:
                    continue  # the same call as the spanreplay span around it
                outside = not isinstance(run_id, str) and owner is None
                if not isinstance(run_id, str):
                    # A trace outside any spanreplay run is a run of its own, named by its trace id.
                    run_id = owner or span.trace_id
            if outside and run_id not in runs:
                if foreign is None:
                    foreign = self._foreign_runs()
                found = foreign.get(run_id)
                if found is not None:
                    runs[run_id] = found
            if run_id not in roots:
                # A crashed run (no root span) or a trace outside any run starts with its first call.
                found = runs.get(run_id)
                if found is None or (not found.agent and span.start_ns and span.start_ns < found.start_ns):
                    runs[run_id] = RunFacts(
                        run_id=run_id,
                        status="" if outside else sc.RUN_STATUS_CRASHED,
                        start_ns=span.start_ns,
                        trace_id=span.trace_id,
                        recorded=not outside,
                    )
            calls.append(_call(run_id, seq, span))
        calls.sort(key=lambda c: (c.start_ns, c.run_id, c.seq or 0))
        return CallSource(name=name, runs=runs, calls=tuple(calls))

    def _foreign_runs(self) -> dict[str, RunFacts]:
        """The runs ``spanreplay runs`` makes of other instrumentations' traces: the same run id
        (the trace id), agent (the instrumentations), status and start."""
        return {
            summary.run_id: RunFacts(
                run_id=summary.run_id,
                agent=summary.agent,
                status=summary.status,
                start_ns=summary.start_ns,
                trace_id=summary.trace_id,
                recorded=False,
            )
            for summary in foreign_summaries(self._foreign)
        }


def _looks_like_model_call(attributes: Mapping[str, Any]) -> bool:
    operation = attributes.get(sc.GEN_AI_OPERATION_NAME)
    # Foreign spans may hold any attribute value, lists included: test before hashing.
    if isinstance(operation, str) and operation in _MODEL_OPERATIONS:
        return True
    if attributes.get(sc.OPENINFERENCE_SPAN_KIND) == "LLM":
        return True
    return any(
        name in attributes
        for name in (
            sc.GEN_AI_USAGE_INPUT_TOKENS,
            sc.GEN_AI_USAGE_OUTPUT_TOKENS,
            sc.GEN_AI_USAGE_PROMPT_TOKENS,
            sc.GEN_AI_USAGE_COMPLETION_TOKENS,
        )
    )


def _owner(
    parents: Mapping[tuple[str, str], tuple[str | None, str | None, bool]],
    trace_runs: Mapping[str, str | None],
    key: tuple[str, str],
) -> tuple[str | None, bool]:
    """The run a span without a run id ran in (through its parents), and whether a
    spanreplay model span encloses it."""
    trace_id = key[0]
    parent = parents[key][0]
    seen: set[str] = set()
    while parent and parent not in seen:
        seen.add(parent)
        found = parents.get((trace_id, parent))
        if found is None:
            # A span of a run that is not a model call (kept only as its trace's run), or
            # one not in the source: either way, the run whose trace this is.
            return trace_runs.get(trace_id), False
        parent, run_id, is_model = found
        if is_model:
            return run_id, True
        if run_id is not None:
            return run_id, False
    return None, False


def _run_facts(run_id: str, root: SpanRecord) -> RunFacts:
    status = root.attributes.get(sc.RUN_STATUS)
    if not root.ended or status in (None, sc.RUN_STATUS_RUNNING):
        status = sc.RUN_STATUS_CRASHED
    return RunFacts(
        run_id=run_id,
        agent=str(root.attributes.get(sc.GEN_AI_AGENT_NAME, "")),
        status=str(status),
        start_ns=root.start_ns,
        trace_id=root.trace_id,
    )


def _call(run_id: str, seq: int | None, span: SpanRecord) -> ModelCall:
    attributes = span.attributes
    digest = _input_digest(attributes, attributes.get(sc.INPUT + sc.SHA256_SUFFIX))
    return ModelCall(
        run_id=run_id,
        seq=seq,
        model=model_of(attributes, span.name),
        start_ns=span.start_ns,
        usage=usage_of(attributes),
        failed=span.status_code == STATUS_ERROR or sc.ERROR in attributes,
        input_digest=digest if isinstance(digest, str) else None,
        recorded_cost=_number(attributes.get(sc.GEN_AI_USAGE_COST)),
        trace_id=span.trace_id,
        span_id=span.span_id,
    )


def _input_digest(attributes: Mapping[str, Any], payload_digest: Any) -> str | None:
    """The sha256 of the whole input: an input written as the messages added to an earlier
    one's carries the full input's digest beside its own."""
    full = attributes.get(sc.INPUT_FULL_SHA256)
    digest = full if isinstance(full, str) else payload_digest
    return digest if isinstance(digest, str) else None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


# --- Postgres ------------------------------------------------------------------------------


def _from_postgres(dsn: str) -> CallSource:
    from spanreplay.sources.postgres.model_calls import model_call_rows
    from spanreplay.sources.postgres.rows import read_status

    run_rows, step_rows = model_call_rows(dsn)
    runs: dict[str, RunFacts] = {}
    for run_id, agent, status, start_ns, end_ns, span_id, trace_id in run_rows:
        runs[run_id] = RunFacts(
            run_id=run_id,
            agent=agent if span_id is not None else "",
            status=read_status(status, end_ns) if span_id is not None else sc.RUN_STATUS_CRASHED,
            start_ns=start_ns or 0,
            trace_id=trace_id or "",
        )
    calls = [_row_call(row) for row in step_rows]
    return CallSource(name=dsn, runs=runs, calls=tuple(c for c in calls if c is not None))


def _row_call(row: tuple[Any, ...]) -> ModelCall | None:
    run_id, seq, key, start_ns, failed, digest, attributes_text, trace_id, span_id = row
    try:
        attributes = orjson.loads(attributes_text or "{}")
    except orjson.JSONDecodeError:
        attributes = {}
    if not isinstance(attributes, dict):
        attributes = {}
    if attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OPERATION_COUNT_TOKENS:
        return None
    return ModelCall(
        run_id=run_id,
        seq=seq,
        model=model_of({**attributes, sc.KEY: key}),
        start_ns=start_ns or 0,
        usage=usage_of(attributes),
        failed=bool(failed),
        input_digest=_input_digest(attributes, digest),
        recorded_cost=_number(attributes.get(sc.GEN_AI_USAGE_COST)),
        trace_id=trace_id or "",
        span_id=span_id or "",
    )

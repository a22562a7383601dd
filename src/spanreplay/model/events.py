"""What replay consumes: the events of one run, ordered and indexed by call id."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson

from .usage import Usage, usage_of


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """A recorded exception: enough to show it and, where possible, rebuild it."""

    type_name: str
    module: str
    message: str
    args: tuple[Any, ...] = ()
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def qualified_name(self) -> str:
        return self.type_name if self.module == "builtins" else f"{self.module}.{self.type_name}"

    def __str__(self) -> str:
        return f"{self.qualified_name}: {self.message}" if self.message else self.qualified_name


@dataclass(frozen=True, slots=True)
class Event:
    """One recorded boundary call.

    ``input_json`` and ``output_json`` hold the payloads exactly as recorded
    (orjson text, already masked); ``input`` and ``output`` decode them.
    """

    run_id: str
    seq: int
    call_id: str
    kind: str
    key: str
    input_json: bytes
    output_json: bytes | None = None
    error: ErrorInfo | None = None
    schema_version: int = 1
    # The recorded work was awaited: replay returns an awaitable even for a plain callable.
    awaited: bool = False
    trace_id: str = ""
    span_id: str = ""
    start_ns: int = 0
    end_ns: int = 0
    attributes: Mapping[str, Any] = field(default_factory=dict)
    # The output's type tags (``spanreplay.output.types``, JSON), when it held values
    # JSON cannot say; None for plain JSON.
    output_types: bytes | None = None
    # Work that changes the world (``effect=True``): its intent was written before it ran.
    effect: bool = False

    @property
    def input(self) -> Any:
        return orjson.loads(self.input_json)

    @property
    def output(self) -> Any:
        return None if self.output_json is None else orjson.loads(self.output_json)

    @property
    def tokens(self) -> Usage | None:
        """A model call's tokens as its span recorded them (``spanreplay.cost.Usage``), None when it names none."""

        return usage_of(self.attributes)

    @property
    def parent_call_id(self) -> str:
        """The call id of the enclosing boundary, or ``""`` for a top-level call."""
        head, _, _ = self.call_id.rpartition("/")
        return head

    @property
    def failed(self) -> bool:
        return self.error is not None

    @property
    def unfinished(self) -> bool:
        """A side effect whose intent was recorded and its outcome never was: it may have happened."""
        return self.effect and self.output_json is None and self.error is None

    def describe(self) -> str:
        """``tool:search#0 (seq 3, input {"q":"x"})``, for divergence messages."""
        return f"{self.kind} {self.key!r} (call id {self.call_id}, seq {self.seq}, input {_preview(self.input_json)})"


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The run root span's facts: who ran, how it ended, and when."""

    run_id: str
    agent: str = ""
    status: str = "crashed"
    error: ErrorInfo | None = None
    trace_id: str = ""
    span_id: str = ""
    start_ns: int = 0
    end_ns: int = 0
    service_name: str = ""
    steps: int | None = None
    forked_from: str | None = None
    masking: str | None = None
    # A fork's first step that ran live; None when every step was served (or not a fork).
    forked_at: int | None = None
    # A sub-agent's run: the id of the run that opened it (None for a top-level run).
    parent: str | None = None
    # Where the run span was read from ("{file}:{line}" from a trace file): replay looks
    # for the run's salt beside that file. Not part of the run's identity.
    origin: str = field(default="", compare=False)
    # A trace another instrumentation recorded (spanreplay.sources.foreign): who recorded it,
    # and the request fields its model calls are compared on; "" and () for spanreplay's runs.
    instrumentation: str = ""
    compared: tuple[str, ...] = ()
    # What of such a trace cannot be reproduced, said before a replay starts.
    gaps: tuple[str, ...] = ()

    @property
    def started(self) -> datetime | None:
        return _datetime(self.start_ns)

    @property
    def ended(self) -> datetime | None:
        return _datetime(self.end_ns)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One line of ``spanreplay runs``: a run found in a source."""

    run_id: str
    agent: str
    status: str
    error: str | None
    steps: int
    trace_id: str
    start_ns: int
    end_ns: int
    service_name: str = ""
    # The run's model calls, their tokens and US dollars, from the spans' usage
    # attributes priced by spanreplay.cost (what spanreplay cost --by run shows).
    model_calls: int = 0
    tokens: int = 0
    usd: float = 0.0
    # Calls left out of usd: no price for their model, or no usage on their span.
    unpriced_calls: int = 0
    calls_without_usage: int = 0
    # Why load() refuses this run, in the sentence it raises (a damaged line held its
    # spans, steps are missing, two recordings share its id); None when the listing
    # sees nothing that stops it loading. ``status`` stays what the recording says.
    damaged: str | None = None
    # A sub-agent's run: the id of the run that opened it (None for a top-level run).
    parent: str | None = None

    @property
    def started(self) -> datetime | None:
        return _datetime(self.start_ns)

    @property
    def duration_s(self) -> float | None:
        if self.start_ns and self.end_ns:
            return (self.end_ns - self.start_ns) / 1e9
        return None

    def to_dict(self) -> dict[str, Any]:
        started = self.started
        return {
            "run_id": self.run_id,
            "agent": self.agent,
            "status": self.status,
            "error": self.error,
            "steps": self.steps,
            "trace_id": self.trace_id,
            "service_name": self.service_name,
            "started": started.isoformat() if started else None,
            "duration_s": self.duration_s,
            "model_calls": self.model_calls,
            "tokens": self.tokens,
            "usd": round(self.usd, 10),
            "unpriced_calls": self.unpriced_calls,
            "calls_without_usage": self.calls_without_usage,
            "damaged": self.damaged,
            "parent": self.parent,
        }


class EventLog:
    """The ordered events of one run, indexed by call id. Immutable."""

    __slots__ = ("_by_call_id", "_events", "run")

    def __init__(self, run: RunInfo, events: tuple[Event, ...]) -> None:
        self.run = run
        self._events = tuple(sorted(events, key=lambda e: e.seq))
        self._by_call_id = {e.call_id: e for e in self._events}

    @property
    def run_id(self) -> str:
        return self.run.run_id

    @property
    def events(self) -> tuple[Event, ...]:
        return self._events

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)

    def __repr__(self) -> str:
        return f"<EventLog {self.run.run_id} status={self.run.status} events={len(self._events)}>"

    def by_call_id(self, call_id: str) -> Event | None:
        """The event recorded under ``call_id``, or None."""
        return self._by_call_id.get(call_id)

    def by_seq(self, seq: int) -> Event | None:
        """The event recorded at position ``seq``, or None."""
        for event in self._events:
            if event.seq == seq:
                return event
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, EventLog):
            return NotImplemented
        return self.run == other.run and self._events == other._events

    __hash__ = None  # type: ignore[assignment]


def _datetime(ns: int) -> datetime | None:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC) if ns else None


def _preview(data: bytes, limit: int = 120) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= limit else text[: limit - 3] + "..."

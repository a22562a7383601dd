"""A trace span as every reader yields it, whatever the format it came from.

Readers turn OTLP/JSON, Jaeger JSON and the rest into ``SpanRecord``; the codec
turns a ``SpanRecord`` into an ``Event``. Ids are lowercase hex, times are Unix
nanoseconds, attribute values are plain Python values (``str``, ``bool``,
``int``, ``float``, ``bytes``, ``None``, lists and dicts of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan

# OTLP's SpanKind numbers (opentelemetry/proto/trace/v1/trace.proto).
SPAN_KIND_UNSPECIFIED = 0
SPAN_KIND_INTERNAL = 1
SPAN_KIND_SERVER = 2
SPAN_KIND_CLIENT = 3
SPAN_KIND_PRODUCER = 4
SPAN_KIND_CONSUMER = 5

# OTLP's Status.StatusCode numbers.
STATUS_UNSET = 0
STATUS_OK = 1
STATUS_ERROR = 2


@dataclass(frozen=True, slots=True)
class SpanEventRecord:
    """One event (a timestamped annotation; Jaeger calls them logs) on a span."""

    name: str
    time_ns: int
    attributes: dict[str, Any] = field(default_factory=dict)
    dropped_attributes_count: int = 0


@dataclass(frozen=True, slots=True)
class SpanLinkRecord:
    """A link from one span to another (Jaeger: a FOLLOWS_FROM reference)."""

    trace_id: str
    span_id: str
    attributes: dict[str, Any] = field(default_factory=dict)
    trace_state: str = ""
    dropped_attributes_count: int = 0


class SpanRecord(msgspec.Struct, frozen=True):
    """One span, decoded from any supported trace format.

    A frozen msgspec struct rather than a frozen dataclass: a full parse makes one
    per span, and a frozen dataclass sets each of its 21 fields through
    ``object.__setattr__`` (1.9 us a span against 0.15 us, a sixth of the parse).
    Equality, repr and immutability are a dataclass's; ``msgspec.structs.replace``
    copies one with changes.
    """

    trace_id: str
    span_id: str
    name: str
    parent_span_id: str | None = None
    kind: int = SPAN_KIND_UNSPECIFIED
    start_ns: int = 0
    end_ns: int = 0
    # msgspec gives each struct a fresh dict for an empty-dict default, as a default_factory would.
    attributes: dict[str, Any] = {}
    status_code: int = STATUS_UNSET
    status_message: str = ""
    resource: dict[str, Any] = {}
    scope_name: str = ""
    scope_version: str = ""
    scope_attributes: dict[str, Any] = {}
    trace_state: str = ""
    events: tuple[SpanEventRecord, ...] = ()
    links: tuple[SpanLinkRecord, ...] = ()
    # What the producer dropped past its limits: a payload attribute may be among them.
    dropped_attributes_count: int = 0
    dropped_events_count: int = 0
    dropped_links_count: int = 0
    # Where the span was read from ("traces/run_x.jsonl:12"), for error messages.
    origin: str = ""

    @property
    def key(self) -> tuple[str, str]:
        """The identity used to drop duplicates: (trace id, span id)."""
        return (self.trace_id, self.span_id)

    @property
    def ended(self) -> bool:
        return self.end_ns > 0


def from_sdk_span(span: ReadableSpan) -> SpanRecord:
    """An SDK span in this process as readers yield it from a file: what the codec decodes.

    The exporters that decode a span before it is written (Postgres) build it here,
    so the codec sees the same record whichever way the span came.
    """
    ctx = span.get_span_context()
    assert ctx is not None  # SDK spans always carry a context
    attributes = {k: list(v) if isinstance(v, tuple) else v for k, v in (span.attributes or {}).items()}
    return SpanRecord(
        trace_id=format(ctx.trace_id, "032x"),
        span_id=format(ctx.span_id, "016x"),
        name=span.name,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        attributes=attributes,
        resource=dict(span.resource.attributes),
        origin=f"span {span.name!r}",
    )

"""A trace span as every reader yields it, whatever the format it came from.

Readers turn OTLP/JSON, Jaeger JSON and the rest into ``SpanRecord``; the codec
turns a ``SpanRecord`` into an ``Event``. Ids are lowercase hex, times are Unix
nanoseconds, attribute values are plain Python values (``str``, ``bool``,
``int``, ``float``, ``bytes``, ``None``, lists and dicts of them).
"""

from __future__ import annotations

from collections.abc import Mapping
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
    per span, and a frozen dataclass sets each of its fields through
    ``object.__setattr__``, which a full parse measurably pays for.
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
    """An SDK span in this process as readers yield it from a trace: what the codec decodes.

    Every field is what our readers give for the same span read back from the
    durable file or from the SDK's OTLP protobuf export (which leaves a link's
    trace state out): ids as lowercase hex, the kind and status as OTLP numbers,
    sequences as lists, events and links as records, the drop counts. The
    exporters that decode a span before it is written (Postgres) build it here,
    so the codec sees the same record whichever way the span came;
    ``test_spans_from_sdk.py`` holds the three ways to one record.
    """
    ctx = span.get_span_context()
    assert ctx is not None  # SDK spans always carry a context
    parent = span.parent
    scope = span.instrumentation_scope
    status = span.status
    return SpanRecord(
        trace_id=format(ctx.trace_id, "032x"),
        span_id=format(ctx.span_id, "016x"),
        name=span.name,
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        # The SDK numbers SpanKind from 0 (INTERNAL); OTLP from 1 (0 is UNSPECIFIED).
        kind=span.kind.value + 1,
        start_ns=span.start_time or 0,
        end_ns=span.end_time or 0,
        attributes=_plain(span.attributes),
        # The SDK's StatusCode values are OTLP's: UNSET 0, OK 1, ERROR 2.
        status_code=status.status_code.value,
        status_message=status.description or "",
        resource=_plain(span.resource.attributes),
        scope_name=scope.name if scope is not None else "",
        scope_version=(scope.version or "") if scope is not None else "",
        scope_attributes=_plain(scope.attributes) if scope is not None else {},
        trace_state=ctx.trace_state.to_header() if ctx.trace_state else "",
        events=tuple(
            SpanEventRecord(
                name=event.name,
                time_ns=event.timestamp,
                attributes=_plain(event.attributes),
                dropped_attributes_count=event.dropped_attributes,
            )
            for event in span.events
        ),
        links=tuple(
            SpanLinkRecord(
                trace_id=format(link.context.trace_id, "032x"),
                span_id=format(link.context.span_id, "016x"),
                attributes=_plain(link.attributes),
                trace_state=link.context.trace_state.to_header() if link.context.trace_state else "",
                dropped_attributes_count=link.dropped_attributes,
            )
            for link in span.links
        ),
        dropped_attributes_count=span.dropped_attributes,
        dropped_events_count=span.dropped_events,
        dropped_links_count=span.dropped_links,
        origin=f"span {span.name!r}",
    )


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    """SDK attributes as readers give them: the SDK keeps sequences as tuples, OTLP arrays read as lists."""
    if not attributes:
        return {}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attributes.items()}

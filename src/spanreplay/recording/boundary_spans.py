"""Boundary spans started without the SDK's per-attribute checks on what spanreplay wrote.

A boundary's span starts with a dozen attributes spanreplay built itself (the run
id, the seq, the call id, the payloads as text) and ends with a few more. The
SDK's ``Span`` checks and copies each of them, one by one under a lock, and on
ending copies the whole span into a new ``ReadableSpan``: on a 1 KB tool call
that is most of what the span costs. ``BoundarySpan`` is the same span as the
SDK's own (a ``ReadableSpan`` with the ``opentelemetry.trace.Span`` methods), its
processors called as the SDK calls them, on start and on end, so every exporter
and processor sees what it always saw. What it leaves out is the check of values
that cannot fail: the attributes spanreplay writes are plain ``str``, ``int`` and
``bool``. Anything anyone else hands it (another instrumentation's attributes,
``set_attribute`` from the agent's code, events, links) goes through the SDK's
own ``BoundedAttributes``, as on an SDK span.

``BoundarySpans.for_tracer`` takes this path only for the SDK's own ``Tracer``,
and only where the SDK would not change the span's attributes: no attribute
length limit, and the SDK's internal span metrics off. Any other tracer, or an
SDK whose tracer no longer holds what is read here, gets ``start_span`` as before.

This is the ``boundary_spans`` accelerator (``_accelerators``): off with
``configure(accelerate=False)``, and off, with one log line, when its preflight
(``_check``) finds the SDK's tracer or ``ReadableSpan`` keeping other fields.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Mapping
from time import time_ns
from types import TracebackType
from typing import Any, Final

from opentelemetry import trace as trace_api
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, SpanLimits, SpanProcessor, Tracer, sampling
from opentelemetry.sdk.trace.sampling import Decision
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.util import types

from spanreplay import semconv as sc
from spanreplay._accelerators import register
from spanreplay.model.escaped_names import plain_name

from .others_masking import OthersMasking, bounded_list

logger = logging.getLogger("spanreplay")

__all__ = ["BoundarySpan", "BoundarySpans", "LineFields"]

# What the trace file's line encoder reads of an ended span, in one tuple: the context,
# the parent's, the start and end times, the status, the attributes, the resource,
# the scope, the name and the kind.
LineFields = tuple[
    SpanContext,
    SpanContext,
    int,
    int,
    Status,
    Mapping[str, Any],
    Resource,
    InstrumentationScope | None,
    str,
    SpanKind,
]

_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)
_NOT_SAMPLED: Final = TraceFlags(TraceFlags.DEFAULT)
# The W3C "random trace id" flag, in SDKs that know it.
_RANDOM: Final[int] = getattr(TraceFlags, "RANDOM_TRACE_ID", 0)
_SDK_METRICS: Final = "OTEL_PYTHON_SDK_INTERNAL_METRICS_ENABLED"


class BoundarySpan(trace_api.Span, ReadableSpan):
    """A boundary's span: the SDK's ``ReadableSpan``, recording until ``end()``."""

    def __init__(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext,
        kind: SpanKind,
        attributes: dict[str, Any],
        spans: BoundarySpans,
    ) -> None:
        ReadableSpan.__init__(
            self,
            name,
            context,
            parent,
            spans.resource,
            attributes,
            kind=kind,
            instrumentation_scope=spans.scope,
            start_time=time_ns(),
        )
        self._spans = spans
        self._dropped = 0
        # The names of the attributes others set (None: none yet), and whether someone
        # renamed the span: masked once, as it ends (see ``_others_masking``).
        self._others: set[str] | None = None
        self._renamed = False
        if len(attributes) > spans.max_attributes:
            spans.trim(self)

    # -- what spanreplay itself sets ---------------------------------------------------

    def set_own(self, attributes: Mapping[str, Any]) -> None:
        """Attributes spanreplay built: ``str``, ``int``, ``bool`` and tuples of ``str``."""
        if self._end_time is None:
            self._attributes.update(attributes)  # type: ignore[union-attr]
            if self._others:
                self._others.difference_update(attributes)

    @property
    def dropped_attributes(self) -> int:
        return self._dropped

    def line_fields(self) -> LineFields | None:
        """What the trace file's line encoder reads, in one call rather than a dozen
        property reads: None when the span needs the general path (events, links, a
        status description, a trace state, dropped attributes, or not ended)."""
        context: SpanContext = self._context  # type: ignore[assignment]
        end = self._end_time
        if end is None or self._events or self._links or self._dropped or self._status.description:
            return None
        if context.trace_state:
            return None
        return (
            context,
            self._parent,  # type: ignore[return-value]
            self._start_time,
            end,
            self._status,
            self._attributes,
            self._resource,
            self._instrumentation_scope,
            self._name,
            self._kind,
        )

    # -- opentelemetry.trace.Span ----------------------------------------------------

    def get_span_context(self) -> SpanContext:
        return self._context  # type: ignore[return-value]

    def is_recording(self) -> bool:
        return self._end_time is None

    def set_attributes(self, attributes: Mapping[str, types.AttributeValue]) -> None:
        if self._ended("set attributes"):
            return
        values = checked(attributes)
        self._attributes.update(values)  # type: ignore[union-attr]
        if self._others is None:
            self._others = set(values)
        else:
            self._others.update(values)
        self._spans.trim(self)

    def set_attribute(self, key: str, value: types.AttributeValue) -> None:
        self.set_attributes({key: value})

    def add_event(self, name: str, attributes: types.Attributes = None, timestamp: int | None = None) -> None:
        if self._ended("add an event"):
            return
        if not isinstance(self._events, BoundedList):
            self._events = BoundedList(self._spans.limits.max_events)
        self._events.append(Event(name, self._checked(self._spans.limits.max_event_attributes, attributes), timestamp))

    def add_link(self, context: SpanContext, attributes: types.Attributes = None) -> None:
        if self._ended("add a link"):
            return
        # As the SDK: a link to an invalid context is kept only with attributes or a trace state.
        if not (context and (context.is_valid or attributes or context.trace_state)):
            return
        if not isinstance(self._links, BoundedList):
            self._links = BoundedList(self._spans.limits.max_links)
        self._links.append(Link(context, self._checked(self._spans.limits.max_link_attributes, attributes)))

    def _checked(self, most: int | None, attributes: types.Attributes) -> BoundedAttributes:
        """An event's or a link's attributes, checked and bounded as the SDK's span does."""
        limit = self._spans.limits.max_attribute_length
        return BoundedAttributes(most, attributes, immutable=True, max_value_len=limit)

    def update_name(self, name: str) -> None:
        if not self._ended("update the name"):
            self._name = name
            self._renamed = True

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        # As the SDK: an ended span's status is final, so is OK, and UNSET changes nothing.
        if self._ended("set the status") or self._status.status_code is StatusCode.OK:
            return
        if isinstance(status, Status):
            if status.status_code is not StatusCode.UNSET:
                self._status = status
        elif status is not StatusCode.UNSET:
            self._status = Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: types.Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,  # noqa: FBT001, FBT002 -- OpenTelemetry's Span.record_exception signature
    ) -> None:
        module = type(exception).__module__
        qualname = type(exception).__qualname__
        recorded: dict[str, Any] = {
            sc.EXCEPTION_TYPE: f"{module}.{qualname}" if module and module != "builtins" else qualname,
            sc.EXCEPTION_MESSAGE: str(exception),
            sc.EXCEPTION_STACKTRACE: "".join(traceback.format_exception(exception)),
            sc.EXCEPTION_ESCAPED: str(escaped),
        }
        if attributes:
            recorded.update(attributes)
        self.add_event(sc.EXCEPTION_EVENT, recorded, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self._end_time is not None:
            logger.warning("Calling end() on an ended span.")
            return
        self._end_time = end_time if end_time is not None else time_ns()
        spans = self._spans
        if spans.others is not None and (
            self._others or self._events or self._links or self._renamed or self._status.description
        ):
            self._mask_others(spans.others)
        if len(self._attributes) > spans.max_attributes:  # type: ignore[arg-type]
            spans.trim(self)
        spans.ended(self)

    def _mask_others(self, masking: OthersMasking) -> None:
        """Mask what others wrote on this span, before any processor sees it ended."""
        attributes: dict[str, Any] = self._attributes  # type: ignore[assignment]
        # The kind and key as the run knows them (written escaped when UTF-8 cannot hold them).
        kind, key = (plain_name(attributes, n, str(attributes.get(n, "")), self._name) for n in (sc.KIND, sc.KEY))
        names = self._others
        if names:
            others = {name: attributes[name] for name in names if name in attributes}
            masked = masking.attributes(kind, key, others)
            for name in others:
                if name not in masked:
                    del attributes[name]
            attributes.update(masked)
        if self._events:
            self._events = bounded_list(self._events, masking.events(kind, key, list(self._events)))
        if self._links:
            self._links = bounded_list(self._links, masking.links(kind, key, list(self._links)))
        if self._renamed:
            self._name = masking.text(self._name)
        self._status = masking.status(self._status)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> None:
        if exc_val is not None and self.is_recording():
            self.record_exception(exc_val, escaped=True)
            self.set_status(Status(StatusCode.ERROR, f"{type(exc_val).__name__}: {exc_val}"))
        super().__exit__(exc_type, exc_val, exc_tb)

    def _ended(self, what: str) -> bool:
        if self._end_time is None:
            return False
        logger.warning("Tried to %s on an ended span.", what)
        return True


class BoundarySpans:
    """Starts boundary spans for one SDK ``Tracer`` as its ``start_span`` would."""

    def __init__(self, tracer: Tracer, limits: SpanLimits, scope: InstrumentationScope) -> None:
        self.tracer = tracer
        self.limits = limits
        self.scope = scope
        self.resource = tracer.resource
        self._sampler = tracer.sampler
        # The SDK's default sampler, and always-on, decide a span with a parent in this
        # process without looking at it: sampled as its parent (always), its trace state.
        self._as_parent = self._sampler is sampling.DEFAULT_ON
        self._always = self._sampler is sampling.ALWAYS_ON
        self._ids = tracer.id_generator
        self._processor: SpanProcessor = tracer.span_processor
        self._ending = getattr(self._processor, "_on_ending", None)
        # Masks what others write on these spans as each ends; None: masking is off.
        self.others: OthersMasking | None = None
        # No limit set reads as None: compared as the largest count.
        limit = limits.max_span_attributes
        self.max_attributes: int = limit if limit is not None else sys.maxsize

    @classmethod
    def for_tracer(cls, tracer: trace_api.Tracer) -> BoundarySpans | None:
        """The starter for ``tracer``, or None where its own ``start_span`` must be used."""
        if not BOUNDARY_SPANS.on or type(tracer) is not Tracer:
            return None
        limits = getattr(tracer, "_span_limits", None)
        scope = getattr(tracer, "_instrumentation_scope", None)
        enabled = getattr(tracer, "_is_enabled", None)
        if (
            not isinstance(limits, SpanLimits)
            or limits.max_span_attribute_length is not None
            or not isinstance(scope, InstrumentationScope)
            or (enabled is not None and not enabled())
            or os.environ.get(_SDK_METRICS, "").strip().lower() == "true"
        ):
            return None
        return cls(tracer, limits, scope)

    def start(self, name: str, context: Context | None, kind: SpanKind, attributes: dict[str, Any]) -> trace_api.Span:
        """A span under the one current in ``context``, starting with ``attributes`` (not copied)."""
        parent = trace_api.get_current_span(context).get_span_context()
        if not parent.is_valid:
            # A new trace: rare for a boundary, left to the SDK.
            return self.tracer.start_span(name, context, kind, attributes)
        if self._always or self._as_parent:
            sampled = recording = self._always or parent.trace_flags.sampled
            state: TraceState | None = parent.trace_state
        else:
            result = self._sampler.should_sample(context, parent.trace_id, name, kind, attributes, ())
            decision = result.decision
            sampled = decision is Decision.RECORD_AND_SAMPLE
            recording = sampled or decision is Decision.RECORD_ONLY
            state = result.trace_state
            if recording and len(result.attributes) != len(attributes):
                # A sampler that adds attributes: checked as anyone else's.
                attributes.update(checked(result.attributes))
        flags = _SAMPLED if sampled else _NOT_SAMPLED
        if _RANDOM and parent.trace_flags & _RANDOM:
            flags = TraceFlags(flags | _RANDOM)
        own = SpanContext(
            parent.trace_id, self._ids.generate_span_id(), is_remote=False, trace_flags=flags, trace_state=state
        )
        if not recording:
            return trace_api.NonRecordingSpan(own)
        span = BoundarySpan(name, own, parent, kind, attributes, self)
        self._processor.on_start(span, parent_context=context)  # type: ignore[arg-type]
        return span

    def ended(self, span: BoundarySpan) -> None:
        if self._ending is not None:
            self._ending(span)
        self._processor.on_end(span)

    def trim(self, span: BoundarySpan) -> None:
        """Past the count limit, drop the oldest attributes, as ``BoundedAttributes`` does."""
        attributes: dict[str, Any] = span._attributes  # type: ignore[assignment]
        limit = self.max_attributes
        if len(attributes) <= limit:
            return
        for key in list(attributes)[: len(attributes) - limit]:
            del attributes[key]
            span._dropped += 1


def checked(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes from outside spanreplay, checked and converted as the SDK does."""
    return dict(BoundedAttributes(None, attributes, immutable=True))


# What ReadableSpan.__init__ stores, under the names BoundarySpan reads and writes.
_SPAN_FIELDS: Final = (
    "_name",
    "_context",
    "_parent",
    "_start_time",
    "_end_time",
    "_attributes",
    "_events",
    "_links",
    "_resource",
    "_instrumentation_scope",
    "_status",
    "_kind",
)


def _check() -> str | None:
    """Why the SDK no longer holds what ``BoundarySpans`` reads, or None when it does."""
    from opentelemetry.sdk import trace as sdk_trace
    from opentelemetry.sdk.version import __version__ as sdk_version

    where = f"opentelemetry-sdk {sdk_version}"
    provider = sdk_trace.TracerProvider(shutdown_on_exit=False)
    try:
        tracer = provider.get_tracer("preflight")
        if type(tracer) is not Tracer:
            return f"{where} hands out a {type(tracer).__qualname__} rather than its Tracer"
        for name, kind in (("_span_limits", SpanLimits), ("_instrumentation_scope", InstrumentationScope)):
            if not isinstance(getattr(tracer, name, None), kind):
                return f"{where}'s Tracer has no {name} (a {kind.__name__})"
        enabled = getattr(tracer, "_is_enabled", None)
        if enabled is not None and not callable(enabled):
            return f"{where}'s Tracer._is_enabled is no longer a method"
        for name in ("sampler", "id_generator", "span_processor", "resource"):
            if not hasattr(tracer, name):
                return f"{where}'s Tracer has no {name}"
        ending = getattr(tracer.span_processor, "_on_ending", None)
        if ending is not None and not callable(ending):
            return f"{where}'s span processor's _on_ending is no longer a method"
    finally:
        provider.shutdown()
    attributes: dict[str, Any] = {"preflight": 1}
    span = ReadableSpan("preflight", attributes=attributes)
    missing = [name for name in _SPAN_FIELDS if name not in vars(span)]
    if missing:
        return f"{where}'s ReadableSpan no longer keeps {missing[0]}"
    if vars(span)["_attributes"] is not attributes or dict(span.attributes or {}) != attributes:
        return f"{where}'s ReadableSpan no longer keeps the attributes it is given as they are"
    return None


BOUNDARY_SPANS: Final = register(
    "boundary_spans",
    reads="the OpenTelemetry SDK Tracer's _span_limits, _instrumentation_scope and _is_enabled, its span "
    "processor's _on_ending, and the fields ReadableSpan.__init__ stores (_attributes, _context, _end_time, ...)",
    replaced_by="the SDK's own Tracer.start_span",
    check=_check,
)

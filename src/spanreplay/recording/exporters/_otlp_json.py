"""OpenTelemetry SDK spans -> OTLP/JSON, as the opentelemetry-proto spec writes it.

Hex trace and span ids, 64-bit integers as strings, enums as integers,
lowerCamelCase field names: what the Collector's ``otlpjsonfile`` receiver and
Jaeger's upload read. One line holds one ``TracesData`` with one span, so a
line is complete the moment it is written.

``_otlp_dicts.span_dict`` builds the document as dicts and is the reference;
``LineEncoder`` writes the same bytes with as little Python per span as it can,
since it runs on the agent's thread as each span ends (tests hold the two to the
same bytes). A span holding text UTF-8 cannot hold goes to ``_readable_lines``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import msgspec
import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from ..boundary_spans import BoundarySpan, LineFields
from ._otlp_dicts import (
    KIND,
    any_value,
    attributes_of,
    key_values,
    raw_parts,
    span_tail,
)
from ._readable_lines import readable_line

_KIND_JSON = {kind: b',"kind":%d' % number for kind, number in KIND.items()}
# The end of a span with no dropped counts, events or links, by status (no description).
_PLAIN_TAIL = {
    StatusCode.UNSET: b',"status":{}}',
    StatusCode.OK: b',"status":{"code":1}}',
    StatusCode.ERROR: b',"status":{"code":2}}',
}


_WRAPPERS: Final[dict[type, tuple[bytes, bytes]]] = {
    str: (b'{"stringValue":', b"}"),
    int: (b'{"intValue":"', b'"}'),
    bool: (b'{"boolValue":', b"}"),
}
# msgspec writes a str, an int or a bool as orjson does, byte for byte (every code
# point: a test holds them to it), at half the cost per call, and an integer beyond
# 64 bits as its digits, as ``key_values`` does.
_encode_value: Final = msgspec.json.Encoder().encode


def _any_value_json(value: Any) -> bytes:
    return orjson.dumps(any_value(value))


def attribute_encoders(types: Sequence[type]) -> tuple[Callable[[Any], bytes], ...] | None:
    """How to write each value of attributes of these types into its wrapper (None: all
    are str, int or bool). A value of any other type (a tuple of chunks, a float, which
    may be NaN) is written whole by ``any_value``, wrapper and all."""
    encoders = tuple(_encode_value if kind in _WRAPPERS else _any_value_json for kind in types)
    return None if all(encoder is _encode_value for encoder in encoders) else encoders


def encode_values(values: Sequence[Any], encoders: tuple[Callable[[Any], bytes], ...] | None) -> tuple[bytes, ...]:
    """Each value's JSON for its slot: a loop in C over the values, not one in Python."""
    if encoders is None:
        return tuple(map(_encode_value, values))
    return tuple(map(operator.call, encoders, values))


def span_parts(span: ReadableSpan) -> list[bytes]:
    """``span_dict(span)`` as JSON, in pieces for ``b"".join``: the bytes of
    ``orjson.dumps(span_dict(span))`` with fewer Python objects. ``LineEncoder``
    writes spans of the usual shape from a template instead, and the rest with this.
    """
    ctx = span.get_span_context()
    assert ctx is not None  # SDK spans always carry a context
    attributes, events, links = raw_parts(span)
    head = b'{"traceId":"%032x","spanId":"%016x"' % (ctx.trace_id, ctx.span_id)
    if ctx.trace_state:
        head += b',"traceState":' + orjson.dumps(ctx.trace_state.to_header())
    parent = span.parent
    if parent is not None:
        head += b',"parentSpanId":"%016x"' % parent.span_id
    flags = int(ctx.trace_flags) | (0x300 if parent is not None and parent.is_remote else 0x100)
    parts = [head, b',"flags":%d,"name":' % flags, orjson.dumps(span.name), _KIND_JSON[span.kind]]
    if span.start_time is not None:
        parts.append(b',"startTimeUnixNano":"%d"' % span.start_time)
    if span.end_time is not None:
        parts.append(b',"endTimeUnixNano":"%d"' % span.end_time)
    parts.append(b',"attributes":')
    parts.append(orjson.dumps(key_values(attributes)))
    status = span.status
    if events or links or status.description or span.dropped_attributes or span.dropped_events or span.dropped_links:
        # '{"status":..}' continues the span as ',"status":..}'.
        parts.append(b"," + orjson.dumps(span_tail(span, events, links))[1:])
    else:
        parts.append(_PLAIN_TAIL[status.status_code])
    return parts


def span_json(span: ReadableSpan) -> bytes:
    """The OTLP/JSON ``Span`` object for one SDK span, as JSON bytes."""
    return b"".join(span_parts(span))


def _line_fields(span: ReadableSpan) -> LineFields | None:
    """What a line's template needs of an ended span, through ReadableSpan's public
    properties (but for the attributes, ``attributes_of``); None when the span takes
    the general path: it has a trace state, events, links, a status description or
    anything dropped, or has not ended."""
    ctx = span.context
    parent = span.parent
    start = span.start_time
    end = span.end_time
    status = span.status
    if (
        ctx is None
        or parent is None
        or start is None
        or end is None
        or status.description
        or ctx.trace_state
        or span.dropped_attributes
        or span.dropped_events
        or span.dropped_links
        or span.events
        or span.links
    ):
        return None
    return (
        ctx,
        parent,
        start,
        end,
        status,
        attributes_of(span),
        span.resource,
        span.instrumentation_scope,
        span.name,
        span.kind,
    )


# A span's shape: what its line's template is made of. Everything in it but the
# attribute keys and name is compared by identity (the resource, the scope, the
# kind and status enums), which costs nothing to hash.
_Shape = tuple[int, int, str, int, int, int, bool, tuple[str, ...], tuple[type, ...]]


class _LineTemplate:
    """One shape's whole line: its fixed pieces, with a slot between each two for what varies.

    ``parts[1::2]`` are the slots: the ids, the times, then each attribute value.
    """

    __slots__ = ("encoders", "parts", "resource", "scope")

    def __init__(
        self, pieces: Sequence[bytes], encoders: tuple[Callable[[Any], bytes], ...] | None, resource: Any, scope: Any
    ) -> None:
        self.parts: list[bytes] = [b""] * (2 * len(pieces) - 1)
        self.parts[0::2] = pieces
        self.encoders = encoders
        # Held, so that the ids in the shape cannot be taken by other objects.
        self.resource = resource
        self.scope = scope


_IDS: Final = b'%032x","spanId":"%016x","parentSpanId":"%016x'
_TIMES: Final = b'%d","endTimeUnixNano":"%d'


class LineEncoder:
    """Encodes spans to OTLP/JSON lines (one ``TracesData`` each), as each span ends.

    A run's boundary spans come in a few shapes: the same resource, scope, name,
    kind, status and attribute keys, with values of the same types, span after span.
    For each shape the line is written once as a template: its fixed pieces
    (envelope, field names, attribute keys, value wrappers) already JSON, with a
    slot between each two. A span then costs its properties read, its ids
    and times formatted, one encoding of each attribute value (see
    ``encode_values``) and one join. A span with a trace state, events, links, a
    status description or anything dropped is written piece by piece instead.
    Both ways give the bytes of ``orjson.dumps`` of ``span_dict`` in its envelope.
    """

    def __init__(self, limit: int = 512) -> None:
        # The resource is kept in the value so its id() cannot be reused by another object.
        self._envelopes: dict[tuple[int, str, str, tuple[Any, ...]], tuple[Resource, bytes, bytes]] = {}
        self._templates: dict[_Shape, _LineTemplate] = {}
        self._limit = limit

    def encode(self, span: ReadableSpan) -> bytes:
        fields = span.line_fields() if type(span) is BoundarySpan else _line_fields(span)
        if fields is None:
            return self._pieces(span)
        ctx, parent, start, end, status, attributes, resource, scope, name, kind = fields
        values = tuple(attributes.values())
        shape = (
            id(resource),
            id(scope),
            name,
            id(kind),
            id(status.status_code),
            ctx.trace_flags,
            parent.is_remote,
            tuple(attributes),
            tuple(map(type, values)),
        )
        template = self._templates.get(shape)
        try:
            if template is None or template.resource is not resource or template.scope is not scope:
                template = self._template(span, shape)
            encoded = encode_values(values, template.encoders)
        except (TypeError, ValueError):  # text that is not valid UTF-8 (a lone surrogate)
            return self._pieces(span)
        # Filling the slots of a copy and joining it copies each byte once; a %-format
        # of the whole line would first read every byte of the template for a "%".
        parts = template.parts.copy()
        parts[1] = _IDS % (ctx.trace_id, ctx.span_id, parent.span_id)
        parts[3] = _TIMES % (start, end)
        parts[5::2] = encoded
        return b"".join(parts)

    def _template(self, span: ReadableSpan, shape: _Shape) -> _LineTemplate:
        ctx = span.get_span_context()
        parent = span.parent
        assert ctx is not None
        assert parent is not None
        head, tail = self._envelope_of(span)
        flags = int(ctx.trace_flags) | (0x300 if parent.is_remote else 0x100)
        keys, types = shape[7], shape[8]
        encoders = attribute_encoders(types)
        pieces = [
            head + b'{"traceId":"',
            b'","flags":%d,"name":' % flags
            + orjson.dumps(span.name)
            + _KIND_JSON[span.kind]
            + b',"startTimeUnixNano":"',
            b'","attributes":[',
        ]
        for n, (key, kind) in enumerate(zip(keys, types, strict=True)):
            wrapper = _WRAPPERS.get(kind)
            pieces[-1] += (
                b"," * (n > 0) + b'{"key":' + orjson.dumps(key) + b',"value":' + (wrapper[0] if wrapper else b"")
            )
            pieces.append(wrapper[1] + b"}" if wrapper else b"}")
        pieces[-1] += b"]" + _PLAIN_TAIL[span.status.status_code] + tail
        template = _LineTemplate(pieces, encoders, span.resource, span.instrumentation_scope)
        if len(self._templates) >= self._limit:
            self._templates.clear()  # spans of many shapes: start over rather than grow
        self._templates[shape] = template
        return template

    def _pieces(self, span: ReadableSpan) -> bytes:
        try:
            head, tail = self._envelope_of(span)
            parts = span_parts(span)
        except TypeError:  # text UTF-8 cannot hold (a lone surrogate): written readable, not lost
            return readable_line(span)
        parts.insert(0, head)
        parts.append(tail)
        return b"".join(parts)

    def _envelope_of(self, span: ReadableSpan) -> tuple[bytes, bytes]:
        scope = span.instrumentation_scope
        scope_name = scope.name if scope else ""
        scope_version = (scope.version or "") if scope else ""
        scope_attributes = scope.attributes if scope else None
        # By value, not by the scope's id: the SDK makes a new scope for every get_tracer() call.
        # Scope attributes are immutable and hold only hashable values (the SDK makes sequences tuples).
        cache_key = (
            id(span.resource),
            scope_name,
            scope_version,
            tuple(scope_attributes.items()) if scope_attributes else (),
        )
        envelope = self._envelopes.get(cache_key)
        if envelope is None or envelope[0] is not span.resource:
            envelope = (span.resource, *self._envelope(span.resource, scope_name, scope_version, scope_attributes))
            self._envelopes[cache_key] = envelope
        return envelope[1], envelope[2]

    @staticmethod
    def _envelope(
        resource: Resource, scope_name: str, scope_version: str, scope_attributes: Mapping[str, Any] | None = None
    ) -> tuple[bytes, bytes]:
        scope: dict[str, Any] = {"name": scope_name}
        if scope_version:
            scope["version"] = scope_version
        if scope_attributes:
            scope["attributes"] = key_values(scope_attributes)
        resource_json = orjson.dumps({"attributes": key_values(resource.attributes)})
        head = b'{"resourceSpans":[{"resource":' + resource_json
        if resource.schema_url:
            head += b',"schemaUrl":' + orjson.dumps(resource.schema_url)
        head += b',"scopeSpans":[{"scope":' + orjson.dumps(scope) + b',"spans":['
        return head, b"]}]}]}\n"

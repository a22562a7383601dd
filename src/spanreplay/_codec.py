"""Event <-> span attributes: JSON payloads, chunks, digests, errors, schema versions.

One codec serves every exporter and every reader. It knows no exporter, no reader
and no run: record code asks it for attributes, readers hand it ``SpanRecord``s.
"""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from . import _semconv as sc
from ._events import ErrorInfo, Event, RunInfo
from ._spans import SpanRecord
from .errors import PayloadIntegrityError, RecordedError, SchemaVersionError, TraceFormatError

# Grafana Tempo cuts string attributes at 2048 bytes by default but leaves arrays
# alone, so a payload longer than this is written as an array of chunks, each under
# the cut. Chunks split on UTF-8 character boundaries, so each one is valid text.
INLINE_MAX_BYTES: Final = 2000
CHUNK_BYTES: Final = 2000

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _default(value: Any) -> Any:
    """orjson fallback for values it does not know: models, sets, bytes, the rest."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # pydantic models, including the Anthropic SDK's types
        return dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "backslashreplace")
    # A repr with a memory address would differ on every run and break replay.
    return _ADDRESS.sub("", repr(value))


_INPUT_OPTS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_OUTPUT_OPTS: Final = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def encode_input(value: Any) -> bytes:
    """Canonical JSON for an input: sorted keys, so equal inputs give equal bytes."""
    return orjson.dumps(value, default=_default, option=_INPUT_OPTS)


def encode_output(value: Any) -> bytes:
    """JSON for an output, keys in their original order (agent code may iterate them)."""
    return orjson.dumps(value, default=_default, option=_OUTPUT_OPTS)


def payload_attributes(name: str, data: bytes) -> dict[str, Any]:
    """The attributes that carry one payload: text or chunks, byte length, sha256."""
    size = len(data)
    value: str | tuple[str, ...]
    if size <= INLINE_MAX_BYTES:
        value = data.decode()
    else:
        value = tuple(chunk_utf8(data, CHUNK_BYTES))
    return {
        name: value,
        name + sc.SIZE_SUFFIX: size,
        name + sc.SHA256_SUFFIX: hashlib.sha256(data).hexdigest(),
    }


def chunk_utf8(data: bytes, limit: int) -> list[str]:
    """Split UTF-8 ``data`` into strings of at most ``limit`` bytes each."""
    chunks: list[str] = []
    start, total = 0, len(data)
    while start < total:
        end = min(start + limit, total)
        # Step back off UTF-8 continuation bytes (0b10xxxxxx) so no character is split.
        while end < total and end > start and (data[end] & 0xC0) == 0x80:
            end -= 1
        chunks.append(data[start:end].decode())
        start = end
    return chunks


def read_payload(
    attributes: Mapping[str, Any], name: str, *, run_id: str, seq: int, origin: str
) -> bytes | None:
    """The payload bytes under ``name``, checked against their recorded length and digest.

    Returns None when the span has no such payload. Raises PayloadIntegrityError when
    a backend or exporter cut or altered it, naming the setting to raise.
    """
    if name not in attributes:
        if name + sc.SIZE_SUFFIX in attributes:
            raise PayloadIntegrityError(
                f"Run {run_id} seq {seq}: attribute {name} is missing although its size "
                f"({attributes[name + sc.SIZE_SUFFIX]} bytes) was recorded ({origin}); the span "
                "lost attributes on the way. Raise the OpenTelemetry SDK's attribute count limit "
                "(OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT) or the backend's, then record the run again.",
                run_id=run_id,
                seq=seq,
                attribute=name,
                expected_size=int(attributes[name + sc.SIZE_SUFFIX]),
                found_size=0,
                source=origin,
            )
        return None
    raw = attributes[name]
    if isinstance(raw, str) and raw.startswith('["') and name + sc.SIZE_SUFFIX in attributes:
        # Jaeger stores array attributes as JSON text: a chunked payload comes back as
        # '["chunk", ...]'. Its size tells the two apart: the text itself is longer.
        raw = _jaeger_array(raw, int(attributes[name + sc.SIZE_SUFFIX]))
    if isinstance(raw, str):
        data = raw.encode()
    elif isinstance(raw, (list, tuple)) and all(isinstance(c, str) for c in raw):
        data = "".join(raw).encode()
    else:
        raise TraceFormatError(
            f"Run {run_id} seq {seq}: attribute {name} holds {type(raw).__name__}, not the "
            f"JSON text or array of text chunks spanreplay writes ({origin}); the file was "
            "not written by spanreplay or was edited.",
            source=origin,
        )
    expected = attributes.get(name + sc.SIZE_SUFFIX)
    digest = attributes.get(name + sc.SHA256_SUFFIX)
    if expected is None or digest is None:
        raise PayloadIntegrityError(
            f"Run {run_id} seq {seq}: attribute {name} has no recorded size or sha256 "
            f"({origin}); the span lost attributes on the way. Raise the OpenTelemetry SDK's "
            "attribute count limit (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT) and record the run again.",
            run_id=run_id,
            seq=seq,
            attribute=name,
            expected_size=-1,
            found_size=len(data),
            source=origin,
        )
    expected_size = int(expected)
    if len(data) != expected_size or hashlib.sha256(data).hexdigest() != digest:
        raise PayloadIntegrityError(
            f"Run {run_id} seq {seq}: attribute {name} was cut or altered: {expected_size} bytes "
            f"expected, {len(data)} found ({origin}). Nothing was replayed from it. Raise the "
            "limit that cut it: Tempo's max_attribute_bytes (default 2048), the OpenTelemetry "
            "SDK's OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT or OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, "
            "or the Collector's attributes/transform processors, then record the run again.",
            run_id=run_id,
            seq=seq,
            attribute=name,
            expected_size=expected_size,
            found_size=len(data),
            source=origin,
        )
    return data


def _jaeger_array(raw: str, expected_size: int) -> str | list[str]:
    if len(raw.encode()) == expected_size:
        return raw
    try:
        chunks = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    if isinstance(chunks, list) and all(isinstance(c, str) for c in chunks):
        return chunks
    return raw


# --- errors --------------------------------------------------------------------------

_FIELD_TYPES = (str, int, float, bool, type(None))
# Standard exception slots that do not live in __dict__ but say what went wrong.
_SLOT_FIELDS = ("errno", "strerror", "filename", "filename2", "winerror", "code", "reason")


def encode_error(exc: BaseException) -> bytes:
    """JSON for a raised exception: type, module, message, args and structured fields."""
    cls = type(exc)
    fields: dict[str, Any] = {}
    for name in _SLOT_FIELDS:
        value = getattr(exc, name, None)
        if value is not None and isinstance(value, _FIELD_TYPES):
            fields[name] = value
    for name, value in vars(exc).items() if hasattr(exc, "__dict__") else ():
        if not name.startswith("_") and isinstance(value, _FIELD_TYPES):
            fields[name] = value
    args = [a for a in exc.args if isinstance(a, _FIELD_TYPES)]
    record = {
        "type": cls.__qualname__,
        "module": cls.__module__,
        "message": str(exc),
        "args": args if len(args) == len(exc.args) else None,
        "fields": fields,
    }
    return orjson.dumps(record, default=_default)


def decode_error(data: bytes, *, origin: str = "") -> ErrorInfo:
    """The ErrorInfo in an error payload written by ``encode_error``."""
    try:
        record = orjson.loads(data)
        args = record.get("args")
        return ErrorInfo(
            type_name=str(record["type"]),
            module=str(record.get("module", "builtins")),
            message=str(record.get("message", "")),
            args=tuple(args) if isinstance(args, list) else (),
            fields=dict(record.get("fields") or {}),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
        raise TraceFormatError(
            f"The recorded error payload is not the JSON object spanreplay writes ({origin}): {exc}.",
            source=origin,
        ) from None


ErrorRebuilder = Callable[[ErrorInfo], BaseException | None]
_rebuilders: list[ErrorRebuilder] = []


def register_error_rebuilder(rebuilder: ErrorRebuilder) -> None:
    """Teach replay to rebuild more exception types (return None to pass)."""
    _rebuilders.append(rebuilder)


def rebuild_error(info: ErrorInfo) -> BaseException:
    """The recorded exception, rebuilt as its own type where possible.

    Only types from modules that are already imported are rebuilt: a trace file
    must never make replay import code. Otherwise a RecordedError names the type.
    """
    for rebuilder in reversed(_rebuilders):
        rebuilt = rebuilder(info)
        if rebuilt is not None:
            return rebuilt
    module = sys.modules.get(info.module)
    cls: Any = module
    for part in info.type_name.split("."):
        cls = getattr(cls, part, None) if cls is not None else None
    if isinstance(cls, type) and issubclass(cls, BaseException):
        try:
            exc = cls(*info.args) if info.args or not info.message else cls(info.message)
        except Exception:
            exc = None
        if exc is not None and str(exc) == info.message:
            for name, value in info.fields.items():
                try:
                    setattr(exc, name, value)
                except (AttributeError, TypeError):
                    pass
            return exc
    return RecordedError(info.type_name, info.module, info.message, info.fields)


# --- spans -> events -----------------------------------------------------------------


def _int_attr(attributes: Mapping[str, Any], name: str, origin: str) -> int:
    value = attributes.get(name)
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TraceFormatError(
            f"Attribute {name} is {value!r}, not an integer ({origin}); the span was not "
            "written by spanreplay or was edited.",
            source=origin,
        ) from None


def schema_version(span: SpanRecord) -> int:
    version = _int_attr(span.attributes, sc.SCHEMA, span.origin)
    if version > sc.SCHEMA_VERSION:
        raise SchemaVersionError(
            f"Span {span.span_id} ({span.origin}) was written with spanreplay schema version "
            f"{version}; this release reads versions 1 to {sc.SCHEMA_VERSION}. Upgrade spanreplay "
            "(pip install -U spanreplay) to read it.",
            source=span.origin,
        )
    if version < 1:
        raise SchemaVersionError(
            f"Span {span.span_id} ({span.origin}) has schema version {version}, which no "
            "spanreplay release wrote; the file was edited or is not a spanreplay trace.",
            source=span.origin,
        )
    return version


def is_boundary_span(span: SpanRecord) -> bool:
    return sc.CALL_ID in span.attributes and sc.RUN_ID in span.attributes


def is_run_span(span: SpanRecord) -> bool:
    return sc.RUN_STATUS in span.attributes and sc.RUN_ID in span.attributes


def span_to_event(span: SpanRecord) -> Event:
    """Decode one boundary span, verifying every payload."""
    attrs = span.attributes
    version = schema_version(span)
    run_id = str(attrs[sc.RUN_ID])
    seq = _int_attr(attrs, sc.SEQ, span.origin)
    where = span.origin or f"span {span.span_id}"
    input_json = read_payload(attrs, sc.INPUT, run_id=run_id, seq=seq, origin=where)
    output_json = read_payload(attrs, sc.OUTPUT, run_id=run_id, seq=seq, origin=where)
    error_json = read_payload(attrs, sc.ERROR, run_id=run_id, seq=seq, origin=where)
    extra = {k: v for k, v in attrs.items() if not k.startswith("spanreplay.")}
    return Event(
        run_id=run_id,
        seq=seq,
        call_id=str(attrs[sc.CALL_ID]),
        kind=str(attrs.get(sc.KIND, "")),
        key=str(attrs.get(sc.KEY, "")),
        input_json=input_json if input_json is not None else b"null",
        output_json=output_json,
        error=decode_error(error_json, origin=where) if error_json is not None else None,
        schema_version=version,
        trace_id=span.trace_id,
        span_id=span.span_id,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        attributes=extra,
    )


def span_to_run(span: SpanRecord) -> RunInfo:
    """Decode a run root span. A root span that never ended means the run crashed."""
    attrs = span.attributes
    run_id = str(attrs[sc.RUN_ID])
    status = str(attrs.get(sc.RUN_STATUS, sc.RUN_STATUS_CRASHED))
    if not span.ended or status == sc.RUN_STATUS_RUNNING:
        status = sc.RUN_STATUS_CRASHED
    error_json = read_payload(attrs, sc.RUN_ERROR, run_id=run_id, seq=0, origin=span.origin)
    steps = attrs.get(sc.RUN_STEPS)
    return RunInfo(
        run_id=run_id,
        agent=str(attrs.get(sc.GEN_AI_AGENT_NAME, "")),
        status=status,
        error=decode_error(error_json, origin=span.origin) if error_json is not None else None,
        trace_id=span.trace_id,
        span_id=span.span_id,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        service_name=str(span.resource.get(sc.SERVICE_NAME, "")),
        steps=int(steps) if isinstance(steps, (int, str)) and str(steps).isdigit() else None,
        forked_from=attrs.get(sc.RUN_FORKED_FROM),
    )

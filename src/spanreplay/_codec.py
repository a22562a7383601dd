"""Event <-> span attributes: JSON payloads, chunks, digests, errors, schema versions.

One codec serves every exporter and every reader. It knows no exporter, no reader
and no run: record code asks it for attributes, readers hand it ``SpanRecord``s.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import orjson

from . import _semconv as sc
from ._environment import environment
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
    attributes: dict[str, Any] = {}
    add_payload(attributes, name, data)
    return attributes


def add_payload(attributes: dict[str, Any], name: str, data: bytes) -> None:
    """Put one payload's attributes into ``attributes`` (the record path's form: no extra dict)."""
    names = _PAYLOAD_NAMES.get(name) or _payload_names(name)
    size = len(data)
    attributes[name] = data.decode() if size <= INLINE_MAX_BYTES else tuple(chunk_utf8(data, CHUNK_BYTES))
    attributes[names[0]] = size
    attributes[names[1]] = hashlib.sha256(data).hexdigest()


# A payload attribute's name -> the names of its size and digest (a few names, each seen often).
_PAYLOAD_NAMES: dict[str, tuple[str, str]] = {}


def _payload_names(name: str) -> tuple[str, str]:
    names = (name + sc.SIZE_SUFFIX, name + sc.SHA256_SUFFIX)
    if len(_PAYLOAD_NAMES) < 64:
        _PAYLOAD_NAMES[name] = names
    return names


def chunk_utf8(data: bytes, limit: int) -> list[str]:
    """Split UTF-8 ``data`` into strings of at most ``limit`` bytes each.

    No chunk splits a character, so each one is valid text on its own.
    """
    if limit < 4:
        # A 4-byte character would never fit: no chunk could make progress.
        raise ValueError(f"chunk_utf8 needs a limit of at least 4 bytes (one UTF-8 character), not {limit}.")
    chunks: list[str] = []
    start, total = 0, len(data)
    while start < total:
        end = start + limit
        if end >= total:
            end = total
        else:
            # Step back off UTF-8 continuation bytes (0b10xxxxxx) to a character start.
            while (data[end] & 0xC0) == 0x80:
                end -= 1
        chunks.append(data[start:end].decode())
        start = end
    return chunks


# Where each limit that cuts payloads is raised, for the error messages.
_COUNT_LIMIT_FIX: Final = (
    "Raise the OpenTelemetry SDK's attribute count limit (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, default 128) "
    "or the backend's, then record the run again."
)
_LENGTH_LIMIT_FIX: Final = (
    "Raise the limit that cut it: Tempo's max_attribute_bytes (default 2048), the OpenTelemetry SDK's "
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT or OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT, or the Collector's "
    "attributes/transform processors, then record the run again."
)


def read_payload(attributes: Mapping[str, Any], name: str, *, run_id: str, seq: int, origin: str) -> bytes | None:
    """The payload bytes under ``name``, checked against their recorded length and digest.

    Returns None when the span has no such payload. Raises PayloadIntegrityError when
    a backend or exporter cut or altered it, naming the setting to raise.
    """
    size_name = name + sc.SIZE_SUFFIX
    if name not in attributes:
        if size_name in attributes:
            expected = _int_attr(attributes, size_name, origin)
            raise PayloadIntegrityError(
                f"Run {run_id} seq {seq}: attribute {name} is missing ({expected} bytes expected, 0 found, "
                f"{origin}): the span lost attributes on the way. Nothing was replayed from it. " + _COUNT_LIMIT_FIX,
                run_id=run_id,
                seq=seq,
                attribute=name,
                expected_size=expected,
                found_size=0,
                source=origin,
            )
        return None
    raw = attributes[name]
    if isinstance(raw, str) and raw.startswith('["') and size_name in attributes:
        # Jaeger stores array attributes as JSON text: a chunked payload comes back as
        # '["chunk", ...]'. Its size tells the two apart: the text itself is longer.
        raw = _jaeger_array(raw, _int_attr(attributes, size_name, origin))
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
    digest = attributes.get(name + sc.SHA256_SUFFIX)
    if size_name not in attributes or digest is None:
        raise PayloadIntegrityError(
            f"Run {run_id} seq {seq}: attribute {name} ({len(data)} bytes found) has no recorded size or "
            f"sha256 ({origin}): the span lost attributes on the way, so the payload cannot be checked "
            "and nothing was replayed from it. " + _COUNT_LIMIT_FIX,
            run_id=run_id,
            seq=seq,
            attribute=name,
            expected_size=-1,
            found_size=len(data),
            source=origin,
        )
    expected_size = _int_attr(attributes, size_name, origin)
    if len(data) != expected_size:
        what = f"was cut: {expected_size} bytes expected, {len(data)} found"
    elif hashlib.sha256(data).hexdigest() != digest:
        what = (
            f"was altered: {expected_size} bytes expected, {len(data)} found, but their sha256 does not "
            "match the recorded one"
        )
    else:
        return data
    raise PayloadIntegrityError(
        f"Run {run_id} seq {seq}: attribute {name} {what} ({origin}). Nothing was replayed from it. "
        + _LENGTH_LIMIT_FIX,
        run_id=run_id,
        seq=seq,
        attribute=name,
        expected_size=expected_size,
        found_size=len(data),
        source=origin,
    )


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
    """JSON for a raised exception: type, module, message, args and structured fields.

    Never raises: an exception with a broken ``__str__`` or a property that fails is
    still recorded, with what could be read.
    """
    return orjson.dumps(error_record(exc), default=_default)


def error_record(exc: BaseException) -> dict[str, Any]:
    """The record ``encode_error`` writes, as a dict (masking works on it before encoding)."""
    cls = type(exc)
    fields: dict[str, Any] = {}
    for name in _SLOT_FIELDS:
        try:
            value = getattr(exc, name, None)
        except Exception:  # a property that fails says nothing about the error
            continue
        if value is not None and isinstance(value, _FIELD_TYPES):
            fields[name] = value
    for name, value in getattr(exc, "__dict__", {}).items():
        if not name.startswith("_") and isinstance(value, _FIELD_TYPES):
            fields[name] = value
    args = [a for a in exc.args if isinstance(a, _FIELD_TYPES)]
    try:
        message = str(exc)
    except Exception:
        message = f"<{cls.__qualname__} whose str() failed>"
    record = {
        "type": cls.__qualname__,
        "module": cls.__module__,
        "message": message,
        "args": args if len(args) == len(exc.args) else None,
        "fields": fields,
    }
    return record


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
    except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise TraceFormatError(
            f"The recorded error payload is not the JSON object spanreplay writes ({origin}): {exc}.",
            source=origin,
        ) from None


def _construct(cls: type[BaseException], info: ErrorInfo) -> BaseException | None:
    """``cls`` called with the recorded args, or None when that does not give the same message."""
    args: tuple[Any, ...] = info.args if info.args or not info.message else (info.message,)
    if issubclass(cls, OSError) and len(args) == 2 and isinstance(info.fields.get("errno"), int):
        # OSError keeps its filenames out of args; its constructor takes them positionally.
        fields = info.fields
        args = (*args, fields.get("filename"), fields.get("winerror"), fields.get("filename2"))
    try:
        exc = cls(*args)
        same = str(exc) == info.message
    except Exception:  # a constructor that wants other arguments than the recorded ones
        return None
    return exc if same else None


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
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        hint = None if module is None else f"{info.module} has no exception type {info.type_name}"
        return RecordedError(info.type_name, info.module, info.message, info.fields, hint=hint)
    exc = _construct(cls, info)
    if exc is None:
        return RecordedError(
            info.type_name,
            info.module,
            info.message,
            info.fields,
            hint="its constructor does not take the recorded arguments; teach replay to build it with "
            "spanreplay.register_error_rebuilder()",
        )
    for name, value in info.fields.items():
        # Fields are only restored onto an instance that rebuilt faithfully;
        # a read-only attribute keeps what the constructor gave it.
        with contextlib.suppress(AttributeError, TypeError):
            setattr(exc, name, value)
    return exc


# --- spans -> events -----------------------------------------------------------------


def _int_attr(attributes: Mapping[str, Any], name: str, origin: str) -> int:
    value = attributes.get(name)
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):  # OverflowError: a double that is infinite
        raise TraceFormatError(
            f"Attribute {name} is {value!r}, not an integer ({origin}); the span was not "
            "written by spanreplay or was edited.",
            source=origin,
        ) from None


def schema_version(span: SpanRecord) -> int:
    version = _int_attr(span.attributes, sc.SCHEMA, span.origin)
    if version > sc.SCHEMA_VERSION_READ:
        raise SchemaVersionError(
            f"Span {span.span_id} ({span.origin}) was written with spanreplay schema version "
            f"{version}, and this release reads versions 1 to {sc.SCHEMA_VERSION_READ}; upgrade spanreplay "
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
    output_types = read_payload(attrs, sc.OUTPUT_TYPES, run_id=run_id, seq=seq, origin=where) if output_json else None
    if input_json is None or (output_json is None and error_json is None):
        # Every boundary records an input and then an output or an error: a span without
        # them lost its attributes (the SDK evicts the oldest past its count limit), and
        # replaying it would serve a made-up null.
        missing = sc.INPUT if input_json is None else f"neither {sc.OUTPUT} nor {sc.ERROR}"
        raise PayloadIntegrityError(
            f"Run {run_id} seq {seq}: the boundary span has {missing} ({where}): the span lost attributes "
            f"on the way. Nothing was replayed from it. {_COUNT_LIMIT_FIX}",
            run_id=run_id,
            seq=seq,
            attribute=sc.INPUT if input_json is None else sc.OUTPUT,
            expected_size=-1,
            found_size=0,
            source=span.origin,
        )
    # What masking changed (spanreplay.input.masked, ...) stays beside the span's own attributes.
    extra = {
        k: v
        for k, v in attrs.items()
        if not k.startswith("spanreplay.") or k.endswith(sc.MASKED_SUFFIX) or k in _INPUT_REF_ATTRIBUTES
    }
    return Event(
        run_id=run_id,
        seq=seq,
        call_id=str(attrs[sc.CALL_ID]),
        kind=str(attrs.get(sc.KIND, "")),
        key=str(attrs.get(sc.KEY, "")),
        input_json=input_json,
        output_json=output_json,
        error=decode_error(error_json, origin=where) if error_json is not None else None,
        schema_version=version,
        awaited=attrs.get(sc.AWAITED) is True,
        trace_id=span.trace_id,
        span_id=span.span_id,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        attributes=extra,
        output_types=output_types,
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
        # isdecimal, not isdigit: int() refuses superscripts; 18 digits keep int() in range.
        steps=int(steps) if isinstance(steps, (int, str)) and str(steps).isdecimal() and len(str(steps)) < 19 else None,
        forked_from=attrs.get(sc.RUN_FORKED_FROM),
        masking=str(attrs[sc.RUN_MASKING]) if sc.RUN_MASKING in attrs else None,
    )


# --- inputs that repeat the previous input's messages -----------------------------------

# Kept in Event.attributes until the input is rebuilt, so every store of events
# (trace files, Postgres rows) carries what rebuilding needs.
_INPUT_REF_ATTRIBUTES: Final = frozenset(
    (sc.INPUT_BASE_SEQ, sc.INPUT_BASE_MESSAGES, sc.INPUT_MESSAGES_PATH, sc.INPUT_FULL_SIZE, sc.INPUT_FULL_SHA256)
)
# Where a conversation's messages sit in an input: at its top, or in the body of a
# request (the Anthropic instrumentor records {"body": {"messages": [...], ...}, ...}).
_MESSAGES_PATHS: Final = (("messages",), ("body", "messages"))


def input_refs_enabled() -> bool:
    """Whether inputs may reference the previous input's messages (``SPANREPLAY_INPUT_REFS``)."""
    return environment().input_refs


class InputHistory:
    """One run's memory of the last input of each (kind, key) that held a ``messages`` list.

    A conversation sends its whole history with every model call, so writing each
    input whole makes a run's trace grow with the square of its turns. When an
    input's messages begin with the previous input's (same run, kind and key), only
    the new messages are written, with the seq of that input, how many messages it
    had, and the full input's length and sha256; ``rebuild_inputs`` puts the input
    back together and checks it, so replay compares the full input as recorded.
    """

    def __init__(self, *, enabled: bool | None = None) -> None:
        self.enabled = input_refs_enabled() if enabled is None else enabled
        # (kind, key) -> (seq, each message of that input as canonical JSON)
        self._last: dict[tuple[str, str], tuple[int, list[bytes]]] = {}

    def add_input(
        self, attributes: dict[str, Any], kind: str, key: str, seq: int, value: Any, data: bytes | None = None
    ) -> None:
        """Put the input's payload attributes into ``attributes``: whole, or as a reference plus new messages.

        ``data``: ``encode_input(value)`` when the caller has it already.
        """
        if data is None:
            data = encode_input(value)
        # Most inputs are not conversations: two lookups settle it before the paths are walked.
        path = (
            _messages_path(value)
            if self.enabled and type(value) is dict and ("messages" in value or "body" in value)
            else None
        )
        if path is None:
            add_payload(attributes, sc.INPUT, data)
            return
        messages = _at(value, path)
        parts = [encode_input(message) for message in messages]
        # One tuple, swapped in whole: a concurrent call of the same key sees either input, both consistent.
        previous = self._last.get((kind, key))
        self._last[(kind, key)] = (seq, parts)
        if previous is None:
            add_payload(attributes, sc.INPUT, data)
            return
        base_seq, base_parts = previous
        taken = len(base_parts)
        if taken > len(parts) or parts[:taken] != base_parts:
            add_payload(attributes, sc.INPUT, data)  # the conversation changed: a new base
            return
        add_payload(attributes, sc.INPUT, encode_input(_replaced(value, path, messages[taken:])))
        attributes[sc.INPUT_BASE_SEQ] = base_seq
        attributes[sc.INPUT_BASE_MESSAGES] = taken
        attributes[sc.INPUT_MESSAGES_PATH] = ".".join(path)
        attributes[sc.INPUT_FULL_SIZE] = len(data)
        attributes[sc.INPUT_FULL_SHA256] = hashlib.sha256(data).hexdigest()
        attributes[sc.SCHEMA] = max(int(attributes.get(sc.SCHEMA, 1)), sc.SCHEMA_VERSION_INPUT_REFS)


def rebuild_inputs(events: Sequence[Event]) -> list[Event]:
    """The events with every input that references an earlier one put back together and verified.

    Events may come in any order; each reference points at an earlier seq of the
    same kind and key, which is rebuilt first.
    """
    if not any(sc.INPUT_BASE_SEQ in event.attributes for event in events):
        return list(events)
    messages_at: dict[int, list[Any]] = {}  # seq -> the full messages of its input
    rebuilt: dict[int, Event] = {}
    for event in sorted(events, key=lambda e: e.seq):
        attributes = event.attributes
        if sc.INPUT_BASE_SEQ not in attributes:
            rebuilt[event.seq] = event
            value = _json_or_none(event.input_json)
            found = _messages_path(value)
            if found is not None:
                messages_at[event.seq] = _at(value, found)
            continue
        where = f"Run {event.run_id} seq {event.seq}"
        base_seq = _int_attr(attributes, sc.INPUT_BASE_SEQ, where)
        taken = _int_attr(attributes, sc.INPUT_BASE_MESSAGES, where)
        base = rebuilt.get(base_seq)
        base_messages = messages_at.get(base_seq)
        if base is None or base_messages is None or (base.kind, base.key) != (event.kind, event.key):
            raise TraceFormatError(
                f"{where}: the input continues the messages of seq {base_seq}, which the source does not hold "
                f"as an input of {event.kind} {event.key!r}; load every file of the run (or record it again with "
                f"{sc.INPUT_REFS_ENV}=0 to write each input whole).",
                source=where,
            )
        delta = _json_or_none(event.input_json)
        path = tuple(str(attributes.get(sc.INPUT_MESSAGES_PATH, "messages")).split("."))
        if path not in _MESSAGES_PATHS or _messages_path(delta, empty=True) != path or taken > len(base_messages):
            raise TraceFormatError(
                f"{where}: the input that continues seq {base_seq} is not an object with a messages list of "
                f"the size recorded; the file was edited or not written by spanreplay.",
                source=where,
            )
        messages = base_messages[:taken] + _at(delta, path)
        data = encode_input(_replaced(delta, path, messages))
        expected = _int_attr(attributes, sc.INPUT_FULL_SIZE, where)
        if len(data) != expected or hashlib.sha256(data).hexdigest() != attributes.get(sc.INPUT_FULL_SHA256):
            raise PayloadIntegrityError(
                f"{where}: the input rebuilt from seq {base_seq}'s messages does not match the recorded one "
                f"({expected} bytes expected, {len(data)} found, or another sha256). Nothing was replayed from "
                f"it; load the run from a source that holds it unaltered.",
                run_id=event.run_id,
                seq=event.seq,
                attribute=sc.INPUT,
                expected_size=expected,
                found_size=len(data),
                source=where,
            )
        messages_at[event.seq] = messages
        kept = {k: v for k, v in attributes.items() if k not in _INPUT_REF_ATTRIBUTES}
        rebuilt[event.seq] = dataclasses.replace(event, input_json=data, attributes=kept)
    return [rebuilt[event.seq] for event in events]


def _messages_path(value: Any, *, empty: bool = False) -> tuple[str, ...] | None:
    """Where a ``messages`` list (non-empty unless ``empty``) sits in an input, or None."""
    for path in _MESSAGES_PATHS:
        node = value
        for name in path:
            node = node.get(name) if type(node) is dict else None
        if type(node) is list and (node or empty):
            return path
    return None


def _at(value: Any, path: tuple[str, ...]) -> list[Any]:
    for name in path:
        value = value[name]
    result: list[Any] = value
    return result


def _replaced(value: dict[str, Any], path: tuple[str, ...], messages: list[Any]) -> dict[str, Any]:
    """A copy of ``value`` with the list at ``path`` replaced (the input itself is left alone)."""
    head, *rest = path
    return {**value, head: _replaced(value[head], tuple(rest), messages) if rest else messages}


def _json_or_none(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None

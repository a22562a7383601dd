"""Payloads as span attributes: canonical JSON, chunks under the backends' cuts, checked on the way back.

Record code asks for the attributes that carry an input, an output or an error;
``read_payload`` gives the bytes back only when their recorded length and sha256
still match, so a payload a backend cut or altered is never replayed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay.errors import PayloadIntegrityError, TraceFormatError

from .text_escapes import escaped_values, readable

# Grafana Tempo cuts string attributes at 2048 bytes by default but leaves arrays
# alone, so a payload longer than this is written as an array of chunks, each under
# the cut. Chunks split on UTF-8 character boundaries, so each one is valid text.
INLINE_MAX_BYTES: Final = 2000
CHUNK_BYTES: Final = 2000

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def json_default(value: Any) -> Any:
    """orjson fallback for values it does not know: models, sets, bytes, the rest."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # pydantic models, including the Anthropic SDK's types
        return dump(mode="json")
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return stable_repr(value)


def stable_repr(value: Any) -> str:
    """``repr(value)`` without memory addresses, which differ on every run and break replay."""
    return _ADDRESS.sub("", repr(value))


_INPUT_OPTS: Final = orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_OUTPUT_OPTS: Final = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def encode_input(value: Any) -> bytes:
    """Canonical JSON for an input: sorted keys, so equal inputs give equal bytes.

    Never raises: an input JSON cannot hold as it is is written as well as it can be,
    the same way on record and on replay (both encode with this function), so its
    step is recorded and compared rather than lost. Strings UTF-8 cannot hold are
    escaped (``_text_escapes``); a value orjson still refuses (an integer past 64
    bits, nesting past its depth) becomes an ``UNENCODABLE_INPUT`` object naming its
    type, with its repr.
    """
    try:
        return orjson.dumps(value, default=json_default, option=_INPUT_OPTS)
    except Exception:  # orjson's refusal, or a model_dump() that raised
        pass
    try:
        return orjson.dumps(escaped_values(value), default=json_default, option=_INPUT_OPTS)
    except Exception:
        return unencodable_marker(UNENCODABLE_INPUT, value)


def unencodable_marker(key: str, value: Any) -> bytes:
    """``{key: "module.Type", "repr": "..."}``: what is recorded of a value JSON cannot hold."""
    kind = type(value)
    try:
        text = readable(stable_repr(value))
    except Exception:  # a repr that raises, or recurses too deep
        text = f"<{kind.__qualname__}>"
    return orjson.dumps({key: f"{kind.__module__}.{kind.__qualname__}", "repr": text})


# The key of the object an input is recorded as when JSON cannot hold it in any form.
UNENCODABLE_INPUT: Final = "!unencodable"


def encode_output(value: Any) -> bytes:
    """JSON for an output, keys in their original order (agent code may iterate them)."""
    return orjson.dumps(value, default=json_default, option=_OUTPUT_OPTS)


def encode_error_record(record: dict[str, Any]) -> bytes:
    """``encode_output`` for an error record (``_error_records.error_record``): never raises.

    A record with text UTF-8 cannot hold (a file name in an OSError's fields) has every
    string escaped and is marked ``ESCAPED_RECORD``, so ``decode_error`` gives the
    identical strings back; a record JSON still cannot hold (an integer past 64 bits
    in its fields) keeps its type, module and message without the args and fields.
    """
    try:
        return encode_output(record)
    except Exception:
        pass
    try:
        return encode_output({**escaped_values(record, every=True), ESCAPED_RECORD: True})
    except Exception:
        kept = {name: record.get(name) for name in ("type", "module", "message")}
        return encode_output({**escaped_values(kept, every=True), "args": None, "fields": {}, ESCAPED_RECORD: True})


# Set in an error record whose strings were all written by _text_escapes.escape: readers unescape them.
ESCAPED_RECORD: Final = "escaped"


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
COUNT_LIMIT_FIX: Final = (
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
            expected = int_attribute(attributes, size_name, origin)
            raise PayloadIntegrityError(
                f"Run {run_id} seq {seq}: attribute {name} is missing ({expected} bytes expected, 0 found, "
                f"{origin}): the span lost attributes on the way. Nothing was replayed from it. " + COUNT_LIMIT_FIX,
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
        raw = _jaeger_array(raw, int_attribute(attributes, size_name, origin))
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
            "and nothing was replayed from it. " + COUNT_LIMIT_FIX,
            run_id=run_id,
            seq=seq,
            attribute=name,
            expected_size=-1,
            found_size=len(data),
            source=origin,
        )
    expected_size = int_attribute(attributes, size_name, origin)
    if len(data) != expected_size:
        what = f"was cut: {expected_size} bytes expected, {len(data)} found"
    elif hashlib.sha256(data).hexdigest() != digest:
        what = (
            f"was altered: {expected_size} bytes expected, {len(data)} found, but their sha256 does not "
            "match the recorded one"
        )
    else:
        _check_parses(data, name, run_id=run_id, seq=seq, origin=origin)
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


# orjson reads JSON nested at most this deep; spanreplay itself writes at most 254
# levels (orjson.dumps refuses more), so a deeper payload was made by hand.
MAX_NESTING: Final = 1024


def _check_parses(data: bytes, name: str, *, run_id: str, seq: int, origin: str) -> None:
    """Refuse, at load, a verified payload that nests too deep to parse.

    A payload whose sha256 was recomputed after an edit passes the digest check; nested
    too deep it would fail later, where replay or show parses it, and read as a bug in
    spanreplay or a change in the agent's code. Only a payload with more opening
    brackets than the parser's depth can nest that deep, so only those are parsed here.
    """
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return
    try:
        orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "depth" in exc.msg or "recursion" in exc.msg:
            what = (
                f"nests deeper than {MAX_NESTING} levels, past what JSON parsers read (spanreplay records at most 254)"
            )
        else:
            what = f"is not valid JSON ({exc.msg} at character {exc.pos})"
        raise TraceFormatError(
            f"Run {run_id} seq {seq}: the recorded payload in attribute {name} {what} ({origin}); its size and "
            "sha256 match, so it was written that way: the file was edited or not written by spanreplay. "
            "Nothing was replayed from it.",
            source=origin,
        ) from None


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


def int_attribute(attributes: Mapping[str, Any], name: str, origin: str) -> int:
    """The integer attribute ``name``; TraceFormatError naming ``origin`` when it is not one.

    Only an integer, the decimal text of one (Jaeger and proto3 JSON write 64-bit
    integers as text) or a double with no fraction: ``1.5`` or ``true`` read as 1
    would silently pick a step the recording never numbered.
    """
    value = attributes.get(name)
    if type(value) is int:
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise TraceFormatError(
        f"Attribute {name} is {value!r}, not an integer ({origin}); the span was not "
        "written by spanreplay or was edited.",
        source=origin,
    )


# ASCII digits only (int() would also take spaces, underscores and other scripts' digits);
# 19 digits keep the value in a 64-bit integer's range, as every writer's is.
_INTEGER: Final = re.compile(r"-?[0-9]{1,19}")

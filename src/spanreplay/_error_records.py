"""Raised exceptions as recorded payloads, and rebuilt from them on replay.

``encode_error`` writes what an exception says about itself (type, module,
message, args, plain fields); ``rebuild_error`` raises it again as its own type
when that type's module is already imported, or as a ``RecordedError`` naming it.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

import orjson

from ._events import ErrorInfo
from ._payloads import ESCAPED_RECORD, encode_error_record
from ._text_escapes import unescaped_values
from .errors import RecordedError, TraceFormatError

_FIELD_TYPES = (str, int, float, bool, type(None))
# Standard exception slots that do not live in __dict__ but say what went wrong.
_SLOT_FIELDS = ("errno", "strerror", "filename", "filename2", "winerror", "code", "reason")


def encode_error(exc: BaseException) -> bytes:
    """JSON for a raised exception: type, module, message, args and structured fields.

    Never raises: an exception with a broken ``__str__`` or a property that fails is
    still recorded, with what could be read, and text UTF-8 cannot hold is escaped.
    """
    return encode_error_record(error_record(exc))


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
        if record.get(ESCAPED_RECORD) is True:
            # Text UTF-8 could not hold, escaped when recorded: the identical strings again.
            record = unescaped_values(record)
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

"""Raised exceptions as recorded payloads, and rebuilt from them on replay.

``encode_error`` writes what an exception says about itself (type, module,
message, args, plain fields); ``rebuild_error`` raises it again as its own type
when that type's module is already imported, or as a ``RecordedError`` naming it.

A trace is untrusted input, so the type it names is looked up as data: in the
``__dict__`` of a module that is already imported (never an import, never
``getattr``, whose module-level ``__getattr__`` can import or run code), and only
an ``Exception`` subclass that neither belongs to nor inherits from the test
runners and CLI toolkits is raised again. Anything else comes back as a
``RecordedBaseExceptionError`` that fails the replay.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Callable, Mapping
from typing import Any, Final

import orjson

from spanreplay.errors import RecordedBaseExceptionError, RecordedError, TraceFormatError

from .events import ErrorInfo
from .payloads import ESCAPED_RECORD, encode_error_record
from .text_escapes import unescaped_values

_FIELD_TYPES = (str, int, float, bool, type(None))
# Standard exception slots that do not live in __dict__ but say what went wrong.
_SLOT_FIELDS = ("errno", "strerror", "filename", "filename2", "winerror", "code", "reason")
# Packages whose exceptions steer a test session or a CLI rather than fail the code:
# pytest's outcomes (Exit, Skipped, Failed), unittest's SkipTest, click's and typer's
# Exit and Abort, and sys. Whatever a trace says, none of them is raised again, and
# neither is a project's own subclass of one (``class NeedsNetwork(unittest.SkipTest)``):
# pytest skips on ``isinstance(exc, unittest.SkipTest)``, so the subclass skips as well.
REFUSED_PACKAGES: Final = frozenset({"_pytest", "pytest", "unittest", "click", "typer", "sys"})

ErrorFields = Callable[[BaseException], Mapping[str, Any] | None]
_field_recorders: list[ErrorFields] = []


def register_error_fields(recorder: ErrorFields) -> None:
    """Record more of an exception than its plain fields (return None to pass).

    The fields it returns are merged over the plain ones; they must be JSON values.
    An instrumentation registers one for its SDK's errors, whose rebuilder reads them.
    """
    if recorder not in _field_recorders:
        _field_recorders.append(recorder)


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
    for recorder in _field_recorders:
        try:
            more = recorder(exc)
        except Exception:  # recording fails open: the plain fields are still written
            continue
        if more:
            fields.update(more)
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


def _construct(cls: type[Exception], info: ErrorInfo) -> Exception | None:
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


# Told of each recorded failure replay refuses to raise again. The run core registers the
# one that hands it to the open replay (error records know no runs).
_refusal_listeners: list[Callable[[RecordedBaseExceptionError], None]] = []


def on_refusal(listener: Callable[[RecordedBaseExceptionError], None]) -> None:
    """Call ``listener`` with each ``RecordedBaseExceptionError`` as ``rebuild_error`` makes it."""
    if listener not in _refusal_listeners:
        _refusal_listeners.append(listener)


def register_error_rebuilder(rebuilder: ErrorRebuilder) -> None:
    """Teach replay to rebuild more exception types (return None to pass)."""
    _rebuilders.append(rebuilder)


def rebuild_error(info: ErrorInfo, *, where: str = "") -> Exception:
    """The recorded exception, rebuilt as its own type where possible.

    Only ``Exception`` subclasses from modules that are already imported are
    rebuilt, found in the module's ``__dict__``: a trace file must never make replay
    import or run code. A type that cannot be found or built comes back as a
    RecordedError naming it; one replay refuses to raise (a ``BaseException`` that
    is not an ``Exception``, a test runner's or CLI toolkit's exception) as a
    RecordedBaseExceptionError, which the open replay keeps as its outcome.
    ``where`` names the run and step for that error's sentence.
    """
    if refused_package(info.module):
        return _refused(info, _steers(info.module), where)
    for rebuilder in reversed(_rebuilders):
        rebuilt = rebuilder(info)
        if rebuilt is None:
            continue
        if not isinstance(rebuilt, Exception) or refused_base(type(rebuilt)) is not None:
            return _refused(info, _why_refused(type(rebuilt)), where)
        return rebuilt
    cls = recorded_class(info.module, info.type_name)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        hint = None if info.module not in sys.modules else f"{info.module} has no exception type {info.type_name}"
        return RecordedError(info.type_name, info.module, info.message, info.fields, hint=hint)
    if not issubclass(cls, Exception) or refused_base(cls) is not None:
        return _refused(info, _why_refused(cls), where)
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
        # Fields are only restored onto an instance that rebuilt faithfully, and only the
        # public ones error_record writes (never __class__, __notes__ and the like);
        # a read-only attribute keeps what the constructor gave it.
        if name.isidentifier() and not name.startswith("_"):
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                setattr(exc, name, value)
    return exc


def recorded_class(module_name: str, qualname: str) -> type | None:
    """The class ``module_name``/``qualname`` names, read from already imported modules only.

    Looked up in ``__dict__`` alone, a step at a time through the qualified name:
    never an import, never ``getattr`` (a module's ``__getattr__`` can import a
    submodule or run code; a class's can compute anything).
    """
    module = sys.modules.get(module_name)
    if not isinstance(module, types.ModuleType):
        return None
    namespace: Mapping[str, Any] = module.__dict__
    found: type | None = None
    for part in qualname.split("."):
        if not part.isidentifier():
            return None  # "<locals>": a class defined inside a function cannot be found again
        value = namespace.get(part)
        if not isinstance(value, type):
            return None
        found = value
        namespace = type.__dict__["__dict__"].__get__(value)  # the class's own mapping, no metaclass hook
    return found


def refused_package(module: str) -> bool:
    """Whether ``module`` belongs to a package whose exceptions replay never raises again."""
    return module.partition(".")[0] in REFUSED_PACKAGES


def refused_base(cls: type) -> type | None:
    """The first class in ``cls``'s MRO (``cls`` itself included) defined in a refused package, or None.

    Read through ``type``'s own descriptors for ``__mro__`` and ``__module__``: a
    metaclass cannot answer for them.
    """
    mro: tuple[type, ...] = type.__dict__["__mro__"].__get__(cls)
    for base in mro:
        module = type.__dict__["__module__"].__get__(base)
        if isinstance(module, str) and refused_package(module):
            return base
    return None


def _steers(module: str) -> str:
    root = module.partition(".")[0]
    owner = f"{root} is a package" if module == root else f"{module} belongs to {root}, a package"
    return f"{owner} whose exceptions skip tests, end a test session or choose a process's exit code"


def _why_refused(cls: type) -> str:
    base = refused_base(cls)
    if base is cls:
        return _steers(base.__module__)
    if base is not None:
        return (
            f"{cls.__module__}.{cls.__qualname__} inherits from {base.__module__}.{base.__qualname__}, "
            f"and {_steers(base.__module__)}"
        )
    return (
        f"{cls.__qualname__} is a BaseException but not an Exception, and would stop the interpreter, "
        "a test session or a generator rather than fail the code"
    )


def _refused(info: ErrorInfo, reason: str, where: str) -> RecordedBaseExceptionError:
    error = RecordedBaseExceptionError(
        info.type_name, info.module, info.message, info.fields, reason=reason, where=where
    )
    # The open replay keeps it as its outcome: code that catches it (``except Exception``)
    # and goes on still ends the replay with this error, never green.
    for listener in _refusal_listeners:
        listener(error)
    return error

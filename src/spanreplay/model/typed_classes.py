"""Typed values: the classes replay may build, and what spanreplay knows of each.

A trace is untrusted input: replay builds a user class only when the tool's return
annotation names it or the application registered it here, never on a trace's say.
"""

from __future__ import annotations

import dataclasses
import enum
import pathlib
import re
import threading
import typing
import uuid
from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final

import orjson

from spanreplay.errors import ConfigurationError

if typing.TYPE_CHECKING:
    pass


__all__ = [
    "REGISTRY",
    "Registered",
    "absolute_path",
    "key_path",
    "register_type",
    "structure_of",
    "type_name",
    "under_path",
]

# JSON scalars orjson writes as they are and loads back as the same type.
SCALARS: Final = frozenset({str, int, float, bool, type(None)})
IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A value that could not be recorded: the tag is "!" and the name of its type.
UNENCODABLE: Final = "!"
# Text UTF-8 cannot hold, escaped (``_text_escapes``): "~" and the type built from the
# unescaped text ("~str", "~PosixPath").
ESCAPED: Final = "~"
# pathlib's concrete and pure classes, by name: the only ones a Path tag may name.
PATHS: Final = {
    name: getattr(pathlib, name)
    for name in ("Path", "PosixPath", "WindowsPath", "PurePath", "PurePosixPath", "PureWindowsPath")
}
TIMEDELTA: Final = re.compile(r"^(?:(-?\d+) days?, )?(\d+):(\d\d):(\d\d)(?:\.(\d{6}))?$")


# The types spanreplay records and rebuilds by itself, besides user classes.
BUILTIN_TYPES: Final = frozenset(
    {datetime, date, time, timedelta, Decimal, uuid.UUID, bytes, bytearray, memoryview, tuple, set, frozenset}
)


def type_name(cls: type) -> str:
    """``module:qualname``, the name a tag gives a user class."""
    return f"{cls.__module__}:{cls.__qualname__}"


@dataclasses.dataclass(frozen=True, slots=True)
class Registered:
    cls: type
    encode: Callable[[Any], Any] | None
    decode: Callable[[Any], Any] | None


class Registry:
    """The classes given to ``register_type``, by class and by tag name.

    Caches built from it (the encoders of classes, the classes replay trusts) listen
    for changes and drop what they hold.
    """

    def __init__(self) -> None:
        self.by_name: dict[str, type] = {}
        self.by_class: dict[type, Registered] = {}
        self.lock = threading.Lock()
        self.listeners: list[Callable[[type | None], None]] = []

    def add(self, entry: Registered) -> None:
        with self.lock:
            self.by_name[type_name(entry.cls)] = entry.cls
            self.by_class[entry.cls] = entry
        self._changed(entry.cls)

    def classes(self) -> list[type]:
        with self.lock:
            return list(self.by_name.values())

    def snapshot(self) -> tuple[dict[str, type], dict[type, Registered]]:
        """What is registered now, for ``restore`` (tests and notebooks)."""
        with self.lock:
            return dict(self.by_name), dict(self.by_class)

    def restore(self, snapshot: tuple[dict[str, type], dict[type, Registered]]) -> None:
        with self.lock:
            self.by_name, self.by_class = dict(snapshot[0]), dict(snapshot[1])
        self._changed(None)

    def _changed(self, cls: type | None) -> None:
        for listener in self.listeners:
            listener(cls)


REGISTRY = Registry()


def register_type(
    cls: type,
    *,
    encode: Callable[[Any], Any] | None = None,
    decode: Callable[[Any], Any] | None = None,
) -> None:
    """Let replay rebuild ``cls`` wherever a recorded output holds one.

    Dataclasses, pydantic models, NamedTuples and Enums need no functions: register
    the class so that replay may build it when no tool annotation names it (a
    trace file never makes replay import or build a class on its own say). Any
    other class needs both: ``encode(obj)`` returns a JSON-ready value (it may hold
    the types above), ``decode(value)`` builds the object from it.

    Example::

        spanreplay.register_type(Money, encode=lambda m: [str(m.amount), m.currency],
                                 decode=lambda v: Money(Decimal(v[0]), v[1]))
    """
    if not isinstance(cls, type):
        raise ConfigurationError(f"register_type() takes a class, not {cls!r}.")
    if (encode is None) != (decode is None):
        raise ConfigurationError(
            f"register_type({cls.__qualname__}) got only one of encode= and decode=; give both, or neither "
            "for a dataclass, pydantic model, NamedTuple or Enum."
        )
    if encode is None and structure_of(cls) is None:
        raise ConfigurationError(
            f"register_type({cls.__qualname__}) needs encode= and decode=: spanreplay knows how to record "
            "dataclasses, pydantic models, NamedTuples and Enums, and this class is none of them."
        )
    REGISTRY.add(Registered(cls, encode, decode))


def structure_of(cls: type) -> str | None:
    """What kind of user class spanreplay can record without help, or None."""
    if isinstance(cls, type) and issubclass(cls, enum.Enum):
        return "enum"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return "namedtuple"
    if callable(getattr(cls, "model_validate", None)) and callable(getattr(cls, "model_dump", None)):
        return "pydantic"
    return None


# --- how tags name the paths of a value ------------------------------------------------


def absolute_path(path: str) -> str:
    if not path:
        return "$"
    return path[1:] if path[0] == "." else path


def key_path(key: str) -> str:
    return f".{key}" if IDENTIFIER.fullmatch(key) else f"[{orjson.dumps(key).decode()}]"


def under_path(path: str, masked: str) -> bool:
    """Whether ``path`` is ``masked`` or inside it (masking's paths and ours are written alike)."""
    if masked == "$" or path == masked:
        return True
    if path == "$" or not path.startswith(masked):
        return False
    return path[len(masked)] in ".["

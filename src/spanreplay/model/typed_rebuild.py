"""Typed values on replay: recorded JSON plus type tags (plus the tool's annotation) back to values."""

from __future__ import annotations

import base64
import dataclasses
import enum
import logging
import pathlib
import re
import typing
import uuid
from collections.abc import Callable, Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import orjson

from spanreplay.errors import UnservableOutputError, UnservableValue

if typing.TYPE_CHECKING:
    from .events import Event

from .text_escapes import unescape
from .typed_classes import (
    ESCAPED,
    PATHS,
    REGISTRY,
    TIMEDELTA,
    UNENCODABLE,
    absolute_path,
    key_path,
    structure_of,
    type_name,
    under_path,
)
from .typed_hints import Hint, Hints, ReturnDecoder, field_hint, item_hint

logger = logging.getLogger("spanreplay")

__all__ = ["served"]

# --- replay: JSON + tags (+ annotation) -> value -----------------------------------------

_ANY: Final[Any] = object()  # a [*] segment


class _Node:
    __slots__ = ("children", "tag")

    def __init__(self) -> None:
        self.tag: str | None = None
        self.children: dict[Any, _Node] | None = None

    def child(self, segment: Any) -> _Node | None:
        children = self.children
        if children is None:
            return None
        found = children.get(segment)
        return found if found is not None else children.get(_ANY)


_SEGMENT: Final = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+|\*)\]|\[("(?:[^"\\]|\\.)*")\]')


def _tree(types: bytes, where: str) -> _Node:
    try:
        tags = orjson.loads(types)
        if not isinstance(tags, dict):
            raise ValueError("not an object")
        root = _Node()
        for path, tag in tags.items():
            if not isinstance(tag, str):
                raise ValueError(f"tag {tag!r} is not a string")
            node = root
            for segment in _segments(path):
                if node.children is None:
                    node.children = {}
                node = node.children.setdefault(segment, _Node())
            node.tag = tag
        return root
    except (ValueError, orjson.JSONDecodeError) as exc:
        from spanreplay.errors import TraceFormatError

        raise TraceFormatError(
            f"{where}: spanreplay.output.types cannot be read ({exc}); the span was edited or not written by "
            "spanreplay.",
            source=where,
        ) from None


def _segments(path: str) -> list[Any]:
    if path == "$":
        return []
    segments: list[Any] = []
    pos = 0
    while pos < len(path):
        match = _SEGMENT.match(path, pos)
        if match is None or match.end() == pos:
            raise ValueError(f"path {path!r} cannot be read at position {pos}")
        name, index, quoted = match.groups()
        if name is not None:
            segments.append(name)
        elif index == "*":
            segments.append(_ANY)
        elif index is not None:
            segments.append(int(index))
        else:
            segments.append(orjson.loads(quoted))
        pos = match.end()
    return segments


class _Context:
    __slots__ = ("classes", "event", "masked")

    def __init__(self, event: Event, classes: Mapping[str, type]) -> None:
        self.event = event
        self.classes = classes
        self.masked: list[str] | None = None

    def where(self) -> str:
        event = self.event
        return f"Run {event.run_id} seq {event.seq} ({event.kind} {event.key!r})"

    def error(self, path: list[Any], message: str, type_name: str, reason: str) -> UnservableOutputError:
        event = self.event
        return UnservableOutputError(
            f"{self.where()}: {message}",
            run_id=event.run_id,
            seq=event.seq,
            call_id=event.call_id,
            kind=event.kind,
            key=event.key,
            value=UnservableValue(_path_text(path), type_name, reason),
        )

    def is_masked(self, path: list[Any]) -> bool:
        if self.masked is None:
            from spanreplay import semconv as sc

            text = self.event.attributes.get(sc.OUTPUT + sc.MASKED_SUFFIX)
            try:
                records = orjson.loads(text) if isinstance(text, str) else []
            except orjson.JSONDecodeError:
                records = []
            self.masked = [str(r.get("path", "")) for r in records if isinstance(r, dict)]
        here = _path_text(path)
        # Masked here, or somewhere inside (a field of this object).
        return any(under_path(here, masked) or under_path(masked, here) for masked in self.masked)


def _path_text(path: list[Any]) -> str:
    return absolute_path("".join(f"[{s}]" if isinstance(s, int) else key_path(str(s)) for s in path))


def served(event: Event, value: Any, decode: Callable[[Any], Any] | None) -> Any:
    """The recorded output with the types it had: by the tool's annotation where it has
    one, by the recorded tags where it does not."""
    hints = decode.hints() if isinstance(decode, ReturnDecoder) else None
    recorded = event.output_types
    if decode is not None and hints is None:
        # The caller's own decoder reads the JSON (spanreplay.now() and the like), but it
        # cannot make up a value that was never recorded.
        if recorded is not None and b'"' + UNENCODABLE.encode() in recorded:
            _decode_unencodable(event, recorded)
        return decode(value)
    classes = dict(_trusted_registered())
    if hints is not None:
        classes.update(hints.classes)
    ctx = _Context(event, classes)
    root = _tree(recorded, _where(event)) if recorded is not None else None
    return _decode(value, root, hints.hint if hints is not None else None, ctx, [])


_trusted_cache: dict[str, type] | None = None


def _forget_trusted(cls: type | None) -> None:
    global _trusted_cache
    _trusted_cache = None


REGISTRY.listeners.append(_forget_trusted)


def _trusted_registered() -> dict[str, type]:
    """The registered classes, and the classes their fields' annotations name (a registered
    model's nested models need no registering of their own)."""
    global _trusted_cache
    trusted = _trusted_cache
    if trusted is None:
        trusted = {}
        for cls in REGISTRY.classes():
            trusted.update(Hints(cls).classes)
            trusted[type_name(cls)] = cls
        _trusted_cache = trusted
    return trusted


def _decode_unencodable(event: Event, recorded: bytes) -> None:
    """Raise for the first value that could not be recorded, decoding nothing else."""
    ctx = _Context(event, {})
    tags: dict[str, str] = orjson.loads(recorded)
    for path, tag in tags.items():
        if tag.startswith(UNENCODABLE):
            node = _Node()
            node.tag = tag
            _decode(None, node, None, ctx, _segments(path))


def _where(event: Event) -> str:
    return f"Run {event.run_id} seq {event.seq} ({event.kind} {event.key!r})"


def _decode(value: Any, node: _Node | None, hint: Hint, ctx: _Context, path: list[Any]) -> Any:
    tag = node.tag if node is not None else None
    if tag is not None and tag.startswith(UNENCODABLE):
        name = tag[len(UNENCODABLE) :]
        raise ctx.error(
            path,
            f"the recording holds no usable value for this step: the {_kind_of(ctx)} returned a {name} at "
            f"{_path_text(path)}, which spanreplay could not record (only its text, {_short(value)}, was kept). "
            f"Make the {_kind_of(ctx)} return a value spanreplay can record, or register the type with "
            "spanreplay.register_type(cls, encode=..., decode=...), and record the run again.",
            name,
            "unencodable",
        )
    if tag is None and hint is None and (node is None or node.children is None):
        return value
    target: Any = tag if tag is not None else hint
    cls: type | None = None
    if tag is not None and ":" in tag:
        cls = _trusted(tag, ctx, path)
        target = cls
    # The children first: a dataclass is built from fields that have their own types already.
    if type(value) is list:
        value = [
            _decode(item, _child(node, index), item_hint(target, hint, index), ctx, [*path, index])
            for index, item in enumerate(value)
        ]
    elif type(value) is dict:
        value = {
            key: _decode(item, _child(node, key), field_hint(target, hint, key), ctx, [*path, key])
            for key, item in value.items()
        }
    if tag is not None:
        return _build(target if cls is not None else tag, value, ctx, path, tagged=True)
    if hint is not None:
        return _by_hint(value, hint, ctx, path)
    return value


def _child(node: _Node | None, segment: Any) -> _Node | None:
    return node.child(segment) if node is not None else None


def _kind_of(ctx: _Context) -> str:
    return "tool" if ctx.event.kind == "tool" else "boundary"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _trusted(tag: str, ctx: _Context, path: list[Any]) -> type:
    cls = ctx.classes.get(tag)
    if cls is None:
        module, _, qualname = tag.partition(":")
        # A script recorded as __main__ replays imported under its own name, and the other way round.
        same = [c for name, c in ctx.classes.items() if name.partition(":")[2] == qualname]
        if len(same) == 1 and (module == "__main__" or same[0].__module__ == "__main__"):
            cls = same[0]
    if cls is None:
        module, _, qualname = tag.partition(":")
        raise ctx.error(
            path,
            f"the recorded output holds a {module}.{qualname} at {_path_text(path)}, and replay builds only "
            f"classes it was told of: the {_kind_of(ctx)}'s return annotation does not name it and it was not "
            f"registered. Call spanreplay.register_type({qualname.rpartition('.')[2]}) before replaying (or "
            "annotate the return type); a trace file never makes replay import or build a class on its own.",
            f"{module}.{qualname}",
            "unregistered",
        )
    return cls


_BUILTIN_DECODERS: Final[dict[str, Callable[[Any], Any]]] = {
    "datetime": datetime.fromisoformat,
    "date": date.fromisoformat,
    "time": time.fromisoformat,
    "timedelta": lambda text: _timedelta(text),
    "Decimal": lambda text: _decimal(text),
    "UUID": uuid.UUID,
    "bytes": lambda text: base64.b64decode(text, validate=True),
    "bytearray": lambda text: bytearray(base64.b64decode(text, validate=True)),
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
    "dict": lambda pairs: {_hashable(key): item for key, item in pairs},
    **PATHS,
}


def _hashable(key: Any) -> Any:
    return tuple(key) if type(key) is list else key


def _timedelta(text: str) -> timedelta:
    match = TIMEDELTA.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a timedelta as str() writes one")
    days, hours, minutes, seconds, micro = match.groups()
    return timedelta(
        days=int(days or 0), hours=int(hours), minutes=int(minutes), seconds=int(seconds), microseconds=int(micro or 0)
    )


# How releases before type tags wrote a value orjson does not know: its repr.
_OLD_REPR: Final = re.compile(r"^(?:Decimal|[A-Za-z]*Path)\('(.*)'\)$")


def _decimal(text: str) -> Decimal:
    if not isinstance(text, str):
        raise TypeError(f"{text!r} is not a string")
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a decimal number") from None


def _build(target: Any, value: Any, ctx: _Context, path: list[Any], *, tagged: bool) -> Any:
    """The value of tag ``target`` (a name spanreplay knows, or a trusted class) from its JSON."""
    try:
        if isinstance(target, str) and target.startswith(ESCAPED):
            # Text UTF-8 could not hold, written with escapes: the identical str again, then its type.
            try:
                value = unescape(value)
            except ValueError:
                if not ctx.is_masked(path):
                    raise
                # Masking rewrote the text when it was recorded (a placeholder across an escape):
                # served as the masked text it is, like any masked value.
            target = target[len(ESCAPED) :]
            if target == "str":
                return value
            if target not in PATHS:
                raise ValueError(f"escaped text is recorded only for str and paths, not {target}")
        if isinstance(target, str):
            builder = _BUILTIN_DECODERS.get(target)
            if builder is None:
                raise ctx.error(
                    path,
                    f"the recorded output holds a value tagged {target!r} at {_path_text(path)}, which this "
                    "release does not know; upgrade spanreplay (pip install -U spanreplay) to replay it.",
                    target,
                    "unknown tag",
                )
            return builder(value)
        try:
            return _construct(target, value, tagged=tagged)
        except Exception:
            if structure_of(target) == "pydantic" and ctx.is_masked(path):
                # A field masking rewrote no longer validates: the model holds the masked text.
                return target.model_construct(**value)
            raise
    except UnservableOutputError:
        raise
    except Exception as exc:
        name = target if isinstance(target, str) else f"{target.__module__}.{target.__qualname__}"
        masked = " (masking rewrote this value when it was recorded)" if ctx.is_masked(path) else ""
        raise ctx.error(
            path,
            f"the recorded value at {_path_text(path)} cannot be rebuilt as the {name} it was recorded as"
            f"{masked}: {type(exc).__name__}: {exc}. The span was edited, or the class changed since the run "
            "was recorded.",
            name,
            "cannot rebuild",
        ) from exc


def _construct(cls: type, value: Any, *, tagged: bool) -> Any:
    """An instance of ``cls`` from its JSON. ``tagged``: written by spanreplay with its tags,
    so its fields have their types already; otherwise an annotation named the class."""
    registered = REGISTRY.by_class.get(cls)
    if registered is not None and registered.decode is not None:
        return registered.decode(value)
    structure = structure_of(cls)
    if structure == "enum":
        return _construct_enum(cls, value, tagged=tagged)
    if structure == "pydantic":
        if tagged:
            # Fields rebuilt with their own tags: validating again could change them
            # (a dataclass field rebuilt without its init=False fields).
            return cls.model_construct(**value)  # type: ignore[attr-defined]
        return cls.model_validate(value)  # type: ignore[attr-defined]
    if structure == "namedtuple":
        return cls(*value) if type(value) is list else cls(**value)
    if structure == "dataclass":
        return _construct_dataclass(cls, value)
    raise TypeError(f"{cls.__qualname__} is not a class spanreplay can build")


def _construct_enum(cls: type, value: Any, *, tagged: bool) -> Any:
    members: Any = cls
    if issubclass(cls, enum.Flag):
        return members(value)
    if tagged:
        return members[value]
    # A recording without tags holds the member's value as orjson wrote it (a tuple
    # as a list), or its name when only the tags were lost.
    try:
        return members(tuple(value) if type(value) is list else value)
    except ValueError:
        if isinstance(value, str) and value in members.__members__:
            return members[value]
        raise


def _construct_dataclass(cls: type, value: Any) -> Any:
    fields = dataclasses.fields(cls)
    obj = cls(**{f.name: value[f.name] for f in fields if f.init and f.name in value})
    for f in fields:
        if not f.init and f.name in value:
            # A field the constructor does not take: set as recorded (frozen ones too).
            object.__setattr__(obj, f.name, value[f.name])
    return obj


def _by_hint(value: Any, hint: Hint, ctx: _Context, path: list[Any]) -> Any:
    """``value`` (no tag recorded for it) converted to what the annotation says, where it fits."""
    if type(hint) is tuple:
        return _by_shape(value, hint, ctx, path)
    if isinstance(hint, type):
        return _by_class(value, hint, ctx, path)
    return value


def _by_shape(value: Any, hint: tuple[Any, ...], ctx: _Context, path: list[Any]) -> Any:
    """``value`` converted to a generic annotation's shape (a union, a tuple, a set, a dict)."""
    shape = hint[0]
    if shape == "union":
        if value is None and hint[2]:
            return None
        for member in hint[1]:
            if member is None:
                continue
            try:
                return _by_hint(value, member, ctx, path)
            except UnservableOutputError:
                continue
        return value
    if shape in ("tuple", "tuple_of") and type(value) is list:
        return tuple(value)
    if shape in ("set", "frozenset") and type(value) is list:
        return _build(shape, value, ctx, path, tagged=False)
    if shape == "dict" and type(value) is dict and hint[1] is not None:
        return {_by_hint(key, hint[1], ctx, [*path, key]): item for key, item in value.items()}
    return value


def _by_class(value: Any, hint: type, ctx: _Context, path: list[Any]) -> Any:
    """``value`` converted to the class an annotation names."""
    if isinstance(value, hint):
        return value
    if hint is int:
        return int(value) if type(value) is str and value.lstrip("-").isdecimal() else value
    if value is None:
        return None  # the annotation said a class; the tool returned None: that is what it returned
    if ctx.is_masked(path):
        return value  # masking rewrote it when recorded: served as the masked text it is
    if type(value) is str and ctx.event.output_types is None:
        old = _OLD_REPR.match(value)
        if old is not None:
            value = old.group(1)
    for name, cls in _BUILTIN_TAGS.items():
        if cls is hint:
            return _build(name, value, ctx, path, tagged=False)
    if issubclass(hint, pathlib.PurePath):
        return _build(hint.__name__, value, ctx, path, tagged=False)
    return _build(hint, value, ctx, path, tagged=False)


_BUILTIN_TAGS: Final[dict[str, type]] = {
    "datetime": datetime,
    "date": date,
    "time": time,
    "timedelta": timedelta,
    "Decimal": Decimal,
    "UUID": uuid.UUID,
    "bytes": bytes,
    "bytearray": bytearray,
}

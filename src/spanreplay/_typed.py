"""Typed outputs: what a boundary returned, as JSON a person can read plus type tags, and back.

A tool that returns a dataclass, a datetime or a set must get an equal value of the
same type back on replay. The recorded output stays JSON a person can read in
Jaeger (a datetime as ISO text, a Decimal as a string, bytes as base64 text, a
dataclass as an object); beside it, only when the output holds something JSON
cannot say, ``spanreplay.output.types`` maps the JSON paths of those values to
type tags: ``{"$":"tuple","when":"datetime","items[*]":"shop.models:Item"}``.

Tags: a name without a colon is a type spanreplay knows (``datetime``, ``tuple``,
``bytes``, ...); ``module:qualname`` is a user class (a dataclass, a pydantic
model, a NamedTuple, an Enum, or a class given to ``register_type``); a tag that
starts with ``!`` marks a value that could not be recorded at all.

Replay builds user classes only from the tool's return annotation or from
``register_type``: a trace file is untrusted input and never makes replay import
code or build a class it names.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import logging
import pathlib
import re
import threading
import types
import typing
import uuid
import weakref
from collections.abc import Callable, Mapping
from datetime import date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import orjson

from .errors import ConfigurationError, UnservableOutputError

if typing.TYPE_CHECKING:
    from ._events import Event

logger = logging.getLogger("spanreplay")

__all__ = ["ReturnDecoder", "register_type", "served", "to_json"]

# JSON scalars orjson writes as they are and loads back as the same type.
_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ADDRESS: Final = re.compile(r" at 0x[0-9a-fA-F]+")
# A value that could not be recorded: the tag is "!" and the name of its type.
UNENCODABLE: Final = "!"
# pathlib's concrete and pure classes, by name: the only ones a Path tag may name.
_PATHS: Final = {
    name: getattr(pathlib, name)
    for name in ("Path", "PosixPath", "WindowsPath", "PurePath", "PurePosixPath", "PureWindowsPath")
}
_TIMEDELTA: Final = re.compile(r"^(?:(-?\d+) days?, )?(\d+):(\d\d):(\d\d)(?:\.(\d{6}))?$")


def type_name(cls: type) -> str:
    """``module:qualname``, the name a tag gives a user class."""
    return f"{cls.__module__}:{cls.__qualname__}"


# --- the registry -------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Registered:
    cls: type
    encode: Callable[[Any], Any] | None
    decode: Callable[[Any], Any] | None


_registry_classes: dict[str, type] = {}
_registered_types: dict[type, _Registered] = {}
_registry_lock = threading.Lock()


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
    if encode is None and _structure(cls) is None:
        raise ConfigurationError(
            f"register_type({cls.__qualname__}) needs encode= and decode=: spanreplay knows how to record "
            "dataclasses, pydantic models, NamedTuples and Enums, and this class is none of them."
        )
    entry = _Registered(cls, encode, decode)
    with _registry_lock:
        _registry_classes[type_name(cls)] = cls
        global _trusted_cache
        _trusted_cache = None
        _registered_types[cls] = entry
        _ENCODERS.pop(cls, None)


def _structure(cls: type) -> str | None:
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


# --- encoding: value -> (JSON-ready value, tags) ----------------------------------------

Tags = dict[str, str]


def to_json(value: Any, *, collapse: bool = True) -> tuple[Any, str | None, list[tuple[str, str]]]:
    """``value`` as JSON-ready data, its tags as compact JSON (None when it needs none), and
    the (path, type) of each value that could not be recorded.

    The common case, a value that is JSON already, is settled by one walk that copies nothing.
    ``collapse``: one ``[*]`` tag for a list whose items all carry the same tags.
    """
    if type(value) in _SCALARS or _plain(value):
        return value, None, []
    data, tags = _encode(value, collapse)
    if not tags:
        return data, None, []
    absolute = {_absolute(path): tag for path, tag in tags.items()}
    bad = [(path, tag[1:]) for path, tag in absolute.items() if tag[0] == UNENCODABLE]
    return data, orjson.dumps(absolute).decode(), bad


def _plain(value: Any) -> bool:
    """True when orjson writes ``value`` as JSON that loads back equal and of the same types."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return False
            item_kind = type(item)
            if item_kind in _SCALARS:
                continue
            if (item_kind is dict or item_kind is list) and _plain(item):
                continue
            return False
        return True
    if kind is list:
        for item in value:
            item_kind = type(item)
            if item_kind in _SCALARS:
                continue
            if (item_kind is dict or item_kind is list) and _plain(item):
                continue
            return False
        return True
    return kind in _SCALARS


def _absolute(path: str) -> str:
    if not path:
        return "$"
    return path[1:] if path[0] == "." else path


def _key_text(key: str) -> str:
    return f".{key}" if _IDENTIFIER.fullmatch(key) else f"[{orjson.dumps(key).decode()}]"


def _merge(tags: Tags, prefix: str, child: Tags | None) -> None:
    if child:
        for path, tag in child.items():
            tags[prefix + path] = tag


def _encode_list(items: list[Any] | tuple[Any, ...], collapse: bool) -> tuple[list[Any], Tags]:
    data: list[Any] = []
    children: list[Tags | None] = []
    for item in items:
        encoded, child = _encode(item, collapse)
        data.append(encoded)
        children.append(child)
    tags: Tags = {}
    if not any(children):
        return data, tags
    first = children[0]
    if collapse and len(children) > 1 and first and all(child == first for child in children):
        _merge(tags, "[*]", first)
        return data, tags
    for index, child in enumerate(children):
        _merge(tags, f"[{index}]", child)
    return data, tags


def _encode_dict(value: Mapping[Any, Any], collapse: bool) -> tuple[Any, Tags]:
    tags: Tags = {}
    if all(type(key) is str for key in value):
        data: dict[str, Any] = {}
        for key, item in value.items():
            encoded, child = _encode(item, collapse)
            data[key] = encoded
            if child:
                _merge(tags, _key_text(key), child)
        return data, tags
    # Keys JSON cannot hold (numbers, tuples, dates): a list of [key, value] pairs.
    pairs, tags = _encode_list([[key, item] for key, item in value.items()], collapse)
    tags[""] = "dict"
    return pairs, tags


def _encode(value: Any, collapse: bool) -> tuple[Any, Tags | None]:
    """``value`` JSON-ready, and its tags relative to it ("" for itself), or None when it needs none."""
    kind = type(value)
    if kind in _SCALARS:
        return value, None
    if kind is dict:
        data, tags = _encode_dict(value, collapse)
        return data, tags or None
    if kind is list:
        items, tags = _encode_list(value, collapse)
        return items, tags or None
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        encoder = _encoder_for(kind)
    return encoder(value, collapse)


Encoder = Callable[[Any, bool], tuple[Any, Tags | None]]


def _text(tag: str, convert: Callable[[Any], Any]) -> Encoder:
    def encode(value: Any, collapse: bool) -> tuple[Any, Tags | None]:
        return convert(value), {"": tag}

    return encode


def _container(tag: str, order: bool) -> Encoder:
    def encode(value: Any, collapse: bool) -> tuple[Any, Tags | None]:
        items = list(value)
        if order:
            # Sets are written in a stable order, so one run's recording does not depend on hashing.
            try:
                items.sort()
            except Exception:  # items of several types, or ones that refuse to compare
                items.sort(key=repr)
        data, tags = _encode_list(items, collapse)
        tags[""] = tag
        return data, tags

    return encode


def _class_encoder(cls: type) -> Encoder | None:
    name = type_name(cls)
    registered = _registered_types.get(cls)
    if registered is not None and registered.encode is not None:
        custom = registered.encode

        def encode_custom(value: Any, collapse: bool) -> tuple[Any, Tags | None]:
            try:
                plain = custom(value)
            except Exception:
                # Recording fails open: the value is marked as not recorded, and replay says so.
                logger.debug("spanreplay: the encode= registered for %s failed", name, exc_info=True)
                return _unencodable(value, collapse)
            data, tags = _encode(plain, collapse)
            tags = dict(tags or {})
            tags[""] = name
            return data, tags

        return encode_custom
    structure = _structure(cls)
    if structure is None:
        return None
    if structure == "enum":
        # A member is written by its name, which always rebuilds it, whatever its value holds;
        # a Flag by its value, as a combination of flags has no name of its own.
        flag = issubclass(cls, enum.Flag)

        def encode_enum(value: Any, collapse: bool) -> tuple[Any, Tags | None]:
            return (value.value if flag else value.name), {"": name}

        return encode_enum

    def fields_of(value: Any) -> dict[str, Any]:
        if structure == "dataclass":
            return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
        if structure == "namedtuple":
            return dict(value._asdict())
        # The fields as they are, not model_dump(): a nested model keeps its class, a
        # datetime its type, and each gets its own tag.
        fields = {name: getattr(value, name) for name in type(value).model_fields}
        fields.update(getattr(value, "__pydantic_extra__", None) or {})
        return fields

    def encode_object(value: Any, collapse: bool) -> tuple[Any, Tags | None]:
        try:
            fields = fields_of(value)
        except Exception:
            logger.debug("spanreplay: the fields of a %s could not be read", name, exc_info=True)
            return _unencodable(value, collapse)
        data, tags = _encode_dict(fields, collapse)
        tags[""] = name
        return data, tags

    return encode_object


def _unencodable(value: Any, collapse: bool) -> tuple[Any, Tags | None]:
    kind = type(value)
    name = f"{kind.__module__}.{kind.__qualname__}"
    try:
        # What a person sees in the span; a repr with a memory address would differ on every run.
        text = _ADDRESS.sub("", repr(value))
    except Exception:
        text = f"<{name}>"
    return text, {"": UNENCODABLE + name}


def _passthrough(value: Any, collapse: bool) -> tuple[Any, Tags | None]:
    return value, None


def _encoder_for(kind: type) -> Encoder:
    encoder = _class_encoder(kind)
    if encoder is None:
        if issubclass(kind, (str, int, float)) or kind.__module__ == "numpy":
            # A str or int subclass, a numpy value: orjson writes them as their JSON
            # base type, and replay gives that base type back.
            encoder = _passthrough
        elif issubclass(kind, tuple):
            encoder = _container("tuple", False)
        elif issubclass(kind, dict):
            encoder = lambda value, collapse: _encode(dict(value), collapse)  # noqa: E731
        elif issubclass(kind, list):
            encoder = lambda value, collapse: _encode(list(value), collapse)  # noqa: E731
        elif issubclass(kind, pathlib.PurePath):
            base = next(cls for cls in kind.__mro__ if cls.__module__ == "pathlib")
            encoder = _text(base.__name__, str)
        else:
            # A subclass of a type spanreplay knows (a datetime subclass) comes back as that type.
            known = [cls for cls in _BUILTIN_ENCODERS if issubclass(kind, cls)]
            encoder = _BUILTIN_ENCODERS[known[0]] if known else _unencodable
    if len(_ENCODERS) < 4096:
        _ENCODERS[kind] = encoder
    return encoder


def _b64(value: Any) -> str:
    return base64.b64encode(bytes(value)).decode()


_BUILTIN_ENCODERS: Final[dict[type, Encoder]] = {
    datetime: _text("datetime", datetime.isoformat),
    date: _text("date", date.isoformat),
    time: _text("time", time.isoformat),
    timedelta: _text("timedelta", str),
    Decimal: _text("Decimal", str),
    uuid.UUID: _text("UUID", str),
    bytes: _text("bytes", _b64),
    bytearray: _text("bytearray", _b64),
    memoryview: _text("bytes", _b64),
    tuple: _container("tuple", False),
    set: _container("set", True),
    frozenset: _container("frozenset", True),
}
_ENCODERS: dict[type, Encoder] = dict(_BUILTIN_ENCODERS)


# --- recording: values that could not be recorded -------------------------------------

_reported: weakref.WeakKeyDictionary[object, set[tuple[str, str]]] = weakref.WeakKeyDictionary()


def report_unencodable(run: object, run_id: str, kind: str, key: str, found: list[tuple[str, str]]) -> None:
    """Log, once per run and boundary, that an output held a value that cannot be recorded."""
    seen = _reported.setdefault(run, set())
    if (kind, key) in seen:
        return
    seen.add((kind, key))
    path, name = found[0]
    logger.warning(
        "spanreplay cannot record the %s returned by %s %r at %s in run %s (%s); the run continues with the "
        "real value, and replaying this step will raise UnservableOutputError. Return a value spanreplay can "
        "record, or teach it this type with spanreplay.register_type(%s, encode=..., decode=...).",
        name,
        kind,
        key,
        path,
        run_id,
        f"{len(found)} such values in this output" if len(found) > 1 else "the only such value in this output",
        name.rpartition(".")[2],
    )


def without_masked(types: str, masked: str) -> str | None:
    """The tags minus those of paths masking rewrote: a masked datetime is a placeholder
    string now, and replay serves it as the string it is. Tags of values that could
    not be recorded stay, so their step still fails on replay."""
    tags: dict[str, str] = orjson.loads(types)
    paths = [str(record.get("path", "")) for record in orjson.loads(masked) if isinstance(record, dict)]
    kept = {
        path: tag
        for path, tag in tags.items()
        if tag.startswith(UNENCODABLE) or not any(_under(path, masked_path) for masked_path in paths)
    }
    return orjson.dumps(kept).decode() if kept else None


def _under(path: str, masked: str) -> bool:
    """Whether ``path`` is ``masked`` or inside it (masking's paths and ours are written alike)."""
    if masked == "$" or path == masked:
        return True
    if path == "$" or not path.startswith(masked):
        return False
    return path[len(masked)] in ".["


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
        from .errors import TraceFormatError

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


# An annotation, compiled: None (JSON as it is), a class, or (origin, argument hints).
Hint = Any


class _Hints:
    """A return annotation compiled once: how to decode, and the classes it names."""

    def __init__(self, annotation: Any) -> None:
        self.classes: dict[str, type] = {}
        self._seen: set[int] = set()
        self.hint = self._compile(annotation)

    def _compile(self, annotation: Any) -> Hint:
        if annotation is None or annotation is type(None) or annotation is Any or annotation is object:
            return None
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
        if origin is typing.Annotated:
            return self._compile(args[0])
        if origin is typing.Union or origin is types.UnionType:
            members = [self._compile(arg) for arg in args if arg is not type(None)]
            if any(member is None for member in members):
                # A member JSON holds as it is (``str | datetime``): the value alone cannot
                # say which it was, so the recorded tags decide.
                return None
            return ("union", tuple(members), type(None) in args)
        if origin in (list, set, frozenset) or origin is typing.get_origin(typing.Sequence[int]):
            item = self._compile(args[0]) if args else None
            if origin is list or origin not in (set, frozenset):
                return None if item is None else ("list", item)
            return (origin.__name__, item)
        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return ("tuple", self._compile(args[0]))
            return ("tuple_of", tuple(self._compile(arg) for arg in args))
        if origin is dict or origin is typing.get_origin(typing.Mapping[str, int]):
            # JSON object keys are strings: an int key (written as text before tags) is named.
            key = int if args and args[0] is int else self._compile(args[0]) if args else None
            value = self._compile(args[1]) if len(args) > 1 else None
            return None if key is None and value is None else ("dict", key, value)
        if origin is typing.Literal or origin is not None:
            return None
        if not isinstance(annotation, type):
            return None  # a TypeVar, a string that did not resolve, a NewType
        if annotation in _SCALARS or annotation in (dict, list):
            return None
        if annotation in _BUILTIN_ENCODERS or annotation in _PATHS.values():
            return annotation
        if annotation in (tuple, set, frozenset):
            return (annotation.__name__, None) if annotation is not tuple else ("tuple", None)
        structure = _structure(annotation)
        if structure is None and annotation not in _registered_types:
            return None
        self.classes.setdefault(type_name(annotation), annotation)
        if id(annotation) not in self._seen and structure in ("dataclass", "namedtuple", "pydantic"):
            # The classes its fields name may be built too (a dataclass holding another).
            self._seen.add(id(annotation))
            for field_hint in _field_annotations(annotation).values():
                self._compile(field_hint)
        return annotation


def _field_annotations(cls: type) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        return {}
    if _structure(cls) == "pydantic":
        return {name: hints.get(name) for name in getattr(cls, "model_fields", {})}
    return hints


class ReturnDecoder:
    """A tool's return annotation, read the first time the tool is replayed.

    Annotations that cannot be resolved (a name defined later, a typo) count as
    no annotation: the recorded tags alone decide.
    """

    __slots__ = ("_fn", "_hints", "_lock")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn
        self._hints: _Hints | None = None
        self._lock = threading.Lock()

    def hints(self) -> _Hints:
        hints = self._hints
        if hints is None:
            with self._lock:
                if self._hints is None:
                    self._hints = _Hints(_return_annotation(self._fn))
                hints = self._hints
        return hints

    def decoder(self) -> ReturnDecoder | None:
        """This decoder, or None when the annotation asks for nothing JSON does not give."""
        hints = self.hints()
        return self if hints.hint is not None else None

    def __call__(self, value: Any) -> Any:
        # Replay hands a ReturnDecoder the whole event (see served()): the tags sit beside the value.
        raise TypeError("a ReturnDecoder decodes recorded events through served(), not bare values")


def _return_annotation(fn: Callable[..., Any]) -> Any:
    try:
        return typing.get_type_hints(fn).get("return")
    except Exception:
        annotation = getattr(fn, "__annotations__", {}).get("return")
        return annotation if isinstance(annotation, type) else None


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
            path=_path_text(path),
            type_name=type_name,
            reason=reason,
        )

    def is_masked(self, path: list[Any]) -> bool:
        if self.masked is None:
            from . import _semconv as sc

            text = self.event.attributes.get(sc.OUTPUT + sc.MASKED_SUFFIX)
            try:
                records = orjson.loads(text) if isinstance(text, str) else []
            except orjson.JSONDecodeError:
                records = []
            self.masked = [str(r.get("path", "")) for r in records if isinstance(r, dict)]
        here = _path_text(path)
        # Masked here, or somewhere inside (a field of this object).
        return any(_under(here, masked) or _under(masked, here) for masked in self.masked)


def _path_text(path: list[Any]) -> str:
    return _absolute("".join(f"[{s}]" if isinstance(s, int) else _key_text(str(s)) for s in path))


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


def _trusted_registered() -> dict[str, type]:
    """The registered classes, and the classes their fields' annotations name (a registered
    model's nested models need no registering of their own)."""
    global _trusted_cache
    trusted = _trusted_cache
    if trusted is None:
        with _registry_lock:
            registered = list(_registry_classes.values())
        trusted = {}
        for cls in registered:
            trusted.update(_Hints(cls).classes)
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
            _decode(item, _child(node, index), _item_hint(target, hint, index), ctx, [*path, index])
            for index, item in enumerate(value)
        ]
    elif type(value) is dict:
        value = {
            key: _decode(item, _child(node, key), _field_hint(target, hint, key), ctx, [*path, key])
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


def _item_hint(target: Any, hint: Hint, index: int) -> Hint:
    for candidate in (target, hint):
        if type(candidate) is tuple:
            if candidate[0] in ("list", "tuple", "set", "frozenset"):
                return candidate[1]
            if candidate[0] == "tuple_of":
                return candidate[1][index] if index < len(candidate[1]) else None
            if candidate[0] == "dict":
                return ("tuple_of", (candidate[1], candidate[2]))  # a [key, value] pair
        elif isinstance(candidate, type) and _structure(candidate) == "namedtuple":
            hints = list(_field_annotations(candidate).values())
            return _compiled(hints[index]) if index < len(hints) else None
    return None


def _field_hint(target: Any, hint: Hint, key: str) -> Hint:
    for candidate in (target, hint):
        if type(candidate) is tuple and candidate[0] == "dict":
            return candidate[2]
        if isinstance(candidate, type) and _structure(candidate) in ("dataclass", "namedtuple"):
            return _compiled(_field_annotations(candidate).get(key))
    return None


_COMPILED: dict[Any, Hint] = {}


def _compiled(annotation: Any) -> Hint:
    try:
        return _COMPILED[annotation]
    except (KeyError, TypeError):
        pass
    hint = _Hints(annotation).hint
    try:
        if len(_COMPILED) < 4096:
            _COMPILED[annotation] = hint
    except TypeError:
        pass
    return hint


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
    **_PATHS,
}


def _hashable(key: Any) -> Any:
    return tuple(key) if type(key) is list else key


def _timedelta(text: str) -> timedelta:
    match = _TIMEDELTA.match(text)
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
            return _construct(target, value, tagged)
        except Exception:
            if _structure(target) == "pydantic" and ctx.is_masked(path):
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


def _construct(cls: type, value: Any, tagged: bool) -> Any:
    """An instance of ``cls`` from its JSON. ``tagged``: written by spanreplay with its tags,
    so its fields have their types already; otherwise an annotation named the class."""
    registered = _registered_types.get(cls)
    if registered is not None and registered.decode is not None:
        return registered.decode(value)
    structure = _structure(cls)
    if structure == "enum":
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
    if structure == "pydantic":
        if tagged:
            # Fields rebuilt with their own tags: validating again could change them
            # (a dataclass field rebuilt without its init=False fields).
            return cls.model_construct(**value)  # type: ignore[attr-defined]
        return cls.model_validate(value)  # type: ignore[attr-defined]
    if structure == "namedtuple":
        return cls(*value) if type(value) is list else cls(**value)
    if structure == "dataclass":
        fields = dataclasses.fields(cls)
        obj = cls(**{f.name: value[f.name] for f in fields if f.init and f.name in value})
        for f in fields:
            if not f.init and f.name in value:
                # A field the constructor does not take: set as recorded (frozen ones too).
                object.__setattr__(obj, f.name, value[f.name])
        return obj
    raise TypeError(f"{cls.__qualname__} is not a class spanreplay can build")


def _by_hint(value: Any, hint: Hint, ctx: _Context, path: list[Any]) -> Any:
    """``value`` (no tag recorded for it) converted to what the annotation says, where it fits."""
    if type(hint) is tuple:
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
    if isinstance(hint, type):
        if isinstance(value, hint):
            return value
        if hint is int:
            return int(value) if type(value) is str and value.lstrip("-").isdecimal() else value
        if value is None:
            return None  # the annotation said a class; the tool returned None: that is what it returned
        for name, cls in _BUILTIN_TAGS.items():
            if cls is hint:
                if ctx.is_masked(path):
                    return value
                if type(value) is str and ctx.event.output_types is None:
                    old = _OLD_REPR.match(value)
                    if old is not None:
                        value = old.group(1)
                return _build(name, value, ctx, path, tagged=False)
        if ctx.is_masked(path):
            return value  # masking rewrote it when recorded: served as the masked text it is
        if type(value) is str and ctx.event.output_types is None:
            old = _OLD_REPR.match(value)
            if old is not None:
                value = old.group(1)
        if issubclass(hint, pathlib.PurePath):
            return _build(hint.__name__, value, ctx, path, tagged=False)
        return _build(hint, value, ctx, path, tagged=False)
    return value


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

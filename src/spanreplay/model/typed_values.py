"""Typed outputs on record: what a boundary returned, as JSON a person can read plus type tags.

The classes replay may build live in ``_typed_registry``, reading an annotation in
``_typed_hints``, and turning JSON and tags back into values in ``_typed_replay``.

A tool that returns a dataclass, a datetime or a set must get an equal value of the
same type back on replay. The recorded output stays JSON a person can read in
Jaeger (a datetime as ISO text, a Decimal as a string, bytes as base64 text, a
dataclass as an object); beside it, only when the output holds something JSON
cannot say, ``spanreplay.output.types`` maps the JSON paths of those values to
type tags: ``{"$":"tuple","when":"datetime","items[*]":"shop.models:Item"}``.

Tags: a name without a colon is a type spanreplay knows (``datetime``, ``tuple``,
``bytes``, ...); ``module:qualname`` is a user class (a dataclass, a pydantic
model, a NamedTuple, an Enum, or a class given to ``register_type``); a tag that
starts with ``!`` marks a value that could not be recorded at all; one that starts
with ``~`` marks text written with escapes because UTF-8 cannot hold it (a file
name with a lone surrogate), followed by the type built from the text: ``~str``,
``~PosixPath``.

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
import uuid
import weakref
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final, Protocol

import orjson

from .payloads import stable_repr
from .text_escapes import escape, readable, utf8_ok
from .typed_classes import (
    ESCAPED,
    PATHS,
    REGISTRY,
    SCALARS,
    UNENCODABLE,
    absolute_path,
    key_path,
    structure_of,
    type_name,
    under_path,
)

logger = logging.getLogger("spanreplay")

__all__ = ["BytesMasker", "report_unencodable", "to_json", "without_masked"]

# --- encoding: value -> (JSON-ready value, tags) ----------------------------------------

Tags = dict[str, str]


# Set while to_json(escape_text=True) runs: strings are checked for text UTF-8 cannot hold.
_ESCAPING: ContextVar[bool] = ContextVar("spanreplay_escaping_text", default=False)


def to_json(
    value: Any, *, collapse: bool = True, escape_text: bool = False, mask_bytes: BytesMasker | None = None
) -> tuple[Any, str | None, list[tuple[str, str]]]:
    """``value`` as JSON-ready data, its tags as compact JSON (None when it needs none), and
    the (path, type) of each value that could not be recorded.

    The common case, a value that is JSON already, is settled by one walk that copies nothing.
    ``collapse``: one ``[*]`` tag for a list whose items all carry the same tags.
    ``escape_text``: also write each string UTF-8 cannot hold (values, dict keys, paths)
    escaped, under a ``~`` tag. The record path asks for it only after the JSON encoder
    refused the output, so the common case never pays for the check.
    ``mask_bytes``: masks each ``bytes``/``bytearray``/``memoryview`` in ``value`` before it
    is written as base64 (its tag stays: replay gives bytes back).
    """
    if not escape_text and (type(value) in SCALARS or _plain(value)):
        return value, None, []
    if mask_bytes is not None:
        masker_token = _bytes_masker.set(mask_bytes)
        try:
            return to_json(value, collapse=collapse, escape_text=escape_text)
        finally:
            _bytes_masker.reset(masker_token)
    if escape_text:
        token = _ESCAPING.set(True)
        try:
            data, tags = _encode(value, collapse=collapse)
        finally:
            _ESCAPING.reset(token)
    else:
        data, tags = _encode(value, collapse=collapse)
    if not tags:
        return data, None, []
    absolute = {absolute_path(path): tag for path, tag in tags.items()}
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
            if item_kind in SCALARS:
                continue
            if (item_kind is dict or item_kind is list) and _plain(item):
                continue
            return False
        return True
    if kind is list:
        for item in value:
            item_kind = type(item)
            if item_kind in SCALARS:
                continue
            if (item_kind is dict or item_kind is list) and _plain(item):
                continue
            return False
        return True
    return kind in SCALARS


def _merge(tags: Tags, prefix: str, child: Tags | None) -> None:
    if child:
        for path, tag in child.items():
            tags[prefix + path] = tag


def _encode_list(items: list[Any] | tuple[Any, ...], *, collapse: bool) -> tuple[list[Any], Tags]:
    data: list[Any] = []
    children: list[Tags | None] = []
    for item in items:
        encoded, child = _encode(item, collapse=collapse)
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


def _encode_dict(value: Mapping[Any, Any], *, collapse: bool) -> tuple[Any, Tags]:
    tags: Tags = {}
    if all(type(key) is str for key in value) and not (_ESCAPING.get() and not all(map(utf8_ok, value))):
        data: dict[str, Any] = {}
        for key, item in value.items():
            encoded, child = _encode(item, collapse=collapse)
            data[key] = encoded
            if child:
                _merge(tags, key_path(key), child)
        return data, tags
    # Keys JSON cannot hold (numbers, tuples, dates): a list of [key, value] pairs.
    pairs, tags = _encode_list([[key, item] for key, item in value.items()], collapse=collapse)
    tags[""] = "dict"
    return pairs, tags


def _encode(value: Any, *, collapse: bool) -> tuple[Any, Tags | None]:
    """``value`` JSON-ready, and its tags relative to it ("" for itself), or None when it needs none."""
    kind = type(value)
    if kind in SCALARS:
        if kind is str and not value.isascii() and _ESCAPING.get() and not utf8_ok(value):
            return escape(value), {"": ESCAPED + "str"}
        return value, None
    if kind is dict:
        data, tags = _encode_dict(value, collapse=collapse)
        return data, tags or None
    if kind is list:
        items, tags = _encode_list(value, collapse=collapse)
        return items, tags or None
    encoder = _ENCODERS.get(kind)
    if encoder is None:
        encoder = _encoder_for(kind)
    return encoder(value, collapse=collapse)


class Encoder(Protocol):
    """Writes one value of a type JSON-ready, with its tags (None when it needs none)."""

    def __call__(self, value: Any, *, collapse: bool) -> tuple[Any, Tags | None]: ...


def _text(tag: str, convert: Callable[[Any], Any]) -> Encoder:
    def encode(value: Any, *, collapse: bool) -> tuple[Any, Tags | None]:
        return convert(value), {"": tag}

    return encode


def _container(tag: str, *, order: bool) -> Encoder:
    def encode(value: Any, *, collapse: bool) -> tuple[Any, Tags | None]:
        items = list(value)
        if order:
            # Sets are written in a stable order, so one run's recording does not depend on hashing.
            try:
                items.sort()
            except Exception:  # items of several types, or ones that refuse to compare
                items.sort(key=repr)
        data, tags = _encode_list(items, collapse=collapse)
        tags[""] = tag
        return data, tags

    return encode


def _class_encoder(cls: type) -> Encoder | None:
    name = type_name(cls)
    registered = REGISTRY.by_class.get(cls)
    if registered is not None and registered.encode is not None:
        custom = registered.encode

        def encode_custom(value: Any, *, collapse: bool) -> tuple[Any, Tags | None]:
            try:
                plain = custom(value)
            except Exception:
                # Recording fails open: the value is marked as not recorded, and replay says so.
                logger.debug("spanreplay: the encode= registered for %s failed", name, exc_info=True)
                return _unencodable(value, collapse=collapse)
            data, tags = _encode(plain, collapse=collapse)
            tags = dict(tags or {})
            tags[""] = name
            return data, tags

        return encode_custom
    structure = structure_of(cls)
    if structure is None:
        return None
    if structure == "enum":
        # A member is written by its name, which always rebuilds it, whatever its value holds;
        # a Flag by its value, as a combination of flags has no name of its own.
        flag = issubclass(cls, enum.Flag)

        def encode_enum(value: Any, *, collapse: bool) -> tuple[Any, Tags | None]:
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

    def encode_object(value: Any, *, collapse: bool) -> tuple[Any, Tags | None]:
        try:
            fields = fields_of(value)
        except Exception:
            logger.debug("spanreplay: the fields of a %s could not be read", name, exc_info=True)
            return _unencodable(value, collapse=collapse)
        data, tags = _encode_dict(fields, collapse=collapse)
        tags[""] = name
        return data, tags

    return encode_object


def _unencodable(value: Any, *, collapse: bool) -> tuple[Any, Tags | None]:
    kind = type(value)
    name = f"{kind.__module__}.{kind.__qualname__}"
    try:
        # What a person sees in the span.
        text = stable_repr(value)
    except Exception:
        text = f"<{name}>"
    return text, {"": UNENCODABLE + name}


def unencodable_output(value: Any) -> tuple[str, str, str]:
    """What is recorded of an output JSON cannot hold in any form (an integer past 64 bits,
    nesting past the encoder's depth): its text, tags that make replay refuse the step,
    and its type's name."""
    text, tags = _unencodable(value, collapse=True)
    tag = (tags or {}).get("", UNENCODABLE)
    return readable(str(text)), orjson.dumps({"$": tag}).decode(), tag[len(UNENCODABLE) :]


def _passthrough(value: Any, *, collapse: bool) -> tuple[Any, Tags | None]:
    if isinstance(value, str) and _ESCAPING.get() and not utf8_ok(value):
        return escape(value), {"": ESCAPED + "str"}
    return value, None


def _path(tag: str) -> Encoder:
    def encode(value: Any, *, collapse: bool) -> tuple[Any, Tags | None]:
        text = str(value)
        if _ESCAPING.get() and not utf8_ok(text):  # a file name that is not UTF-8
            return escape(text), {"": ESCAPED + tag}
        return text, {"": tag}

    return encode


def _encoder_for(kind: type) -> Encoder:
    encoder = _class_encoder(kind)
    if encoder is None:
        if issubclass(kind, (str, int, float)) or kind.__module__ == "numpy":
            # A str or int subclass, a numpy value: orjson writes them as their JSON
            # base type, and replay gives that base type back.
            encoder = _passthrough
        elif issubclass(kind, tuple):
            encoder = _container("tuple", order=False)
        elif issubclass(kind, dict):
            encoder = lambda value, *, collapse: _encode(dict(value), collapse=collapse)  # noqa: E731
        elif issubclass(kind, list):
            encoder = lambda value, *, collapse: _encode(list(value), collapse=collapse)  # noqa: E731
        elif issubclass(kind, pathlib.PurePath):
            # The nearest of pathlib's public classes (they live in pathlib._local from 3.13).
            base = next(cls for cls in kind.__mro__ if PATHS.get(cls.__name__) is cls)
            encoder = _path(base.__name__)
        else:
            # A subclass of a type spanreplay knows (a datetime subclass) comes back as that type.
            known = [cls for cls in _BUILTIN_ENCODERS if issubclass(kind, cls)]
            encoder = _BUILTIN_ENCODERS[known[0]] if known else _unencodable
    if len(_ENCODERS) < 4096:
        _ENCODERS[kind] = encoder
    return encoder


# While ``to_json`` runs for a recording that masks: what masks the bytes in an output
# (bytes in, bytes of the same type out) before they are written as base64, where no
# detector could find anything any more.
BytesMasker = Callable[[Any], Any]
_bytes_masker: ContextVar[BytesMasker | None] = ContextVar("spanreplay_bytes_masker", default=None)


def _b64(value: Any) -> str:
    mask = _bytes_masker.get()
    data = bytes(value) if type(value) is memoryview else value
    if mask is not None:
        data = mask(data)
    return base64.b64encode(data).decode()


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
    tuple: _container("tuple", order=False),
    set: _container("set", order=True),
    frozenset: _container("frozenset", order=True),
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
        # An escaped str keeps its tag: masking replaced part of its text (an email in a
        # file name), and the rest still holds the escapes to undo.
        if tag.startswith(UNENCODABLE)
        or tag == ESCAPED + "str"
        or not any(under_path(path, masked_path) for masked_path in paths)
    }
    return orjson.dumps(kept).decode() if kept else None


def _forget_encoder(cls: type | None) -> None:
    if cls is None:
        _ENCODERS.clear()
        _ENCODERS.update(_BUILTIN_ENCODERS)
    else:
        _ENCODERS.pop(cls, None)


REGISTRY.listeners.append(_forget_encoder)

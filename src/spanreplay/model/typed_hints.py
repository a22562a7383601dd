"""Typed values on replay: what a tool's return annotation says each part of its output is."""

from __future__ import annotations

import threading
import types
import typing
from collections.abc import Callable
from typing import Any

if typing.TYPE_CHECKING:
    pass

from .typed_classes import BUILTIN_TYPES, PATHS, REGISTRY, SCALARS, structure_of, type_name

__all__ = ["Hint", "Hints", "ReturnDecoder", "compiled", "field_annotations", "field_hint", "item_hint"]

# An annotation, compiled: None (JSON as it is), a class, or (origin, argument hints).
Hint = Any


class Hints:
    """A return annotation compiled once: how to decode, and the classes it names."""

    def __init__(self, annotation: Any) -> None:
        self.classes: dict[str, type] = {}
        self._seen: set[int] = set()
        self.hint = self._compile(annotation)

    def _compile(self, annotation: Any) -> Hint:
        if annotation is None or annotation is type(None) or annotation is Any or annotation is object:
            return None
        origin = typing.get_origin(annotation)
        if origin is None:
            return self._compile_class(annotation)
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
        return self._compile_container(origin, args)

    def _compile_container(self, origin: Any, args: tuple[Any, ...]) -> Hint:
        """A generic annotation of a container (``list[int]``, ``dict[str, Path]``)."""
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
        return None  # a Literal, or another generic JSON holds as it is

    def _compile_class(self, annotation: Any) -> Hint:
        """An annotation that is not generic: a class, or something that names none."""
        if not isinstance(annotation, type):
            return None  # a TypeVar, a string that did not resolve, a NewType
        if annotation in SCALARS or annotation in (dict, list):
            return None
        if annotation in BUILTIN_TYPES or annotation in PATHS.values():
            return annotation
        if annotation in (tuple, set, frozenset):
            return (annotation.__name__, None) if annotation is not tuple else ("tuple", None)
        structure = structure_of(annotation)
        if structure is None and annotation not in REGISTRY.by_class:
            return None
        self.classes.setdefault(type_name(annotation), annotation)
        if id(annotation) not in self._seen and structure in ("dataclass", "namedtuple", "pydantic"):
            # The classes its fields name may be built too (a dataclass holding another).
            self._seen.add(id(annotation))
            for field_hint in field_annotations(annotation).values():
                self._compile(field_hint)
        return annotation


def field_annotations(cls: type) -> dict[str, Any]:
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        return {}
    if structure_of(cls) == "pydantic":
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
        self._hints: Hints | None = None
        self._lock = threading.Lock()

    def hints(self) -> Hints:
        hints = self._hints
        if hints is None:
            with self._lock:
                if self._hints is None:
                    self._hints = Hints(_return_annotation(self._fn))
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


def item_hint(target: Any, hint: Hint, index: int) -> Hint:
    for candidate in (target, hint):
        if type(candidate) is tuple:
            if candidate[0] in ("list", "tuple", "set", "frozenset"):
                return candidate[1]
            if candidate[0] == "tuple_of":
                return candidate[1][index] if index < len(candidate[1]) else None
            if candidate[0] == "dict":
                return ("tuple_of", (candidate[1], candidate[2]))  # a [key, value] pair
        elif isinstance(candidate, type) and structure_of(candidate) == "namedtuple":
            hints = list(field_annotations(candidate).values())
            return compiled(hints[index]) if index < len(hints) else None
    return None


def field_hint(target: Any, hint: Hint, key: str) -> Hint:
    for candidate in (target, hint):
        if type(candidate) is tuple and candidate[0] == "dict":
            return candidate[2]
        if isinstance(candidate, type) and structure_of(candidate) in ("dataclass", "namedtuple"):
            return compiled(field_annotations(candidate).get(key))
    return None


_COMPILED: dict[Any, Hint] = {}


def compiled(annotation: Any) -> Hint:
    try:
        return _COMPILED[annotation]
    except (KeyError, TypeError):
        pass
    hint = Hints(annotation).hint
    try:
        if len(_COMPILED) < 4096:
            _COMPILED[annotation] = hint
    except TypeError:
        pass
    return hint

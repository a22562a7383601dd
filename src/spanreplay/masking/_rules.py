"""Rules: what to do with the value at a JSON path, or under a field name.

A rule is a small callable object in the structlog manner: ``__init__`` holds
its settings (where it applies), ``__call__`` does its one step on a value. Path
rules come first, in the order given, then field-name rules, then the detectors
(``MaskingConfig``). A ``keep`` rule stops everything after it for that subtree,
which is how a field that decides a branch stays readable.

Paths use the dialect of ``ignore_paths``: ``customer.email``,
``orders[*].customer.name``, ``items[0]``, ``*`` for any one key or index, and
``**`` for any number of levels (``**.email`` is an ``email`` key anywhere).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal

import orjson

from spanreplay.errors import ConfigurationError
from spanreplay.model import jsonpath as _jsonpath

from ._pseudonyms import Pseudonyms, is_placeholder, label_of

__all__ = [
    "DEFAULT_FIELD_NAMES",
    "DROP",
    "FieldNames",
    "PathRule",
    "Selector",
    "drop",
    "keep",
    "mask",
    "transform",
]

Action = Literal["mask", "drop", "keep", "transform"]
Segment = str | int


class _Drop:
    """Returned by a rule whose value is to be removed from its object or array."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DROP"


DROP: Final = _Drop()


class Selector:
    """Which boundaries and which payload a rule applies to (``fnmatch`` patterns)."""

    __slots__ = ("key", "kind", "part")

    def __init__(self, kind: str = "*", key: str = "*", part: str = "*") -> None:
        if part not in ("*", "input", "output", "error"):
            raise ConfigurationError(
                f"A masking rule's part is {part!r}; use 'input', 'output', 'error' or '*' (all three)."
            )
        self.kind = kind
        self.key = key
        self.part = part

    def applies(self, kind: str, key: str, part: str) -> bool:
        return (
            (self.part == "*" or self.part == part)
            and (self.kind == "*" or fnmatch.fnmatchcase(kind, self.kind))
            and (self.key == "*" or fnmatch.fnmatchcase(key, self.key))
        )

    def describe(self) -> str:
        return f"kind={self.kind!r} key={self.key!r} part={self.part!r}"


def _canonical(value: Any) -> str:
    if isinstance(value, str):
        return value
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS, default=repr).decode()


def _label_from_path(segments: tuple[Segment, ...]) -> str:
    for segment in reversed(segments):
        if isinstance(segment, str) and segment not in ("*", "**"):
            return label_of(segment)
    return "value"


class PathRule:
    """Mask, drop, keep or transform the value at a JSON path.

    Build one with ``mask()``, ``drop()``, ``keep()`` or ``transform()``.

    Args:
        path: the JSON path, relative to the payload (``"orders[*].customer.name"``;
            ``"$"`` is the payload itself).
        action: ``"mask"`` (a typed pseudonym of the whole value; a number becomes a
            number, a bool or null is left as it is: masking keeps JSON types), ``"drop"`` (remove
            it), ``"keep"`` (leave the subtree unmasked: no field-name rule, no detector)
            or ``"transform"`` (``fn(value)`` takes its place).
        kind, key: the boundaries it applies to, as ``fnmatch`` patterns
            (``kind="tool", key="lookup_*"``).
        part: ``"input"``, ``"output"``, ``"error"`` or ``"*"``.
        name: the rule name recorded on the span; ``"{action}:{path}"`` by default.
        label: the placeholder label for ``mask``; the path's last key by default.
        fn: the callback of ``transform``. It must be idempotent (``fn(fn(x)) == fn(x)``):
            replay transforms values that were transformed when recorded.
        pseudonymize: for ``mask``, a keyed token (True) or always a plain placeholder.
    """

    __slots__ = ("action", "fn", "label", "name", "path", "pseudonymize", "segments", "selector")

    def __init__(  # noqa: PLR0913 -- public keyword options since 0.1; grouping them would break every user's rule
        self,
        path: str,
        action: Action = "mask",
        *,
        kind: str = "*",
        key: str = "*",
        part: str = "*",
        name: str | None = None,
        label: str | None = None,
        fn: Callable[[Any], Any] | None = None,
        pseudonymize: bool = True,
    ) -> None:
        if action not in ("mask", "drop", "keep", "transform"):
            raise ConfigurationError(
                f"Masking rule action {action!r} is unknown; use 'mask', 'drop', 'keep' or 'transform'."
            )
        if action == "transform" and not callable(fn):
            raise ConfigurationError(f"The transform rule for {path!r} needs fn=, a callable that takes the value.")
        self.path = path
        self.segments: tuple[Segment, ...] = _jsonpath.parse(path)
        self.action: Action = action
        self.selector = Selector(kind, key, part)
        self.name = name or f"{action}:{path}"
        self.label = label_of(label) if label else _label_from_path(self.segments)
        self.fn = fn
        self.pseudonymize = pseudonymize

    def __repr__(self) -> str:
        return f"PathRule({self.path!r}, {self.action!r}, {self.selector.describe()})"

    def __call__(self, value: Any, pseudonyms: Pseudonyms) -> Any:
        """The value that takes ``value``'s place (``DROP`` to remove it)."""
        if self.action == "keep":
            return value
        if self.action == "drop":
            return DROP
        if self.action == "transform":
            assert self.fn is not None
            return self.fn(value)
        if value is None or isinstance(value, bool) or (isinstance(value, str) and is_placeholder(value)):
            # A bool holds one bit, and masking keeps JSON types: there is no other
            # bool to write. A bool that must not be recorded is dropped (drop()).
            return value
        if isinstance(value, (int, float)):
            return pseudonyms.number(self.label, value, pseudonymize=self.pseudonymize)
        return pseudonyms.token(self.label, _canonical(value), pseudonymize=self.pseudonymize)


def mask(path: str, **options: Any) -> PathRule:
    """Replace the value at ``path`` with a typed pseudonym: ``mask("orders[*].customer.name")``."""
    return PathRule(path, "mask", **options)


def drop(path: str, **options: Any) -> PathRule:
    """Remove the value at ``path`` from the recording."""
    return PathRule(path, "drop", **options)


def keep(path: str, **options: Any) -> PathRule:
    """Record the value at ``path`` as it is: no field-name rule or detector touches it."""
    return PathRule(path, "keep", **options)


def transform(path: str, fn: Callable[[Any], Any], **options: Any) -> PathRule:
    """Record ``fn(value)`` instead of the value at ``path``; ``fn`` must be idempotent."""
    return PathRule(path, "transform", fn=fn, **options)


# Credentials that travel under well-known names: headers, config objects, API bodies.
# A name matches a key that is it or ends with it after "_": "token" matches
# "access_token" and "refreshToken", but not "max_tokens" or "token_count"; "pass"
# matches "db_pass" and "dbPass", but not "bypass".
DEFAULT_FIELD_NAMES: Final = (
    "password",
    "passwd",
    "pwd",
    "pass",
    "passcode",
    "passphrase",
    # A password's hash is about the password: it can be tested against guesses.
    "password_hash",
    "secret",
    "secret_key",
    "secret_access_key",
    "token",
    "api_key",
    "apikey",
    "authorization",
    "cookie",
    "private_key",
    "credentials",
    "credential",
)

_CAMEL: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", re.ASCII)
_SEPARATORS: Final = re.compile(r"[ \-.]+", re.ASCII)
# ASCII only: str.lower() would also fold the Kelvin sign into "k", which the
# byte-level gates cannot see.
_ASCII_LOWER: Final = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def normalize_field(name: str) -> str:
    """``"X-Api-Key"``, ``"apiKey"``, ``"API_KEY"`` -> ``"x_api_key"``, ``"api_key"``, ``"api_key"``."""
    return _SEPARATORS.sub("_", _CAMEL.sub("_", name)).translate(_ASCII_LOWER)


class FieldNames:
    """Mask the value under any object key with one of ``names``, whatever it holds.

    Args:
        names: snake_case names; ``DEFAULT_FIELD_NAMES`` by default.
        kind, key, part: where it applies, as for ``PathRule``.
        pseudonymize: a keyed token (True) or a plain placeholder (False, the default:
            these are credentials, and a hash of a password is still about the password).
            A number becomes a number: a keyed pseudonym of its shape, or ``0``.
        label: the placeholder label; the matching name by default (``<password>``).
    """

    __slots__ = ("_cache", "label", "names", "pseudonymize", "selector")

    def __init__(
        self,
        names: Iterable[str] = DEFAULT_FIELD_NAMES,
        *,
        kind: str = "*",
        key: str = "*",
        part: str = "*",
        pseudonymize: bool = False,
        label: str | None = None,
    ) -> None:
        self.names = tuple(normalize_field(n) for n in names)
        for name in self.names:
            if not re.fullmatch(r"[a-z0-9]+(?:_[a-z0-9]+)*", name):
                raise ConfigurationError(
                    f"Field name {name!r} cannot be matched; write field names like 'api_key' or 'password'."
                )
        self.selector = Selector(kind, key, part)
        self.pseudonymize = pseudonymize
        self.label = label_of(label) if label else None
        self._cache: dict[str, str | None] = {}

    def __repr__(self) -> str:
        return f"FieldNames({list(self.names)!r}, {self.selector.describe()})"

    def match(self, field: str) -> str | None:
        """The name that ``field`` matches, or None."""
        cached = self._cache.get(field, "")
        if cached != "":
            return cached
        normalized = normalize_field(field)
        found = None
        for name in self.names:
            if normalized == name or normalized.endswith("_" + name):
                found = name
                break
        if len(self._cache) < 4096:
            self._cache[field] = found
        return found

    def __call__(self, value: Any, name: str, pseudonyms: Pseudonyms) -> Any:
        """The value recorded in place of ``value`` found under a field matching ``name``."""
        if (
            value is None
            or isinstance(value, bool)
            or value == ""
            or (isinstance(value, str) and is_placeholder(value))
        ):
            return value
        if isinstance(value, (int, float)):
            return pseudonyms.number(self.label or label_of(name), value, pseudonymize=self.pseudonymize)
        return pseudonyms.token(self.label or label_of(name), _canonical(value), pseudonymize=self.pseudonymize)

    def last_words(self) -> tuple[str, ...]:
        """The last word of each name: a key that matches ends with one of these, in any case."""
        return tuple(sorted({name.rsplit("_", 1)[-1] for name in self.names}))

    def prefilter_patterns(self) -> tuple[str, ...]:
        """Case-insensitive patterns for the end of a matching key, for the hyperscan gate."""
        return tuple("[-_ .]*".join(name.split("_")) for name in self.names)

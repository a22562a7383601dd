"""``MaskingConfig``: which rules and detectors run, and the pseudonym key."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from spanreplay._environment import environment
from spanreplay.errors import ConfigurationError

from ._builtin import builtin_detectors
from ._detector import Detector
from ._rules import DEFAULT_FIELD_NAMES, FieldNames, PathRule

__all__ = ["KEY_ENV", "MaskingConfig"]

# The variable holding the project key that makes masked values keyed pseudonyms.
KEY_ENV: Final = "SPANREPLAY_MASK_KEY"
Engine = Literal["auto", "hyperscan", "python"]


@dataclass(frozen=True)
class MaskingConfig:
    """How payloads are masked before they become span attributes. On by default.

    Args:
        enabled: False records payloads as they are (only for data with nothing
            personal in it).
        key: the project key for pseudonyms (``<email:3f9a2c1b07d4e85a>``); by default the
            ``SPANREPLAY_MASK_KEY`` environment variable. Without one, masked values
            become plain placeholders (``<email>``). Replay needs the key the run was
            recorded with. The key is never recorded and never shown in a repr.
        rules: path rules (``mask()``, ``drop()``, ``keep()``, ``transform()``) and
            ``FieldNames`` rules, tried in this order before the defaults.
        field_names: names whose values are always masked (``DEFAULT_FIELD_NAMES``:
            password, secret, token, api_key, authorization, cookie, ...); ``()`` for none.
        detectors: the detectors to run, in priority order; None for the built-in set.
        extra_detectors: detectors to run before the built-in ones.
        disable: names of detectors to leave out (``{"ipv4", "ipv6"}``).
        ip_addresses: False leaves IPv4 and IPv6 addresses unmasked.
        engine: ``"auto"`` uses hyperscan when installed to skip detectors that cannot
            match; ``"python"`` never does. Both mask identically.
    """

    enabled: bool = True
    key: str | bytes | None = field(default=None, repr=False)
    rules: Sequence[PathRule | FieldNames] = ()
    field_names: Sequence[str] = DEFAULT_FIELD_NAMES
    detectors: Sequence[Detector] | None = None
    extra_detectors: Sequence[Detector] = ()
    disable: Collection[str] = ()
    ip_addresses: bool = True
    engine: Engine = "auto"

    def __post_init__(self) -> None:
        if self.engine not in ("auto", "hyperscan", "python"):
            raise ConfigurationError(
                f"MaskingConfig(engine={self.engine!r}) is unknown; use 'auto', 'hyperscan' or 'python'."
            )
        for rule in self.rules:
            if not isinstance(rule, (PathRule, FieldNames)):
                raise ConfigurationError(
                    f"MaskingConfig(rules=...) holds {rule!r}; rules are made with spanreplay.masking's "
                    "mask(), drop(), keep(), transform() or FieldNames(). Detectors go in extra_detectors=."
                )

    def resolved_key(self) -> bytes | None:
        """The pseudonym key as bytes: ``key``, else ``SPANREPLAY_MASK_KEY``, else None."""
        key = self.key if self.key is not None else environment().mask_key
        if isinstance(key, str):
            return key.encode() if key else None
        return key or None

    def resolved_detectors(self) -> tuple[Detector, ...]:
        base = builtin_detectors(ip_addresses=self.ip_addresses) if self.detectors is None else tuple(self.detectors)
        chosen = [*self.extra_detectors, *base]
        disabled = set(self.disable)
        return tuple(d for d in chosen if d.name not in disabled)

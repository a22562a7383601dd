"""PII masking: what a recorded payload holds instead of personal data and secrets.

Masking runs on every boundary's input, output and error before the span codec
sees them, so no span processor, exporter or backend ever receives a raw value.
It is on by default::

    import spanreplay
    from spanreplay.masking import MaskingConfig, keep, mask

    spanreplay.configure(
        masking=MaskingConfig(
            rules=[
                mask("orders[*].customer.name"),
                keep("ticket.status", kind="tool"),
            ],
        )
    )

With a project key (``MaskingConfig(key=...)`` or ``SPANREPLAY_MASK_KEY``), a
masked value becomes a keyed pseudonym, ``<email:3f9a2c1b07d4e85a>``: equal values give
equal tokens, so a run whose branches compare them replays exactly. Without a
key it becomes ``<email>``. See docs/masking.md.
"""

from __future__ import annotations

from ._builtin import BUILTIN_DETECTORS, builtin_detectors
from ._config import KEY_ENV, MaskingConfig
from ._detector import Detector, Pattern, RegexDetector
from ._engine import hyperscan_available
from ._hints import after, before
from ._paths import format_path
from ._pipeline import Masker, MaskingSession, MaskResult, masker_for
from ._pseudonyms import is_placeholder
from ._rules import DEFAULT_FIELD_NAMES, FieldNames, PathRule, drop, keep, mask, transform

__all__ = [
    "BUILTIN_DETECTORS",
    "DEFAULT_FIELD_NAMES",
    "KEY_ENV",
    "Detector",
    "FieldNames",
    "MaskResult",
    "Masker",
    "MaskingConfig",
    "MaskingSession",
    "PathRule",
    "Pattern",
    "RegexDetector",
    "after",
    "before",
    "builtin_detectors",
    "drop",
    "format_path",
    "hyperscan_available",
    "is_placeholder",
    "keep",
    "mask",
    "masker_for",
    "transform",
]

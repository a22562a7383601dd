"""The built-in detector set, in priority order (the first wins where two overlap).

A new built-in detector goes in the module of its family (``_builtin_secrets``,
``_builtin_personal``, ``_builtin_network``) and in the order below.
"""

from __future__ import annotations

from typing import Final

from ._builtin_network import ip_detectors
from ._builtin_personal import personal_detectors
from ._builtin_secrets import secret_detectors
from ._detector import Detector

__all__ = ["BUILTIN_DETECTORS", "builtin_detectors"]


def builtin_detectors(*, ip_addresses: bool = True) -> tuple[Detector, ...]:
    """The built-in detectors, in priority order (the first wins where two overlap)."""
    return (*secret_detectors(), *personal_detectors(), *(ip_detectors() if ip_addresses else ()))


# The detectors masking runs by default (secrets, personal data, IP addresses), in order.
BUILTIN_DETECTORS: Final = builtin_detectors()

"""Clock and random boundaries: the nondeterminism every agent has."""

from __future__ import annotations

import random as _random
import time as _time
import uuid as _uuid
from datetime import UTC, datetime

from spanreplay import semconv as sc

from .runs import boundary

__all__ = ["now", "random", "time", "uuid4"]


def now() -> datetime:
    """``datetime.now(timezone.utc)``, recorded; replay returns the recorded instant."""
    return boundary(sc.KIND_CLOCK, "now", None, _utcnow, decode=datetime.fromisoformat)


def time() -> float:
    """``time.time()``, recorded; replay returns the recorded value."""
    return boundary(sc.KIND_CLOCK, "time", None, _time.time)


def random() -> float:
    """``random.random()``, recorded; replay returns the recorded draw."""
    return boundary(sc.KIND_RANDOM, "random", None, _random.random)


def uuid4() -> _uuid.UUID:
    """``uuid.uuid4()``, recorded; replay returns the recorded UUID."""
    return boundary(sc.KIND_UUID, "uuid4", None, _uuid.uuid4, decode=_uuid.UUID)


def _utcnow() -> datetime:
    return datetime.now(UTC)

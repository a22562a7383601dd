"""The Settings in force: what ``configure()`` set up, read by every run without setting anything up.

``spanreplay.recording.configuration`` builds them and installs them here; the code that
records, replays and exports reads them from here, so that none of it imports ``configure()``.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from spanreplay.errors import ConfigurationError
from spanreplay.masking import Masker, MaskingConfig, masker_for
from spanreplay.model.payloads import json_default

if TYPE_CHECKING:
    from .exporters._file import DurableFileSpanProcessor
    from .exporters._otlp import OtlpSpanProcessor
    from .keep import KeepPolicy, RunTally
    from .postgres.processor import PostgresSpanProcessor

__all__ = ["Settings", "current_settings", "install", "is_configured", "masker", "masker_of"]

_settings: Settings | None = None
_lock = threading.Lock()


@dataclass
class Settings:
    """What ``configure()`` set up. ``spanreplay.settings()`` returns the current one."""

    provider: TracerProvider
    tracer: trace.Tracer
    file_processor: DurableFileSpanProcessor | None
    otlp_processor: OtlpSpanProcessor | None
    raise_internal_errors: bool
    postgres_processor: PostgresSpanProcessor | None = None
    masker: Masker | None = None
    # Which successful runs stay recorded once they end (None: all); see _keep.
    keep: KeepPolicy | None = None
    tally: RunTally | None = None

    @property
    def strict(self) -> bool:
        """The former name of ``raise_internal_errors`` (deprecated)."""
        warnings.warn(
            "Settings.strict is now Settings.raise_internal_errors; strict goes in a later release.",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.raise_internal_errors

    @property
    def trace_dir(self) -> Path | None:
        return self.file_processor.trace_dir if self.file_processor else None


def install(settings: Settings | None) -> None:
    """Put ``settings`` in force (None: forget them); ``configure()``, ``reset()`` and tests call it."""
    global _settings
    with _lock:
        _settings = settings


def current_settings() -> Settings | None:
    """The Settings in force, or None before ``configure()`` (without configuring)."""
    return _settings


def is_configured() -> bool:
    """Whether ``configure()`` (or a first recorded run) has set spanreplay up."""
    return _settings is not None


def masker() -> Masker:
    """The masker in force; replay asks for it without setting up any tracing."""
    current = _settings
    if current is not None and current.masker is not None:
        return current.masker
    return masker_of(masking=None)


def masker_of(*, masking: MaskingConfig | bool | None) -> Masker:
    if masking is None or masking is True:
        masking = MaskingConfig()
    elif masking is False:
        masking = MaskingConfig(enabled=False)
    elif not isinstance(masking, MaskingConfig):
        raise ConfigurationError(
            f"configure(masking={masking!r}) is not a masking setting; pass a "
            "spanreplay.masking.MaskingConfig, or True / False to turn masking on or off."
        )
    return masker_for(masking, default=json_default)

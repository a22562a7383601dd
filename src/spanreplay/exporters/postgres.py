"""The Postgres exporter's former home, kept so that imports of it keep working.

Everything Postgres now lives in ``spanreplay.postgres``: import
``PostgresSpanProcessor`` from there. This module goes in a later release.
"""

import warnings

from spanreplay.recording.postgres.exporter import DSN_VARIABLE, MODE_VARIABLE, attach
from spanreplay.recording.postgres.processor import PostgresSpanProcessor
from spanreplay.recording.postgres.writes import PostgresExportStats

__all__ = ["DSN_VARIABLE", "MODE_VARIABLE", "PostgresExportStats", "PostgresSpanProcessor", "attach"]

warnings.warn(
    "spanreplay.exporters.postgres moved to spanreplay.postgres; import PostgresSpanProcessor from there "
    "(this module goes in a later release).",
    DeprecationWarning,
    stacklevel=2,
)

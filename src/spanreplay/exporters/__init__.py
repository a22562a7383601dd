"""Exporters: the durable per-run trace file (and, per backend, more)."""

from spanreplay.recording.exporters._file import DurableFileSpanProcessor

__all__ = ["DurableFileSpanProcessor"]

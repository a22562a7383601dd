"""Exporters: the durable per-run trace file (and, per backend, more)."""

from ._file import DurableFileSpanProcessor

__all__ = ["DurableFileSpanProcessor"]

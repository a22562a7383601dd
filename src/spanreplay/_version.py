"""The installed distribution's version, read once: the root package and the tracer both name it."""

import importlib.metadata as _metadata

# The installed distribution's version ("0.0.0" from a source tree that was not installed).
try:
    __version__ = _metadata.version("spanreplay")
except _metadata.PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

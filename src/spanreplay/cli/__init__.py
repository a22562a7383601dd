"""The ``spanreplay`` command line: ``runs``, ``show``, ``replay`` and ``demo``.

One module per command; ``_app`` holds the group, the global options, and the
turning of errors into one sentence and an exit code.
"""

from __future__ import annotations

from ._app import cli, main
from ._common import (
    EXIT_BAD_INPUT,
    EXIT_DIVERGED,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_REPRODUCED,
    CliState,
)

__all__ = ["EXIT_BAD_INPUT", "EXIT_DIVERGED", "EXIT_INTERNAL", "EXIT_OK", "EXIT_REPRODUCED", "CliState", "cli", "main"]

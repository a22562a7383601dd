"""The ``spanreplay`` command line: ``runs``, ``show``, ``replay`` and ``demo``.

One module per command; ``_app`` holds the group, the global options, and the
turning of errors into one sentence and an exit code.

``cli`` and ``main`` are imported on first use: ``spanreplay check`` starts a
process per replayed run (``_check_run``), which needs none of the other commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._common import (
    EXIT_BAD_INPUT,
    EXIT_DIVERGED,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_REPRODUCED,
    CliState,
)

if TYPE_CHECKING:
    from ._app import cli, main

__all__ = ["EXIT_BAD_INPUT", "EXIT_DIVERGED", "EXIT_INTERNAL", "EXIT_OK", "EXIT_REPRODUCED", "CliState", "cli", "main"]


def __getattr__(name: str) -> Any:
    if name in ("cli", "main"):
        from . import _app

        return getattr(_app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

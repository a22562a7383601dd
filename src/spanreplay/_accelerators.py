"""Speed shortcuts that read other libraries' private names: one switch, and a preflight each.

An accelerator serves what a public path serves, faster, by reading names another
library keeps private (the OpenTelemetry SDK's tracer fields, the Anthropic SDK's
model helpers, pydantic's model metadata). Each one registers here with what it
reads, what serves instead when it is off, and a check of those names.

- ``configure(accelerate=False)``, or ``SPANREPLAY_ACCELERATE=0`` when
  ``configure()`` leaves it unsaid, turns every accelerator off.
- ``preflight()`` runs each check once (when spanreplay is configured and when
  the Anthropic SDK is instrumented). An accelerator whose private names are
  missing, or no longer behave as the check expects, goes off with one log line;
  recording and replay then take the public path.

Hot paths read ``accelerator.on``, one attribute read. Before the first
preflight every accelerator is off: an accelerator is used only once checked.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Final

from spanreplay._environment import environment

logger = logging.getLogger("spanreplay")

__all__ = ["ACCELERATORS", "Accelerator", "accelerate", "preflight", "register", "set_accelerate"]


class Accelerator:
    """One speed shortcut: its name, what it reads, what serves when it is off, its check.

    ``check`` returns None when the private names are there and behave as
    expected, else one sentence saying what is missing or changed.
    """

    __slots__ = ("_check", "checked", "name", "on", "problem", "reads", "replaced_by")

    def __init__(self, name: str, reads: str, replaced_by: str, check: Callable[[], str | None]) -> None:
        self.name = name
        self.reads = reads
        self.replaced_by = replaced_by
        self._check = check
        self.on = False
        self.checked = False
        self.problem: str | None = None

    def run_check(self) -> str | None:
        try:
            return self._check()
        except Exception as exc:  # a check that cannot run is a changed library too
            return f"checking it raised {type(exc).__name__}: {exc}"

    def __repr__(self) -> str:
        return f"Accelerator({self.name!r}, on={self.on})"


ACCELERATORS: Final[dict[str, Accelerator]] = {}
_lock = threading.Lock()
# configure(accelerate=): None leaves it to SPANREPLAY_ACCELERATE.
_switch: bool | None = None


def register(name: str, *, reads: str, replaced_by: str, check: Callable[[], str | None]) -> Accelerator:
    """Add an accelerator (at import of the module that owns it); off until a preflight checks it."""
    accelerator = ACCELERATORS[name] = Accelerator(name, reads, replaced_by, check)
    return accelerator


def accelerate() -> bool:
    """Whether accelerators may be used: ``configure(accelerate=)``, else ``SPANREPLAY_ACCELERATE``."""
    return _switch if _switch is not None else environment().accelerate


def set_accelerate(*, accelerate: bool | None) -> None:
    """``configure(accelerate=)``: None leaves it to the environment. Takes effect now."""
    global _switch
    _switch = accelerate
    preflight()


def preflight() -> None:
    """Check each accelerator not checked yet (when accelerating), and set which are on."""
    on = accelerate()
    with _lock:
        for accelerator in list(ACCELERATORS.values()):
            if on and not accelerator.checked:
                accelerator.checked = True
                accelerator.problem = accelerator.run_check()
                if accelerator.problem is not None:
                    logger.warning(
                        "spanreplay: %s, so the %s accelerator is off and %s serves instead (the same results, "
                        "slower).",
                        accelerator.problem.rstrip("."),
                        accelerator.name,
                        accelerator.replaced_by,
                    )
            accelerator.on = on and accelerator.checked and accelerator.problem is None


def recheck() -> None:
    """Forget every check, then preflight again: for tests that change a library under an accelerator."""
    with _lock:
        for accelerator in ACCELERATORS.values():
            accelerator.checked = False
            accelerator.problem = None
    preflight()

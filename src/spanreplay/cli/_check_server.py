"""What the server that ``spanreplay check`` forks its runs from prepares once, for every run.

Imported by that server alone (``_check_processes``): importing this module is
the preparation. Each forked run inherits what is built here instead of
building it again: the modules a replay imports, and the masker of the default
masking configuration, whose hyperscan databases take most of a small run's
replay to compile. The masker is cached by its configuration and key
(``masking.masker_for``), so a run whose environment asks for other masking
builds its own; nothing here opens a run or imports the entry point.
"""

from __future__ import annotations

from . import _check_run  # noqa: F401  (imported for the forked runs)


def _prepare() -> None:
    try:
        from .._config import masker

        masker()
    except Exception:  # a run builds what it needs itself, and says what went wrong then
        pass


_prepare()

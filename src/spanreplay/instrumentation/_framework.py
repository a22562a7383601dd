"""What every framework's tool instrumentor shares: its tested range, and one log line when it cannot run.

A framework adapter (LangChain tools, MCP client tools, PydanticAI function tools)
is an OpenTelemetry instrumentor like the Anthropic one: ``opentelemetry-instrument``
finds it through its entry point, ``spanreplay.instrument_all()`` calls it from
code. Each wraps the framework's one public call of a tool and hands it to the run
as a ``BoundaryCall``; there is no framework-specific replay path. When the
framework is not installed, or its version is outside the range the adapter was
tested with, ``instrument()`` logs one line and does nothing: the agent runs
unrecorded rather than breaking inside a wrapper.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
from collections.abc import Collection
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from opentelemetry.instrumentation.utils import unwrap
from packaging.requirements import Requirement
from wrapt import wrap_function_wrapper

logger = logging.getLogger("spanreplay")

__all__ = ["FrameworkInstrumentor", "Wraps", "range_problem", "unwrap_all", "wrap_all"]

# (module, attribute path, wrapper): every wrap point, for instrument and uninstrument alike.
Wraps = tuple[tuple[str, str, Any], ...]


def range_problem(supported: str, *, what: str, extra: str) -> str | None:
    """Why ``supported`` (``"mcp >= 2.3, < 3"``) cannot be instrumented here, as one sentence; None when it can."""
    requirement = Requirement(supported)
    install = f"pip install 'spanreplay[{extra}]'"
    try:
        version = importlib.metadata.version(requirement.name)
    except importlib.metadata.PackageNotFoundError:
        return (
            f"spanreplay: {requirement.name} is not installed, so {what} are not recorded; install it with {install}."
        )
    if not requirement.specifier.contains(version, prereleases=True):
        return (
            f"spanreplay: {requirement.name} {version} is outside the tested range ({supported}), so {what} are "
            f"not recorded or replayed; install a tested version with {install}."
        )
    return None


class FrameworkInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """An instrumentor of a framework's tool calls; subclasses name the range, the extra and the wrap points."""

    #: The requirement the adapter was tested with, e.g. ``"mcp >= 2.3, < 3"``.
    supported: str = ""
    #: The extra that installs it (``spanreplay[mcp]``).
    extra: str = ""
    #: What goes unrecorded when it cannot run, for the log line ("MCP tool calls").
    what: str = ""
    #: (module, attribute path, wrapper): every wrap point, for instrument and uninstrument alike.
    wraps: Wraps = ()

    def instrumentation_dependencies(self) -> Collection[str]:
        return (self.supported,)

    def instrument(self, **kwargs: Any) -> Any:
        if not self.is_instrumented_by_opentelemetry and not kwargs.get("skip_dep_check"):
            problem = range_problem(self.supported, what=self.what, extra=self.extra)
            if problem is not None:
                logger.warning(problem)
                return None
            kwargs["skip_dep_check"] = True
        kwargs.pop("raise_exception_on_conflict", None)
        return super().instrument(**kwargs)

    def _instrument(self, **kwargs: Any) -> None:
        wrap_all(self.wraps)

    def _uninstrument(self, **kwargs: Any) -> None:
        unwrap_all(self.wraps)


def wrap_all(wraps: Wraps) -> None:
    """Wrap every ``(module, "Class.method", wrapper)`` point."""
    for module, name, wrapper in wraps:
        wrap_function_wrapper(module, name, wrapper)


def unwrap_all(wraps: Wraps) -> None:
    """Put back what ``wrap_all(wraps)`` wrapped."""
    for module, name, _ in wraps:
        owner: Any = importlib.import_module(module)
        *path, attribute = name.split(".")
        for part in path:
            owner = getattr(owner, part)
        unwrap(owner, attribute)

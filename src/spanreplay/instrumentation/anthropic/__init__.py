"""Record and replay every Anthropic Messages call as a model boundary.

``AnthropicInstrumentor().instrument()`` (or ``spanreplay.instrument_anthropic()``,
or ``opentelemetry-instrument`` through the ``opentelemetry_instrumentor`` entry
point) wraps the SDK's clients, sync and async. Inside a run, each Messages call
(``create``, ``stream``, ``parse``, ``count_tokens``, the ``beta`` twins, raw and
streaming responses, the beta tool runner) is one ``chat {model}`` span with the
request, the HTTP exchanges and the GenAI attributes; on replay the SDK gets the
recorded responses back and builds the same objects, stream events and errors,
with no network. Outside any run the SDK works untouched.

The SDK's own OpenTelemetry spans are switched off inside runs, so each call is
one span; ``instrument(sdk_spans=True)`` or ``SPANREPLAY_ANTHROPIC_SDK_SPANS=true``
keeps them too (nested under spanreplay's span, in record mode only).
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Collection, Mapping
from typing import Any

from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
from packaging.requirements import Requirement

from spanreplay._accelerators import preflight
from spanreplay._environment import environment
from spanreplay.model.error_records import register_error_fields, register_error_rebuilder
from spanreplay.run.base import current_run

from .._framework import Wraps, unwrap_all, wrap_all
from . import _direct as _direct  # registers the direct accelerator before the preflight
from . import _overrides as _overrides  # registers how a model call's override is served
from . import _wrappers
from ._errors import error_fields, rebuild_anthropic_error
from ._prices import DEFAULT_PRICES, ModelPrice, cost_usd, prices, set_prices

logger = logging.getLogger("spanreplay")

__all__ = [
    "DEFAULT_PRICES",
    "SUPPORTED",
    "AnthropicInstrumentor",
    "ModelPrice",
    "cost_usd",
    "instrument_anthropic",
    "prices",
    "set_prices",
]

SUPPORTED = "anthropic >= 2.0, < 3"

_BASE = "anthropic._base_client"
# (module, attribute path, wrapper): every wrap point, for instrument and uninstrument alike.
_WRAPS: Wraps = (
    (_BASE, "SyncAPIClient.post", _wrappers.post_sync),
    (_BASE, "AsyncAPIClient.post", _wrappers.post_async),
    (_BASE, "SyncAPIClient.request", _wrappers.request_sync),
    (_BASE, "AsyncAPIClient.request", _wrappers.request_async),
    (_BASE, "SyncAPIClient._attempt_request", _wrappers.attempt_sync),
    (_BASE, "AsyncAPIClient._attempt_request", _wrappers.attempt_async),
    (_BASE, "SyncAPIClient._sleep_for_retry", _wrappers.sleep_sync),
    (_BASE, "AsyncAPIClient._sleep_for_retry", _wrappers.sleep_async),
    ("anthropic.lib.tools._beta_runner", "BaseSyncToolRunner._run_tool", _wrappers.run_tool_sync),
    ("anthropic.lib.tools._beta_runner", "BaseAsyncToolRunner._run_tool", _wrappers.run_tool_async),
    ("anthropic.lib.tools._beta_runner", "BaseSyncToolRunner._run_toolset_member", _wrappers.run_tool_sync),
    ("anthropic.lib.tools._beta_runner", "BaseAsyncToolRunner._run_toolset_member", _wrappers.run_tool_async),
)
# Private SDK names the instrumentation stands on (no public path does their work):
# (class, method, the parameters the wrappers pass or read by name, in order). One
# missing, or taking other parameters, and nothing is instrumented: the agent runs
# unrecorded, with one log line, rather than breaking in a wrapper.
_RUNNER = "anthropic.lib.tools._beta_runner"
_NEEDED: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    *(
        (_BASE, client, method, parameters)
        for client in ("SyncAPIClient", "AsyncAPIClient")
        for method, parameters in (
            ("post", ("path", "cast_to")),
            ("request", ("cast_to", "options", "stream", "stream_cls")),
            ("_request", ("cast_to", "options", "stream", "stream_cls")),
            ("_attempt_request", ("options",)),
            ("_copy_and_prepare", ("options",)),
            ("_sleep_for_retry", ()),
            ("_prepare_url", ("url",)),
        )
    ),
    *(
        (_RUNNER, runner, method, parameters)
        for runner in ("BaseSyncToolRunner", "BaseAsyncToolRunner")
        for method, parameters in (("_run_tool", ("tool", "tool_use")), ("_run_toolset_member", ("tool_use",)))
    ),
)


def _signature_problem(module: str, owner: str, method: str, expected: tuple[str, ...]) -> str | None:
    """What is wrong with ``owner.method`` for the wrappers, as a phrase; None when nothing is."""
    import importlib
    import inspect

    cls = getattr(importlib.import_module(module), owner, None)
    function = getattr(cls, method, None)
    if function is None:
        return f"has no {owner}.{method}"
    try:
        parameters = [name for name in inspect.signature(function).parameters if name != "self"]
    except (TypeError, ValueError):
        return f"has a {owner}.{method} whose signature cannot be read"
    if parameters[: len(expected)] != list(expected):
        return f"has a {owner}.{method}({', '.join(parameters)}), not ({', '.join(expected)}, ...)"
    return None


def _problem() -> str | None:
    """Why the installed SDK cannot be instrumented, as one sentence; None when it can."""
    requirement = Requirement(SUPPORTED)
    try:
        version = importlib.metadata.version("anthropic")
    except importlib.metadata.PackageNotFoundError:
        return (
            f"spanreplay: the anthropic package is not installed, so Anthropic calls are not recorded or "
            f"replayed; install it with pip install '{SUPPORTED.replace(' ', '')}'."
        )
    if not requirement.specifier.contains(version, prereleases=True):
        return (
            f"spanreplay: anthropic {version} is outside the supported range ({SUPPORTED}), so Anthropic calls "
            f"are not recorded or replayed; install a supported version with pip install "
            f"'{SUPPORTED.replace(' ', '')}'."
        )
    for module, owner, method, expected in _NEEDED:
        try:
            problem = _signature_problem(module, owner, method, expected)
        except ImportError:
            problem = f"has no module {module}"
        if problem is not None:
            return (
                f"spanreplay: anthropic {version} {problem}, which spanreplay wraps, so Anthropic calls are not "
                f"recorded or replayed; install another anthropic release in {SUPPORTED}."
            )
    return None


class AnthropicInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """The OpenTelemetry instrumentor for the Anthropic SDK (sync and async clients).

    ``instrument()`` takes these keyword arguments, all optional:

    - ``sdk_spans``: keep the SDK's own ``anthropic.messages.create`` spans inside
      runs as well (default False, or ``SPANREPLAY_ANTHROPIC_SDK_SPANS``).
    - ``prices``: ``{model prefix: ModelPrice}`` added to the cost table.
    - ``zero_code``: honour ``SPANREPLAY_MODE`` (default True; see docs/anthropic.md).
    - ``skip_dep_check``: instrument whatever anthropic is installed.
    """

    def instrumentation_dependencies(self) -> Collection[str]:
        return (SUPPORTED,)

    def instrument(self, **kwargs: Any) -> Any:
        if not self.is_instrumented_by_opentelemetry and not kwargs.get("skip_dep_check"):
            problem = _problem()
            if problem is not None:
                # One line, whichever way instrument() was reached (opentelemetry-instrument
                # only logs a conflict at debug level): the agent then runs unrecorded.
                logger.warning(problem)
                return None
            kwargs["skip_dep_check"] = True
        kwargs.pop("raise_exception_on_conflict", None)
        return super().instrument(**kwargs)

    def _instrument(self, **kwargs: Any) -> None:
        sdk_spans = kwargs.get("sdk_spans")
        if sdk_spans is None:
            sdk_spans = environment().anthropic_sdk_spans
        _wrappers.options["sdk_spans"] = bool(sdk_spans)
        table = kwargs.get("prices")
        if table:
            set_prices(table)
        wrap_all(_WRAPS)
        _patch_tracer()
        # The direct replay path is an accelerator: checked here, once, against this SDK.
        preflight()
        register_error_rebuilder(rebuild_anthropic_error)
        register_error_fields(error_fields)
        if kwargs.get("zero_code", True):
            from ._zero_code import start_from_environment

            start_from_environment()

    def _uninstrument(self, **kwargs: Any) -> None:
        unwrap_all(_WRAPS)
        _unpatch_tracer()
        from ._zero_code import stop

        stop()


# The SDK's own spans: BaseClient._tracer is a property; inside a run it says
# "no tracer" unless sdk_spans is on, which silences every span the SDK makes
# (calls, the tool runner, tool uses) while spanreplay's spans stand for them.
_original_tracer: Any = None


def _patch_tracer() -> None:
    global _original_tracer
    from anthropic._base_client import BaseClient

    original = BaseClient.__dict__.get("_tracer")
    if not isinstance(original, property) or original.fget is None:
        return
    getter = original.fget

    def _tracer(self: Any) -> Any:
        if not _wrappers.options["sdk_spans"] and current_run() is not None:
            return None
        return getter(self)

    _original_tracer = original
    BaseClient._tracer = property(_tracer, doc=original.__doc__)  # type: ignore[method-assign,assignment]


def _unpatch_tracer() -> None:
    global _original_tracer
    from anthropic._base_client import BaseClient

    if _original_tracer is not None:
        BaseClient._tracer = _original_tracer  # type: ignore[method-assign]
        _original_tracer = None


_default: AnthropicInstrumentor | None = None


def instrument_anthropic(
    *, sdk_spans: bool | None = None, prices: Mapping[str, ModelPrice] | None = None, zero_code: bool = True
) -> AnthropicInstrumentor:
    """Instrument the Anthropic SDK from code: what ``opentelemetry-instrument`` does.

    Safe to call more than once. Returns the instrumentor (``.uninstrument()``
    restores the SDK).
    """
    global _default
    if _default is None:
        _default = AnthropicInstrumentor()
    if not _default.is_instrumented_by_opentelemetry:
        _default.instrument(sdk_spans=sdk_spans, prices=prices, zero_code=zero_code)
    return _default

"""The keep policy: which successful runs stay recorded once they end.

Every run is recorded in full. When a run ends successfully the policy decides
whether it stays: a share of such runs (``keep_ok``), picked by a hash of the run
id, and those a ``keep=`` callable asks for. A run that is not kept has its
trace file, its salt and its Postgres rows removed at once. A run that failed is
always kept, and a run that crashed never reaches its end, so nothing removes
it. Spans already sent over OTLP cannot be called back: sampling them is the
Collector's part (docs/collector.md).

The share is a pure function of the run id: every process, exporter and rerun
that sees the same id with the same ``keep_ok`` keeps or drops it alike.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from spanreplay import semconv as sc
from spanreplay._environment import environment
from spanreplay.errors import ConfigurationError
from spanreplay.model.events import RunSummary
from spanreplay.run.salts import salt_path

from .settings import current_settings

if TYPE_CHECKING:
    from spanreplay.cost import Usage

    from .settings import Settings

logger = logging.getLogger("spanreplay")

__all__ = ["EndedRun", "KeepPolicy", "RunTally", "keep_share", "policy_in_force", "policy_of", "settle_run"]

KeepCallable = Callable[[RunSummary], bool]
_SCALE: Final = float(1 << 64)


def keep_share(run_id: str) -> float:
    """Where ``run_id`` falls in [0, 1): the first 64 bits of its sha256, scaled.

    A successful run is kept by the share when this is below ``keep_ok``: the same
    run id gives the same answer in every process and on every rerun.
    """
    digest = hashlib.sha256(run_id.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") / _SCALE


@dataclass(frozen=True, init=False, repr=False)
class KeepPolicy:
    """Which successful runs stay recorded once they end: ``configure(keep=KeepPolicy(...))``.

    The same policy as ``configure(keep_ok=, keep=)``, as one value: a share of the
    successful runs, picked by run id, and those a callable asks for. Failed and
    crashed runs are always kept.

    Args:
        keep_ok: the share of successful runs kept, from 0 to 1, picked by
            ``keep_share(run_id) < keep_ok`` (1.0 keeps all, 0.0 none but those ``keep``
            asks for). Left out: 0 when ``keep`` is given (only the runs it asks for),
            else 1 (every run).
        keep: called with the run's ``RunSummary`` when it ended successfully; True keeps it
            whatever its share. A callable that raises keeps the run (and is logged).
        origin: where the policy came from, for ``spanreplay runs`` (not compared).

    Raises:
        ConfigurationError: ``keep_ok`` is not a number from 0 to 1, or ``keep`` is not callable.
    """

    keep_ok: float
    keep: KeepCallable | None
    origin: str = field(default="", compare=False, repr=False)

    def __init__(self, keep_ok: float | None = None, keep: KeepCallable | None = None, *, origin: str = "") -> None:
        if keep is not None and not callable(keep):
            raise ConfigurationError(
                f"KeepPolicy(keep={keep!r}) is not callable; pass a function of a spanreplay.RunSummary that "
                "returns True to keep the run (for a share of runs, pass keep_ok=0.1)."
            )
        # Left out, the share is what configure(keep=) alone or nothing at all means.
        default = 1.0 if keep is None else 0.0
        share = default if keep_ok is None else _share(keep_ok, "KeepPolicy(keep_ok=)")
        object.__setattr__(self, "keep_ok", share)
        object.__setattr__(self, "keep", keep)
        object.__setattr__(self, "origin", origin)

    def __repr__(self) -> str:
        keep = "" if self.keep is None else f", keep={getattr(self.keep, '__qualname__', type(self.keep).__name__)}"
        return f"KeepPolicy(keep_ok={self.keep_ok!r}{keep})"

    @property
    def keeps_all(self) -> bool:
        return self.keep_ok >= 1.0

    def kept_by_share(self, run_id: str) -> bool:
        return self.keep_ok >= 1.0 or keep_share(run_id) < self.keep_ok

    def decide(self, summary: RunSummary) -> bool:
        """Whether the run stays recorded. Runs that did not end ok always do."""
        if summary.status != sc.RUN_STATUS_OK or self.kept_by_share(summary.run_id):
            return True
        if self.keep is None:
            return False
        try:
            return bool(self.keep(summary))
        except Exception:
            # Recording fails open: a policy that cannot answer keeps the run.
            logger.exception(
                "spanreplay: the keep= callable raised for run %s; the run is kept. Fix the callable "
                "(it is given a spanreplay.RunSummary) or drop keep= from configure().",
                summary.run_id,
            )
            return True

    def describe(self) -> str:
        """One line for ``spanreplay runs``: what is kept, and where the policy came from."""
        if self.keeps_all and self.keep is None:
            return f"keep policy: every run is kept ({self.origin or 'KeepPolicy'})"
        share = f"{self.keep_ok:.4g} of successful runs by run id"
        if self.keep is not None:
            name = getattr(self.keep, "__qualname__", type(self.keep).__name__)
            share += f", and those keep={name} asks for"
        return f"keep policy: {share}; failed and crashed runs always ({self.origin or 'KeepPolicy'})"


def policy_of(keep_ok: float | None, keep: KeepCallable | KeepPolicy | None) -> KeepPolicy | None:
    """The policy ``configure(keep_ok=, keep=)`` asks for: ``SPANREPLAY_KEEP_OK`` when neither
    is given; None when nothing asks for one (every run is kept).

    ``keep`` alone keeps the successful runs it asks for and no others (``keep_ok`` 0).
    ``keep`` may be a whole ``KeepPolicy``, which is then the policy.

    Raises:
        ConfigurationError: ``keep_ok`` or ``SPANREPLAY_KEEP_OK`` is not a share in [0, 1],
            ``keep`` is not callable, or ``keep_ok`` is given beside a ``KeepPolicy``.
    """
    if isinstance(keep, KeepPolicy):
        if keep_ok is not None:
            raise ConfigurationError(
                f"configure(keep_ok={keep_ok!r}) is given beside configure(keep={keep!r}); the KeepPolicy holds "
                f"the share: write configure(keep=KeepPolicy(keep_ok={keep_ok!r}, keep=...)) and drop keep_ok=."
            )
        return keep if keep.origin else KeepPolicy(keep.keep_ok, keep.keep, origin=f"configure(keep={keep!r})")
    if keep is not None and not callable(keep):
        raise ConfigurationError(
            f"configure(keep={keep!r}) is not callable; pass a function of a spanreplay.RunSummary that "
            "returns True to keep the run (for a share of runs, pass keep_ok=0.1)."
        )
    if keep_ok is None and keep is None:
        text = environment().keep_ok
        if text is None:
            return None
        return KeepPolicy(_share(text, "SPANREPLAY_KEEP_OK"), None, origin=f"SPANREPLAY_KEEP_OK={text}")
    origin = "configure(" + ", ".join(
        part
        for part in (
            f"keep_ok={keep_ok!r}" if keep_ok is not None else "",
            f"keep={getattr(keep, '__qualname__', 'callable')}" if keep is not None else "",
        )
        if part
    )
    share = 0.0 if keep_ok is None else _share(keep_ok, "configure(keep_ok=)")
    return KeepPolicy(share, keep, origin=origin + ")")


def policy_in_force() -> KeepPolicy:
    """The policy of this process: ``configure()``'s when it was called, else ``SPANREPLAY_KEEP_OK``."""
    current = current_settings()
    if current is not None:
        return current.keep or KeepPolicy(origin="configure() sets none")
    return policy_of(None, None) or KeepPolicy(origin="SPANREPLAY_KEEP_OK unset")


def _share(value: Any, name: str) -> float:
    try:
        share = float(value)
    except (TypeError, ValueError):
        share = -1.0
    if not 0.0 <= share <= 1.0:
        raise ConfigurationError(
            f"{name} is {value!r}, not a share of runs; give a number from 0 to 1 (0.1 keeps one successful "
            "run in ten; failed and crashed runs are always kept)."
        )
    return share


@dataclass
class _Calls:
    """What a run's model calls added up to so far."""

    calls: int = 0
    without_usage: int = 0
    priced: list[tuple[str, Usage, int]] | None = None


class RunTally(SpanProcessor):
    """Counts each run's model calls and their usage as their spans end, for ``keep=`` callables.

    Only while a ``keep=`` callable is in force (``active``): the run summary it is
    given then has its tokens and dollars without the trace being read again.
    """

    def __init__(self) -> None:
        self.active = False
        self._runs: dict[str, _Calls] = {}
        self._lock = threading.Lock()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        pass

    def on_end(self, span: ReadableSpan) -> None:
        if not self.active:
            return
        attributes = span.attributes or {}
        if attributes.get(sc.KIND) != sc.KIND_MODEL:
            return
        run_id = attributes.get(sc.RUN_ID)
        if not isinstance(run_id, str):
            return
        from spanreplay.model.usage import model_of, usage_of

        usage = usage_of(attributes)
        with self._lock:
            tally = self._runs.setdefault(run_id, _Calls())
            tally.calls += 1
            if usage is None:
                tally.without_usage += 1
            else:
                if tally.priced is None:
                    tally.priced = []
                tally.priced.append((model_of(attributes, span.name), usage, span.start_time or 0))

    def take(self, run_id: str) -> _Calls:
        """The run's tally, forgotten here (the run has ended)."""
        with self._lock:
            return self._runs.pop(run_id, None) or _Calls()


@dataclass(frozen=True, slots=True)
class EndedRun:
    """A run that has just ended, as the keep policy sees it: its status (``error`` names the
    exception of a failed one), how many steps it recorded and its run span."""

    run_id: str
    agent: str
    status: str
    error: str | None
    steps: int
    span: Any


def _summary(ended: EndedRun, calls: _Calls) -> RunSummary:
    tokens = 0
    usd = 0.0
    unpriced = 0
    if calls.priced:
        from spanreplay.cost._prices import price_table

        table = price_table()
        for model, usage, start_ns in calls.priced:
            tokens += usage.total
            when = datetime.fromtimestamp(start_ns / 1e9, tz=UTC) if start_ns else None
            cost = table.usd(model, usage, when=when)
            if cost is None:
                unpriced += 1
            else:
                usd += cost
    span = ended.span
    context = span.get_span_context() if span is not None else None
    return RunSummary(
        run_id=ended.run_id,
        agent=ended.agent,
        status=ended.status,
        error=ended.error,
        steps=ended.steps,
        trace_id=f"{context.trace_id:032x}" if context is not None else "",
        start_ns=getattr(span, "start_time", None) or 0,
        end_ns=getattr(span, "end_time", None) or 0,
        model_calls=calls.calls,
        tokens=tokens,
        usd=usd,
        unpriced_calls=unpriced,
        calls_without_usage=calls.without_usage,
    )


def settle_run(config: Settings, ended: EndedRun, *, forked: bool = False) -> bool:
    """Apply the keep policy to a run that has just ended (its run span is written).

    Returns whether the run is kept; a fork always is (someone asked for it). A
    run not kept loses its trace file and salt now, and its Postgres rows as soon
    as the writer has written them (the delete is queued behind them).
    """
    run_id = ended.run_id
    tally = config.tally.take(run_id) if config.tally is not None else _Calls()
    policy = config.keep
    if policy is None or ended.status != sc.RUN_STATUS_OK or forked:
        return True
    if policy.kept_by_share(run_id):
        return True
    if policy.keep is not None and policy.decide(_summary(ended, tally)):
        return True
    _remove(config, run_id)
    return False


def _remove(config: Settings, run_id: str) -> None:
    files = config.file_processor
    if files is not None:
        trace_dir = files.trace_dir
        try:
            if files.discard(run_id):
                # The salt goes with its file; one shared with an earlier run of the same id stays.
                salt_path(trace_dir, run_id).unlink(missing_ok=True)
        except OSError:
            logger.exception(
                "spanreplay: the keep policy could not remove the trace file of run %s in %s; remove it "
                "by hand or with `spanreplay prune`",
                run_id,
                trace_dir,
            )
    if config.postgres_processor is not None:
        config.postgres_processor.remove_run(run_id)

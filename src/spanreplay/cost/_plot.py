"""``spanreplay cost --plot FILE.png``: tokens and US dollars per day, outlier runs marked.

matplotlib is an optional dependency (``pip install 'spanreplay[plot]'``); it is
imported only here, through its object API (no pyplot, no global figure state),
with the Agg canvas, so no display is needed.
"""

from __future__ import annotations

import os
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Final

from spanreplay.errors import ConfigurationError

from ._summary import CostReport
from ._totals import Totals

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["OUTLIER_COLOR", "plot_days"]

# Token kinds stacked bottom to top, with their colours; red is kept for outliers alone.
_KINDS: Final = (
    ("input", "#1f77b4"),
    ("cache read", "#2ca02c"),
    ("cache write", "#9467bd"),
    ("output", "#ff7f0e"),
)
USD_COLOR: Final = "#17becf"
OUTLIER_COLOR: Final = "#d62728"
WIDTH_IN: Final = 10.0
HEIGHT_IN: Final = 6.0
DPI: Final = 100


def plot_days(report: CostReport, path: str | os.PathLike[str]) -> None:
    """Draw the report's tokens and USD per day (UTC) to a PNG at ``path``.

    Raises:
        ConfigurationError: matplotlib is not installed, or the file cannot be written.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigurationError(
            "spanreplay cost --plot draws with matplotlib, which is not installed; install it with "
            "pip install 'spanreplay[plot]'."
        ) from None
    days = {g.key: g.totals for g in report.grouped("day") if g.key != "unknown"}
    span = _all_days(sorted(days))
    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    tokens_axis, usd_axis = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    positions = [float(n) for n in range(len(span))]
    bottoms = [0.0] * len(span)
    for kind, color in _KINDS:
        values = [float(_kind(days.get(d.isoformat()), kind)) for d in span]
        tokens_axis.bar(positions, values, width=0.8, bottom=bottoms, color=color, label=kind)
        bottoms = [b + v for b, v in zip(bottoms, values, strict=True)]
    usd = [days[d.isoformat()].usd if d.isoformat() in days else 0.0 for d in span]
    usd_axis.bar(positions, usd, width=0.8, color=USD_COLOR, label="USD")
    _mark_outliers(report, tokens_axis, usd_axis, bottoms, usd, span)
    tokens_axis.set_ylabel("tokens")
    usd_axis.set_ylabel("US dollars")
    tokens_axis.legend(loc="upper left", fontsize="small", ncols=5)
    tokens_axis.ticklabel_format(axis="y", style="plain")
    tokens_axis.set_title(
        f"Tokens and USD per day (UTC) in {report.source}; prices: {report.prices.describe()}", fontsize="medium"
    )
    # About a dozen date labels, whatever the number of days.
    step = max(1, len(span) // 12)
    ticks = list(range(0, len(span), step))
    usd_axis.set_xticks([float(n) for n in ticks], [span[n].isoformat() for n in ticks], rotation=30, ha="right")
    for axis in (tokens_axis, usd_axis):
        axis.grid(axis="y", alpha=0.3)
    try:
        figure.savefig(os.fspath(path), format="png")
    except OSError as exc:
        raise ConfigurationError(f"The plot cannot be written to {os.fspath(path)} ({exc.strerror}).") from None


def _all_days(keys: list[str]) -> list[date]:
    """Every day from the first to the last, so quiet days show as gaps, not as nothing."""
    if not keys:
        return [datetime.now(UTC).date()]
    first, last = date.fromisoformat(keys[0]), date.fromisoformat(keys[-1])
    return [first + timedelta(days=n) for n in range((last - first).days + 1)]


def _kind(totals: Totals | None, kind: str) -> int:
    if totals is None:
        return 0
    return {
        "input": totals.input_tokens,
        "cache read": totals.cache_read_tokens,
        "cache write": totals.cache_write_tokens,
        "output": totals.output_tokens,
    }[kind]


def _mark_outliers(
    report: CostReport, tokens_axis: Axes, usd_axis: Axes, tokens: list[float], usd: list[float], span: list[date]
) -> None:
    """A red triangle over each day an outlier run started, with the run ids' tails beside it."""
    index = {d: n for n, d in enumerate(span)}
    by_day: dict[int, list[str]] = {}
    for outlier in report.outliers:
        started = outlier.run.started
        if started is not None and started.date() in index:
            by_day.setdefault(index[started.date()], []).append(outlier.run.run_id[-8:])
    label = f"outlier run (> {report.factor:g}x its agent's median)"
    for n, names in sorted(by_day.items()):
        x = float(n)
        tokens_axis.scatter([x], [tokens[n]], marker="v", s=140, color=OUTLIER_COLOR, zorder=5, label=label)
        usd_axis.scatter([x], [usd[n]], marker="v", s=140, color=OUTLIER_COLOR, zorder=5)
        label = "_"  # one legend entry
        right_half = n > len(span) / 2  # label towards the middle, so it stays inside the figure
        tokens_axis.annotate(
            ", ".join(names),
            (x, tokens[n]),
            xytext=(-10 if right_half else 10, 4),
            textcoords="offset points",
            ha="right" if right_half else "left",
            color=OUTLIER_COLOR,
            fontsize="small",
        )
    # Room above the tallest bar for its marker and label.
    for axis, values in ((tokens_axis, tokens), (usd_axis, usd)):
        axis.set_ylim(0, max([*values, 0.0]) * 1.2 or 1.0)

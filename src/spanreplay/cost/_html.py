"""``spanreplay report``: one run as a self-contained HTML page.

The page holds everything it shows (inline CSS and SVG, no script, no font,
image or stylesheet from anywhere), so it can be mailed, attached to a ticket
or opened offline. It shows the run's facts and totals; a timeline with one bar
per boundary (colour by kind, failed steps in red, the point where a replay of
the current code diverged in orange, where a crashed process died in purple);
and a table of the steps with their tokens and cost, each with its input and
output as recorded (masked when recorded, and passed through the masking in
force again, which leaves masked values as they are).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay.masking import Masker
from spanreplay.model.events import Event, EventLog
from spanreplay.model.usage import Usage, model_of, usage_of

from ._prices import PriceTable

__all__ = ["KIND_COLORS", "Replayed", "StepCost", "render_run", "step_costs"]

KIND_COLORS: Final = {"model": "#3b6fd4", "tool": "#2f9e44"}
OTHER_COLOR: Final = "#868e96"
ERROR_COLOR: Final = "#e03131"
DIVERGED_COLOR: Final = "#f08c00"
CRASH_COLOR: Final = "#ae3ec9"
# A payload longer than this is cut on the page; spanreplay show prints it whole.
PAYLOAD_LIMIT: Final = 64 * 1024
_WIDTH: Final = 1100
_LABELS: Final = 260
_ROW: Final = 20
_AXIS: Final = 44


@dataclass(frozen=True, slots=True)
class Replayed:
    """What a replay of the current code against the run found."""

    outcome: str  # completed, reproduced, diverged or failed
    message: str
    seq: int | None = None
    entry: str = ""


@dataclass(frozen=True, slots=True)
class StepCost:
    """A model step's tokens and US dollars (None: unknown tokens, or no price for its model)."""

    model: str
    usage: Usage | None
    usd: float | None


def step_costs(log: EventLog, prices: PriceTable) -> dict[int, StepCost]:
    """Each model step's usage and cost, priced as ``spanreplay cost`` prices it."""
    out: dict[int, StepCost] = {}
    for event in log:
        if event.kind != sc.KIND_MODEL or event.attributes.get(sc.GEN_AI_OPERATION_NAME) == sc.OPERATION_COUNT_TOKENS:
            continue
        model = model_of({**event.attributes, sc.KEY: event.key})
        usage = usage_of(event.attributes)
        usd = None
        if usage is not None:
            started = datetime.fromtimestamp(event.start_ns / 1e9, tz=UTC) if event.start_ns else None
            usd = prices.usd(model, usage, when=started)
            if usd is None:
                recorded = event.attributes.get(sc.GEN_AI_USAGE_COST)
                usd = float(recorded) if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) else None
        out[event.seq] = StepCost(model, usage, usd)
    return out


def render_run(
    log: EventLog,
    *,
    source: str,
    prices: PriceTable,
    replayed: Replayed | None = None,
    masker: Masker | None = None,
) -> str:
    """The HTML page of one run."""
    costs = step_costs(log, prices)
    failed_at = _failing_seq(log)
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(log.run_id)} · spanreplay report</title>",
        f"<style>{_CSS}</style></head><body>",
        _header(log, source, prices, costs, replayed),
        _timeline(log, costs, replayed, failed_at),
        _steps(log, costs, replayed, failed_at, masker, source),
        "<footer>Written by spanreplay from the run's spans. Inputs and outputs are shown as recorded: masked "
        "before they were written, and masked again with the rules in force when this page was made.</footer>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


# --- header -------------------------------------------------------------------------------------


def _header(
    log: EventLog, source: str, prices: PriceTable, costs: dict[int, StepCost], replayed: Replayed | None
) -> str:
    run = log.run
    usages = [c.usage for c in costs.values() if c.usage is not None]
    usd = sum(c.usd for c in costs.values() if c.usd is not None)
    unknown = sum(1 for c in costs.values() if c.usage is None)
    unpriced = sum(1 for c in costs.values() if c.usage is not None and c.usd is None)
    tokens = _sum_usage(usages)
    facts = [
        ("agent", _e(run.agent or "-")),
        ("status", f'<span class="badge status-{_e(run.status)}">{_e(run.status)}</span>'),
        ("started", _e(_time(run.start_ns))),
        ("duration", _e(_duration(run.start_ns, run.end_ns))),
        ("steps", str(len(log))),
        ("service", _e(run.service_name or "-")),
        ("model calls", f"{len(costs):,}" + (f" ({unknown} without usage)" if unknown else "")),
        (
            "tokens",
            f"{tokens.total:,} (input {tokens.input:,}, output {tokens.output:,}, cache read "
            f"{tokens.cache_read:,}, cache write {tokens.cache_write:,})",
        ),
        ("cost", _e(_usd(usd) + (f" + {unpriced} call(s) without a price" if unpriced else ""))),
        ("source", _e(source)),
    ]
    if run.forked_from:
        facts.append(("forked from", _e(run.forked_from)))
    rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in facts)
    error = f'<p class="error-line">{_e(str(run.error))}</p>' if run.error is not None else ""
    verdict = ""
    if replayed is not None:
        css = {"completed": "ok", "reproduced": "ok"}.get(replayed.outcome, "diverged")
        where = f" at seq {replayed.seq}" if replayed.seq is not None else ""
        verdict = (
            f'<p class="verdict verdict-{css}" id="verdict"><b>Replay of {_e(replayed.entry)}: '
            f"{_e(replayed.outcome)}{where}.</b> {_e(replayed.message)}</p>"
        )
    prices_line = f'<p class="dim">Prices: {_e(prices.describe())}.</p>'
    return f'<header><h1>Run {_e(log.run_id)}</h1>{error}{verdict}<dl class="facts">{rows}</dl>{prices_line}</header>'


def _sum_usage(usages: Sequence[Usage]) -> Usage:
    return Usage(
        input=sum(u.input for u in usages),
        output=sum(u.output for u in usages),
        cache_read=sum(u.cache_read for u in usages),
        cache_write=sum(u.cache_write for u in usages),
    )


# --- timeline -----------------------------------------------------------------------------------


def _timeline(log: EventLog, costs: dict[int, StepCost], replayed: Replayed | None, failed_at: int | None) -> str:
    run = log.run
    events = list(log)
    start = run.start_ns or min((e.start_ns for e in events if e.start_ns), default=0)
    end = max([run.end_ns, *(e.end_ns for e in events)], default=0)
    total = max(end - start, 1)
    plot = _WIDTH - _LABELS - 16
    height = _AXIS + _ROW * max(len(events), 1) + 8

    def x(ns: int) -> float:
        return _LABELS + plot * (max(ns - start, 0) / total) if ns else _LABELS

    out = [
        f'<section><h2>Timeline</h2><svg class="timeline" viewBox="0 0 {_WIDTH} {height}" width="{_WIDTH}" '
        f'height="{height}" role="img" aria-label="one bar per step of run {_e(log.run_id)}">'
    ]
    for n in range(5):
        tick = _LABELS + plot * n / 4
        anchor = "start" if n == 0 else "end" if n == 4 else "middle"
        out.append(
            f'<line x1="{tick:.1f}" y1="{_AXIS - 6}" x2="{tick:.1f}" y2="{height}" class="grid"/>'
            f'<text x="{tick:.1f}" y="14" text-anchor="{anchor}">{_e(_offset(total * n // 4))}</text>'
        )
    for row, event in enumerate(events):
        y = _AXIS + row * _ROW
        depth = event.call_id.count("/")
        label = f"{event.seq} {event.kind} {event.key}"
        out.append(
            f'<a href="#seq-{event.seq}"><text x="{4 + 12 * depth}" y="{y + 14}" class="label">'
            f"{_e(_cut(label, 34 - 2 * depth))}</text></a>"
        )
        left = x(event.start_ns)
        # A failed step gets a bar wide enough to see, however short it was.
        width = max(x(event.end_ns or event.start_ns) - left, 6.0 if event.failed else 3.0)
        color = ERROR_COLOR if event.failed else KIND_COLORS.get(event.kind, OTHER_COLOR)
        classes = ["bar", f"kind-{_e(event.kind)}"] + (["error"] if event.failed else [])
        tip = f"seq {event.seq}: {event.kind} {event.key}, {_duration(event.start_ns, event.end_ns)}"
        cost = costs.get(event.seq)
        if cost is not None and cost.usage is not None:
            tip += f", {cost.usage.total:,} tokens" + (f", {_usd(cost.usd)}" if cost.usd is not None else "")
        if event.failed:
            tip += f", failed: {event.error}"
        out.append(
            f'<a href="#seq-{event.seq}"><rect class="{" ".join(classes)}" data-seq="{event.seq}" '
            f'x="{left:.1f}" y="{y + 3}" width="{width:.1f}" height="{_ROW - 6}" fill="{color}">'
            f"<title>{_e(tip)}</title></rect></a>"
        )
        if event.failed:
            name = _cut(event.error.type_name if event.error else "error", 40)
            # Beside the bar, on whichever side has room.
            if left + width > _LABELS + plot * 0.75:
                spot = f'x="{left - 4:.1f}" text-anchor="end"'
            else:
                spot = f'x="{left + width + 4:.1f}"'
            out.append(f'<text {spot} y="{y + 14}" class="mark" style="fill:{ERROR_COLOR}">✕ {_e(name)}</text>')
    diverged = replayed.seq if replayed is not None and replayed.outcome in ("diverged", "failed") else None
    if diverged is not None:
        _diverged_marker(out, events, diverged, x, height)
    elif replayed is not None and replayed.outcome in ("diverged", "failed"):
        out.append(_edge(x(end), DIVERGED_COLOR, "diverged", "replay diverged after the last step", height))
    if run.status == sc.RUN_STATUS_CRASHED:
        out.append(_edge(x(end), CRASH_COLOR, "crashed", "the process died here", height))
    out.append("</svg>")
    out.append(_legend(failed_at, diverged, crashed=run.status == sc.RUN_STATUS_CRASHED))
    out.append("</section>")
    return "".join(out)


def _diverged_marker(out: list[str], events: Sequence[Event], seq: int, x: Any, height: int) -> None:
    """Mark the step replay diverged at: its row shaded, a line at its start."""
    color, css, label = DIVERGED_COLOR, "diverged", "replay diverged here"
    for row, event in enumerate(events):
        if event.seq == seq:
            left = x(event.start_ns)
            y = _AXIS + row * _ROW
            out.append(
                f'<rect class="row-{css}" x="0" y="{y}" width="{_WIDTH}" height="{_ROW}" fill="{color}" '
                'fill-opacity="0.12"/>'
            )
            out.append(_edge(left, color, css, f"{label} (seq {seq})", height))
            return
    # The replay asked for a step past the recording's end.
    out.append(_edge(_WIDTH - 20, color, css, f"{label} (seq {seq}, past the recording)", height))


def _edge(left: float, color: str, css: str, label: str, height: int) -> str:
    anchor = "end" if left > _WIDTH * 0.7 else "start"
    shift = -4 if anchor == "end" else 4
    return (
        f'<line class="marker-{css}" x1="{left:.1f}" y1="{_AXIS - 4}" x2="{left:.1f}" y2="{height}" '
        f'stroke="{color}" stroke-width="3" stroke-dasharray="6 3"/>'
        f'<text x="{left + shift:.1f}" y="{_AXIS - 10}" text-anchor="{anchor}" style="fill:{color}" class="mark">'
        f"{_e(label)}</text>"
    )


def _legend(failed_at: int | None, diverged: int | None, *, crashed: bool) -> str:
    items = [
        ("model call", KIND_COLORS["model"]),
        ("tool call", KIND_COLORS["tool"]),
        ("clock, random, other", OTHER_COLOR),
    ]
    items.append(("failed step" + (f" (the run failed at seq {failed_at})" if failed_at else ""), ERROR_COLOR))
    if diverged is not None:
        items.append((f"where the replay diverged (seq {diverged})", DIVERGED_COLOR))
    if crashed:
        items.append(("where the process died", CRASH_COLOR))
    return '<p class="legend">' + "".join(f'<span style="--c:{c}">{_e(t)}</span>' for t, c in items) + "</p>"


# --- steps ------------------------------------------------------------------------------------------


def _steps(
    log: EventLog,
    costs: dict[int, StepCost],
    replayed: Replayed | None,
    failed_at: int | None,
    masker: Masker | None,
    source: str,
) -> str:
    start = log.run.start_ns
    rows = []
    for event in log:
        cost = costs.get(event.seq)
        classes = []
        if event.failed:
            classes.append("failed")
        if replayed is not None and replayed.seq == event.seq and replayed.outcome in ("diverged", "failed"):
            classes.append("diverged")
        status = f'<span class="err">{_e(str(event.error))}</span>' if event.error is not None else "ok"
        if event.seq == failed_at:
            status += " <b>(the run failed here)</b>"
        tokens = usd = "-"
        if cost is not None:
            tokens = "unknown" if cost.usage is None else _tokens(cost.usage)
            usd = "-" if cost.usd is None else _usd(cost.usd)
            if cost.usage is not None and cost.usd is None:
                usd = f"no price for {_e(cost.model)}"
        payloads = _payloads(event, masker, source, log.run_id)
        rows.append(
            f'<tr id="seq-{event.seq}" class="{" ".join(classes)}"><td class="num">{event.seq}</td>'
            f"<td>{_e(event.kind)}</td><td><code>{_e(event.key)}</code></td>"
            f'<td class="num">{_e(_offset(event.start_ns - start if event.start_ns and start else 0))}</td>'
            f'<td class="num">{_e(_duration(event.start_ns, event.end_ns))}</td>'
            f'<td class="num">{tokens}</td><td class="num">{usd}</td><td>{status}</td></tr>'
            f'<tr class="payload"><td></td><td colspan="7">{payloads}</td></tr>'
        )
    head = (
        "<tr><th>seq</th><th>kind</th><th>key</th><th>at</th><th>took</th><th>tokens</th><th>USD</th>"
        "<th>outcome</th></tr>"
    )
    body = "".join(rows)
    return f'<section><h2>Steps</h2><table class="steps"><thead>{head}</thead><tbody>{body}</tbody></table></section>'


def _payloads(event: Event, masker: Masker | None, source: str, run_id: str) -> str:
    parts = [("input", event.input_json, "input")]
    if event.output_json is not None:
        parts.append(("output", event.output_json, "output"))
    out = []
    for title, raw, part in parts:
        text = _masked_json(event, raw, part, masker)
        note = ""
        if len(text) > PAYLOAD_LIMIT:
            text = text[:PAYLOAD_LIMIT]
            note = (
                f'<p class="dim">Cut at {PAYLOAD_LIMIT // 1024} KB; spanreplay show {_e(source)} {_e(run_id)} '
                f"--seq {event.seq} prints it whole.</p>"
            )
        out.append(f"<details><summary>{title}</summary><pre>{_e(text)}</pre>{note}</details>")
    return "".join(out)


def _masked_json(event: Event, raw: bytes, part: str, masker: Masker | None) -> str:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw.decode("utf-8", "replace")
    if masker is not None and masker.enabled:
        value = masker.mask(event.kind, event.key, value, part=part).value
    return orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()


# --- helpers -------------------------------------------------------------------------------------


def _failing_seq(log: EventLog) -> int | None:
    """The step whose error the run ended with (the last one that raised it)."""
    if log.run.error is None:
        return None
    wanted = str(log.run.error)
    failed = [e.seq for e in log if e.error is not None and str(e.error) == wanted]
    return failed[-1] if failed else None


def _e(text: str) -> str:
    return html.escape(text, quote=True)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _usd(usd: float | None) -> str:
    if usd is None:
        return "-"
    return f"${usd:,.4f}" if usd >= 0.01 or usd == 0 else f"${usd:.6f}"


def _tokens(usage: Usage) -> str:
    detail = [f"in {usage.input:,}", f"out {usage.output:,}"]
    if usage.cache_read:
        detail.append(f"cache read {usage.cache_read:,}")
    if usage.cache_write:
        detail.append(f"cache write {usage.cache_write:,}")
    return f"{usage.total:,}<br><small>{', '.join(detail)}</small>"


def _time(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC") if ns else "-"


def _duration(start_ns: int, end_ns: int) -> str:
    if not start_ns or not end_ns:
        return "-"
    return _offset(end_ns - start_ns)


def _offset(ns: int) -> str:
    seconds = ns / 1e9
    if seconds < 1:
        return f"{seconds * 1000:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min"


_CSS: Final = """
:root{color-scheme:light}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;margin:0;
color:#212529;background:#fff}
header{background:#f1f3f5;padding:16px 24px;border-bottom:1px solid #dee2e6}
h1{font:600 18px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;margin:0 0 8px}
h2{font-size:16px;margin:0 0 8px}
section{padding:16px 24px}
dl.facts{display:grid;grid-template-columns:max-content 1fr max-content 1fr;gap:2px 16px;margin:8px 0}
dt{color:#495057;font-weight:600}dd{margin:0}
.badge{display:inline-block;padding:0 8px;border-radius:8px;color:#fff;background:#868e96;font-weight:600}
.status-ok{background:#2f9e44}.status-error{background:#e03131}.status-crashed{background:#ae3ec9}
.status-running{background:#f08c00}
.error-line{color:#c92a2a;font-weight:600;margin:4px 0}
.verdict{padding:6px 10px;border-radius:6px;margin:6px 0}
.verdict-ok{background:#ebfbee;border:1px solid #2f9e44}.verdict-diverged{background:#fff4e6;border:1px solid #f08c00}
.dim{color:#868e96;margin:4px 0}
svg.timeline{max-width:100%;height:auto;background:#fff}
svg text{font:11px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;fill:#343a40}
svg text.mark{font-weight:700}
svg line.grid{stroke:#e9ecef}
.legend span{margin-right:16px;white-space:nowrap}
.legend span::before{content:"";display:inline-block;width:10px;height:10px;margin-right:5px;background:var(--c)}
table.steps{border-collapse:collapse;width:100%}
table.steps th,table.steps td{padding:4px 8px;border-bottom:1px solid #e9ecef;text-align:left;vertical-align:top}
table.steps td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.steps code{white-space:nowrap}
tr.failed td{background:#fff5f5}tr.diverged td{background:#fff4e6}
tr.payload td{border-bottom:2px solid #dee2e6}
.err{color:#c92a2a}
details{margin:2px 0}summary{cursor:pointer;color:#495057}
pre{max-height:360px;overflow:auto;background:#f8f9fa;padding:8px;margin:4px 0;white-space:pre-wrap;
word-break:break-word;font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
footer{padding:16px 24px;color:#868e96;border-top:1px solid #dee2e6}
""".strip()

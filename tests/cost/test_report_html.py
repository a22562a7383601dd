"""``spanreplay report``: one run as a self-contained page, checked as HTML and in headless Chromium.

The run is a support agent calling Claude through the real SDK (against the local
Messages API server) and two tools, the second of which fails; a changed copy of
the agent replays against it and diverges at seq 2.
"""

from __future__ import annotations

import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanreplay
from helpers.cost_recordings import count_colour, read_png
from helpers.messages_api_server import MessagesAPIServer, instrument, reply, serve, text, tool_use
from spanreplay.cli import cli
from spanreplay.cost import builtin_prices
from spanreplay.cost._html import DIVERGED_COLOR, ERROR_COLOR, KIND_COLORS, PAYLOAD_LIMIT, render_run

server = pytest.fixture(serve, name="server")
instrumented = pytest.fixture(instrument, name="instrumented")

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
MTOK = 1_000_000

AGENT = """
import os

import anthropic

import spanreplay


class RefundRefused(RuntimeError):
    pass


@spanreplay.tool
def lookup_order(order):
    return {"order": order, "status": "delivered", "contact": "alice@example.com"}


@spanreplay.tool
def refund(order):
    raise RefundRefused(f"order {order} is past the refund window")


def main():
    client = anthropic.Anthropic(base_url=os.environ.get("AGENT_API", "http://127.0.0.1:9"), api_key="test-key",
                                 max_retries=0)
    question = "I want a refund for order A-17, write to alice@example.com"
    with client, spanreplay.record(agent="support"):
        messages = [{"role": "user", "content": question}]
        first = client.messages.create(model="claude-sonnet-4-6", max_tokens=256, messages=messages)
        found = lookup_order("LOOKUP")
        messages += [{"role": "assistant", "content": [b.model_dump() for b in first.content]},
                     {"role": "user", "content": f"lookup: {found}"}]
        client.messages.create(model="claude-sonnet-4-6", max_tokens=256, messages=messages)
        refund("LOOKUP")
"""


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="spanreplay")


@pytest.fixture
def recorded(
    server: MessagesAPIServer,
    trace_dir: Path,
    instrumented: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[Path, str]]:
    """The failing support run, recorded; the directory holds ``agent_v1`` (as recorded) and ``agent_v2``
    (looks up another order: diverges at seq 2)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "agent_v1.py").write_text(textwrap.dedent(AGENT).replace("LOOKUP", "A-17"))
    (tmp_path / "agent_v2.py").write_text(textwrap.dedent(AGENT).replace("LOOKUP", "A-18"))
    monkeypatch.setenv("AGENT_API", server.url)
    server.script(
        reply(tool_use("lookup_order", {"order": "A-17"}, "toolu_1"), input_tokens=1200, output_tokens=80,
              cache_write=300),
        reply(text("Let me file that refund."), input_tokens=400, output_tokens=60, cache_read=1500),
    )  # fmt: skip
    import agent_v1

    with pytest.raises(agent_v1.RefundRefused):
        agent_v1.main()
    (run,) = spanreplay.runs(trace_dir)
    yield trace_dir, run.run_id
    for name in ("agent_v1", "agent_v2"):
        sys.modules.pop(name, None)


def _report(source: Path, run_id: str, out: Path, *extra: str) -> str:
    result = invoke("report", str(source), run_id, "-o", str(out), *extra)
    assert result.exit_code == 0, result.output
    return out.read_text(encoding="utf-8")


class _Page(html.parser.HTMLParser):
    """The elements and attributes of a page, and its text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(page: str) -> _Page:
    parser = _Page()
    parser.feed(page)
    return parser


def test_the_page_draws_one_bar_per_step_with_the_failed_step_in_red(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    source, run_id = recorded
    page = parse(_report(source, run_id, tmp_path / "run.html"))
    bars = [attrs for tag, attrs in page.tags if tag == "rect" and "bar" in attrs.get("class", "").split()]
    log = spanreplay.load(source, run_id)
    assert [int(b["data-seq"]) for b in bars] == [e.seq for e in log] == [1, 2, 3, 4]
    kinds = {int(b["data-seq"]): (b["class"], b["fill"]) for b in bars}
    assert kinds[1] == ("bar kind-model", KIND_COLORS["model"])
    assert kinds[2] == ("bar kind-tool", KIND_COLORS["tool"])
    assert kinds[4] == ("bar kind-tool error", ERROR_COLOR)
    text = "".join(page.text)
    assert f"Run {run_id}" in text
    assert "agent_v1.RefundRefused: order A-17 is past the refund window" in text
    assert "(the run failed here)" in text
    # Each bar's tooltip and row link lead to the step's row.
    assert {a["href"] for tag, a in page.tags if tag == "a"} >= {f"#seq-{n}" for n in range(1, 5)}
    assert {a["id"] for tag, a in page.tags if tag == "tr" and a.get("id")} == {f"seq-{n}" for n in range(1, 5)}


def test_tokens_and_cost_per_step_add_up_to_the_runs_cost_in_spanreplay_cost(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    source, run_id = recorded
    page = _report(source, run_id, tmp_path / "run.html")
    first = (1200 * 3 + 300 * 3.75 + 80 * 15) / MTOK
    second = (400 * 3 + 1500 * 0.30 + 60 * 15) / MTOK
    assert f"${first:.6f}" in page
    assert f"${second:.6f}" in page
    assert "1,580" in page  # the first call's tokens: 1,200 + 300 + 80
    assert "1,960" in page
    cost = json.loads(invoke("cost", str(source), "--by", "run", "--json").stdout)
    (group,) = cost["groups"]
    assert group["usd"] == pytest.approx(first + second)
    assert f"${first + second:.6f}" in page or f"${first + second:,.4f}" in page
    assert f"tokens</dt><dd>{group['total_tokens']:,} " in page


def test_inputs_and_outputs_are_shown_masked_and_escaped(recorded: tuple[Path, str], tmp_path: Path) -> None:
    source, run_id = recorded
    page = _report(source, run_id, tmp_path / "run.html")
    assert "alice@example.com" not in page
    assert "&lt;email" in page  # the recorded placeholder, escaped
    assert "I want a refund for order A-17" in page
    assert page.count("<details>") == 2 * 4 - 1  # input and output each, the failed step has no output


def test_the_page_loads_nothing_from_anywhere(recorded: tuple[Path, str], tmp_path: Path) -> None:
    source, run_id = recorded
    page = _report(source, run_id, tmp_path / "run.html")
    tags = parse(page).tags
    assert not [t for t, _ in tags if t in ("script", "link", "img", "iframe", "object", "embed")]
    for tag, attrs in tags:
        for name in ("src", "href", "xlink:href", "action"):
            assert not attrs.get(name, "#").startswith(("http:", "https:", "//", "file:")), (tag, attrs)
    assert "@import" not in page
    assert not re.search(r"url\(", page)


def test_with_entry_the_point_where_the_changed_code_diverges_is_marked(
    recorded: tuple[Path, str], tmp_path: Path, server: MessagesAPIServer
) -> None:
    source, run_id = recorded
    requests = len(server.requests)
    page = _report(source, run_id, tmp_path / "run.html", "--entry", "agent_v2:main")
    assert len(server.requests) == requests  # replay made no call
    parsed = parse(page)
    assert "Replay of agent_v2:main: diverged at seq 2." in "".join(parsed.text)
    marker = [a for t, a in parsed.tags if t == "line" and a.get("class") == "marker-diverged"]
    assert len(marker) == 1
    assert marker[0]["stroke"] == DIVERGED_COLOR
    rows = [a for t, a in parsed.tags if t == "tr" and "diverged" in a.get("class", "")]
    assert [r["id"] for r in rows] == ["seq-2"]
    same = _report(source, run_id, tmp_path / "same.html", "--entry", "agent_v1:main")
    assert "Replay of agent_v1:main: reproduced at seq 4." in same
    assert "marker-diverged" not in same


def test_a_crashed_run_marks_where_the_process_died(trace_dir: Path, tmp_path: Path) -> None:
    script = tmp_path / "crash.py"
    script.write_text(
        "import os, spanreplay\n"
        f"spanreplay.configure(trace_dir={str(tmp_path / 'crashed')!r})\n"
        "with spanreplay.record(agent='doomed'):\n"
        "    spanreplay.boundary('tool', 'step', {}, lambda: 1)\n"
        "    os._exit(3)\n"
    )
    subprocess.run([sys.executable, str(script)], check=False, timeout=60)
    (run,) = spanreplay.runs(tmp_path / "crashed")
    assert run.status == "crashed"
    page = _report(tmp_path / "crashed", run.run_id, tmp_path / "crash.html")
    assert "marker-crashed" in page
    assert "the process died here" in page


def test_a_long_payload_is_cut_and_names_the_command_that_prints_it(trace_dir: Path, tmp_path: Path) -> None:
    with spanreplay.record(agent="big") as run:
        spanreplay.boundary("tool", "fetch", {"url": "x"}, lambda: "y" * (PAYLOAD_LIMIT * 2))
    page = _report(trace_dir, run.run_id, tmp_path / "big.html")
    assert f"spanreplay show {trace_dir} {run.run_id} --seq 1 prints it whole" in page
    assert len(page) < PAYLOAD_LIMIT * 1.5


def test_an_unknown_run_and_an_unwritable_file_are_one_sentence_each(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    source, run_id = recorded
    missing = invoke("report", str(source), "run_nope", "-o", str(tmp_path / "x.html"))
    assert missing.exit_code == 2
    assert "Run run_nope is not in" in missing.stderr
    blocked = tmp_path / "file"
    blocked.write_text("")
    unwritable = invoke("report", str(source), run_id, "-o", str(blocked / "run.html"))
    assert unwritable.exit_code == 2
    assert f"The report cannot be written to {blocked / 'run.html'}" in unwritable.stderr


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=40), st.text(max_size=40))
def test_any_key_or_payload_text_stays_text_on_the_page(key: str, value: str) -> None:
    log = spanreplay.EventLog(
        spanreplay.RunInfo(run_id="run_x", agent=key, status="error", start_ns=1, end_ns=10),
        (
            spanreplay.Event(
                run_id="run_x",
                seq=1,
                call_id=f"tool:{key}#0",
                kind="tool",
                key=key,
                input_json=json.dumps({"q": value}).encode(),
                output_json=json.dumps(value).encode(),
                start_ns=2,
                end_ns=5,
            ),
        ),
    )
    page = render_run(log, source="s", prices=builtin_prices())
    parsed = parse(page)
    assert [t for t, _ in parsed.tags if t == "script"] == []
    assert [a["data-seq"] for t, a in parsed.tags if t == "rect" and "data-seq" in a] == ["1"]
    # What the run held comes back as text, whatever characters it has.
    shown = "".join(parsed.text)
    assert key in shown
    assert orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() in shown


# --- in a real browser --------------------------------------------------------------------------------


def chromium() -> str:
    """Debian's chromium; fails in CI (which installs it), skips elsewhere, when it is missing."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed (apt-get install -y chromium); CI installs it in .ci/run"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


def browse(page: Path, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        # Paint everything before the screenshot is taken.
        "--run-all-compositor-stages-before-draw",
        "--virtual-time-budget=5000",
        f"--user-data-dir={profile}",
        *args,
        page.as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.slow
def test_chromium_renders_the_page_with_its_timeline_and_verdict(recorded: tuple[Path, str], tmp_path: Path) -> None:
    source, run_id = recorded
    page = tmp_path / "run.html"
    _report(source, run_id, page, "--entry", "agent_v2:main")
    dumped = browse(page, tmp_path / "profile", "--dump-dom")
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    dom = dumped.stdout
    assert f"Run {run_id}" in dom
    assert "diverged at seq 2" in dom
    assert dom.count('class="bar ') == 4


@pytest.mark.slow
def test_screenshot_shows_model_bars_the_failed_step_and_the_divergence(
    recorded: tuple[Path, str], tmp_path: Path
) -> None:
    source, run_id = recorded
    page = tmp_path / "run.html"
    _report(source, run_id, page, "--entry", "agent_v2:main")
    shot = tmp_path / "run.png"
    result = browse(page, tmp_path / "profile", "--window-size=1200,900", f"--screenshot={shot}")
    assert result.returncode == 0, result.stderr[-2000:]
    width, height, rows = read_png(shot)
    assert (width, height) == (1200, 900)
    # Not blank: the header band, text and bars give many colours.
    assert len({row[x * 4 : x * 4 + 3] for row in rows[::9] for x in range(0, width, 7)}) > 50
    timeline = (0, 250, width, 700)  # below the header: the timeline and legend
    assert count_colour(rows, KIND_COLORS["model"], tolerance=12, region=timeline) > 1500  # two model bars
    assert count_colour(rows, ERROR_COLOR, tolerance=12, region=timeline) > 100  # the failed refund
    assert count_colour(rows, DIVERGED_COLOR, tolerance=12, region=timeline) > 100  # the divergence line
    header = (0, 0, width, 40)
    assert count_colour(rows, "#f1f3f5", tolerance=2, region=header) > width * 20  # the header band

"""``jaeger+http://`` and ``tempo+http://`` sources against a query API served on 127.0.0.1.

The server (``tests/fixtures/backends.py``) answers from real recordings turned
into what Jaeger's and Tempo's APIs return; spanreplay talks to it over HTTP
exactly as it would to the real backends.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import spanreplay
from fixtures.backends import BackendServer, serving
from fixtures.recordings import record_agent, record_failing
from spanreplay import RunNotFoundError, TraceFormatError
from spanreplay.readers import iter_spans

AGENT_STEPS = [(1, "tool", "search"), (2, "clock", "now"), (3, "random", "random")] + [
    (seq, "tool", "lookup") for seq in (4, 5, 6)
]

AGENT_MODULE = """
import spanreplay

def main():
    spanreplay.boundary("tool", "search", {"q": "weather in Oslo"}, lambda: {"hits": 3})
    spanreplay.now()
    spanreplay.random()
    for i in range(3):
        spanreplay.boundary("tool", "lookup", {"i": i}, lambda i=i: {"row": i * i})
    spanreplay.boundary("tool", "fetch", {"url": "https://example.test"}, lambda: "é☃x" * 3000)
"""


def steps(log: spanreplay.EventLog) -> list[tuple[int, str, str]]:
    return [(e.seq, e.kind, e.key) for e in log]


@pytest.fixture(params=["jaeger", "tempo"])
def backend(request: pytest.FixtureRequest, trace_dir: Path) -> Iterator[BackendServer]:
    record_agent("run_a")
    record_agent("run_b", big=True)
    record_failing("run_c")
    server = BackendServer(request.param)
    server.add(iter_spans(trace_dir))
    with serving(server):
        yield server


def source(server: BackendServer, query: str = "") -> str:
    return f"{server.kind}+{server.url}{query}"


def trace_of(log: spanreplay.EventLog) -> str:
    return log.events[0].trace_id


def test_load_by_run_id_searches_the_backend(backend: BackendServer) -> None:
    log = spanreplay.load(source(backend), "run_a")
    assert steps(log) == AGENT_STEPS
    assert (log.run.status, log.run.agent) == ("ok", "support")
    assert log.events[0].input == {"q": "weather in Oslo"}
    searched = [path for path, _ in backend.requests if path.startswith("/api/search") or "tags=" in path]
    assert searched, "the run was found by searching for its run id"


def test_load_by_trace_id_fetches_that_trace(backend: BackendServer) -> None:
    trace_id = trace_of(spanreplay.load(source(backend), "run_b"))
    backend.requests.clear()
    log = spanreplay.load(source(backend), trace_id)
    assert log.run_id == "run_b"
    assert log.events[-1].output == "é☃x" * 3000  # a chunked payload through each backend's mapping
    assert any(trace_id in path for path, _ in backend.requests)


def test_runs_lists_the_runs_in_the_backend(backend: BackendServer) -> None:
    found = spanreplay.runs(source(backend))
    assert sorted((r.run_id, r.status) for r in found) == [("run_a", "ok"), ("run_b", "ok"), ("run_c", "error")]
    assert next(r for r in found if r.run_id == "run_c").error == "fixtures.recordings.ToolFailed: card declined"


def test_replay_from_the_backend_serves_the_recording(backend: BackendServer, tmp_path: Path) -> None:
    (tmp_path / "agent_b.py").write_text(AGENT_MODULE)
    sys.path.insert(0, str(tmp_path))
    try:
        import agent_b

        with spanreplay.replay(source(backend), "run_b") as run:
            agent_b.main()
        assert run.outcome == "completed"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("agent_b", None)


def test_unknown_run_names_the_backend_and_the_way_to_widen_the_search(backend: BackendServer) -> None:
    with pytest.raises(RunNotFoundError, match=r"Run run_zz is not in .*: no trace of the last 7d holds a span"):
        spanreplay.load(source(backend), "run_zz")
    with pytest.raises(RunNotFoundError, match=r"has no trace 0123456789abcdef0123456789abcdef; check the id"):
        spanreplay.load(source(backend), "0123456789abcdef0123456789abcdef")


def test_auth_headers_come_from_the_environment(backend: BackendServer, monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = f"SPANREPLAY_{backend.kind.upper()}"
    backend.required_headers = {"Authorization": "Bearer s3cret", "X-Scope-OrgID": "tenant 1"}
    with pytest.raises(TraceFormatError) as info:
        spanreplay.load(source(backend), "run_a")
    message = str(info.value)
    assert "HTTP 401" in message
    assert f"set {prefix}_TOKEN to a bearer token, or {prefix}_HEADERS" in message
    monkeypatch.setenv(f"{prefix}_TOKEN", "s3cret")
    monkeypatch.setenv(f"{prefix}_HEADERS", "X-Scope-OrgID=tenant%201")
    assert steps(spanreplay.load(source(backend), "run_a")) == AGENT_STEPS
    assert "s3cret" not in message


def test_malformed_header_variable_is_named_without_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPANREPLAY_TEMPO_HEADERS", "Authorization: Bearer s3cret")
    with pytest.raises(TraceFormatError) as info:
        spanreplay.load("tempo+http://127.0.0.1:9", "run_a")
    assert "SPANREPLAY_TEMPO_HEADERS holds an entry that is not name=value" in str(info.value)
    assert "s3cret" not in str(info.value)


def test_jaeger_search_is_limited_to_the_named_services(trace_dir: Path) -> None:
    record_agent("run_a")
    server = BackendServer("jaeger")
    server.add(iter_spans(trace_dir))
    with serving(server):
        assert steps(spanreplay.load(source(server, "?service=test-agent"), "run_a")) == AGENT_STEPS
        assert not any(path == "/api/services" for path, _ in server.requests)
        with pytest.raises(RunNotFoundError, match=r"\?service=NAME for Jaeger"):
            spanreplay.load(source(server, "?service=billing&lookback=12h"), "run_a")


def test_tempo_before_api_v2_is_read_through_api_traces(trace_dir: Path) -> None:
    record_agent("run_a")
    server = BackendServer("tempo", v2=False)
    server.add(iter_spans(trace_dir))
    with serving(server):
        assert steps(spanreplay.load(source(server), "run_a")) == AGENT_STEPS
    assert any(path.startswith("/api/traces/") for path, _ in server.requests)


def test_tempo_partial_trace_is_refused_naming_max_bytes_per_trace(trace_dir: Path) -> None:
    record_agent("run_a")
    server = BackendServer("tempo")
    spans = list(iter_spans(trace_dir))
    server.add(spans)
    server.partial = {spans[0].trace_id}
    with serving(server), pytest.raises(TraceFormatError) as info:
        spanreplay.load(source(server), "run_a")
    message = str(info.value)
    assert "Tempo returned this trace with status PARTIAL" in message
    assert "raise max_bytes_per_trace" in message


def test_unreachable_backend_says_which_port_it_expected() -> None:
    with pytest.raises(TraceFormatError, match=r"Cannot reach Jaeger at jaeger\+http://127\.0\.0\.1:9 \(.*16686"):
        spanreplay.runs("jaeger+http://127.0.0.1:9")


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("tempo+http://", "names no host"),
        ("tempo+http://host:port", "has a port that is not a number"),
        ("tempo+http://host:3200?lookback=7w", "lookback='7w' in"),
        ("tempo+http://host:3200?limit=0", "limit='0' in"),
        ("jaeger+http://host:16686?servce=x", "has the unknown setting 'servce'"),
    ],
)
def test_bad_backend_urls_fail_with_one_sentence(url: str, fragment: str) -> None:
    with pytest.raises(TraceFormatError, match=fragment):
        spanreplay.runs(url)


def test_cli_runs_show_and_replay_read_from_the_backend(backend: BackendServer, tmp_path: Path) -> None:
    (tmp_path / "agent_cli.py").write_text(AGENT_MODULE)
    url = source(backend)

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "spanreplay.cli", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )

    listed = cli("runs", url)
    assert listed.returncode == 0, listed.stderr
    assert "run_a" in listed.stdout
    assert "run_c" in listed.stdout
    shown = cli("show", url, "run_a")
    assert shown.returncode == 0, shown.stderr
    assert "lookup" in shown.stdout
    replayed = cli("replay", url, "run_b", "--entry", "agent_cli:main")
    assert replayed.returncode == 0, replayed.stderr

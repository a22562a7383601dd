"""Running an agent under ``opentelemetry-instrument``, as zero-code mode's users do."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import sys
from pathlib import Path

from helpers.messages_api_server import MessagesAPIServer

ENTRY_POINT = "spanreplay.instrumentation.anthropic:AnthropicInstrumentor"


def instrument_command() -> list[str]:
    """``opentelemetry-instrument`` and the Python it runs: the ones next to this interpreter."""
    found = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    assert found is not None, "opentelemetry-instrument is not installed next to this Python"
    return [found, sys.executable]


def plugin_path(tmp_path: Path) -> str:
    """A PYTHONPATH entry that registers the entry point when the installed metadata lacks it.

    pyproject.toml declares it; an environment installed before that (editable
    installs keep old metadata) gets the same entry point from a dist-info here.
    """
    registered = [ep.value for ep in importlib.metadata.entry_points(group="opentelemetry_instrumentor")]
    if ENTRY_POINT in registered:
        return ""
    dist = tmp_path / "site" / "spanreplay_entry_point-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: spanreplay-entry-point\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(f"[opentelemetry_instrumentor]\nanthropic = {ENTRY_POINT}\n")
    return str(tmp_path / "site")


def instrument_env(tmp_path: Path, server: MessagesAPIServer) -> dict[str, str]:
    """The environment of an agent run under opentelemetry-instrument, spanreplay's variables left to the test."""
    env = {
        **os.environ,
        # The test run's own PYTHONPATH too (a checkout's src/ ahead of an installed copy).
        "PYTHONPATH": os.pathsep.join(p for p in (plugin_path(tmp_path), os.environ.get("PYTHONPATH", "")) if p),
        "AGENT_BASE_URL": server.url,
        "AGENT_TOOL_LOG": str(tmp_path / "tools.log"),
        "OTEL_TRACES_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_LOGS_EXPORTER": "none",
    }
    for name in ("ANTHROPIC_API_KEY", "SPANREPLAY_SOURCE", "SPANREPLAY_RUN_ID", "SPANREPLAY_RUN_SCOPE"):
        env.pop(name, None)
    return env

"""OpenInference's and OpenLLMetry's Anthropic instrumentors, in a virtual environment of their own.

Both register an ``anthropic`` instrumentor entry point under
``opentelemetry_instrumentor``, as spanreplay does: installed beside spanreplay,
``opentelemetry-instrument`` would pick one of the three. So they live in a
test-only virtual environment, created on first use and kept between runs at
``~/.cache/spanreplay-foreign-venv/<key>`` (``SPANREPLAY_FOREIGN_VENV`` moves it;
the key is a hash of the pinned versions). ``record`` runs ``foreign_agent``
there against a Messages API server and returns the Collector proto file the
instrumentor's spans were written to.

``python tests/helpers/foreign_instrumentors.py`` builds the environment (CI runs
it before the tests); ``... --fixtures DIR`` records the fixture files again.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from hashlib import sha256
from pathlib import Path
from typing import Final

HERE = Path(__file__).resolve().parent
PINS: Final = (
    "anthropic==2.15.0",
    "openinference-instrumentation-anthropic==3.1.0",
    "opentelemetry-instrumentation-anthropic==0.62.4",
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-proto-common==1.45.2",
)
# anthropic-sdk: no instrumentor, the SDK's own spans (its open_telemetry option).
INSTRUMENTORS: Final = ("openinference", "openllmetry", "anthropic-sdk")
INSTALL_TIMEOUT_S: Final = 600
RECORD_TIMEOUT_S: Final = 120


class InstrumentorsUnavailable(RuntimeError):
    """The environment could not be built here; the message says why and what to do."""


def venv_dir() -> Path:
    base = os.environ.get("SPANREPLAY_FOREIGN_VENV") or Path.home() / ".cache" / "spanreplay-foreign-venv"
    return Path(base) / sha256("\n".join(PINS).encode()).hexdigest()[:16]


def ensure_installed() -> Path:
    """The environment's python, building the environment first if needed."""
    venv = venv_dir()
    python = venv / "bin" / "python"
    ready = venv / ".ready"
    if ready.exists():
        return python
    try:
        venv.parent.mkdir(parents=True, exist_ok=True)
        lock = open(venv.parent / f"{venv.name}.lock", "w")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise InstrumentorsUnavailable(
            f"cannot create the instrumentors' virtualenv at {venv} ({exc.strerror or exc}); "
            "set SPANREPLAY_FOREIGN_VENV to a writable directory."
        ) from None
    with lock:
        # Two test processes (or CI jobs on one runner) must not build one venv at once.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return python
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PINS],
        ]
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                raise InstrumentorsUnavailable(
                    f"installing {' '.join(PINS)} into {venv} took longer than {INSTALL_TIMEOUT_S} s; "
                    "check the connection to PyPI."
                ) from None
            if done.returncode != 0:
                raise InstrumentorsUnavailable(
                    f"installing the instrumentors into {venv} failed ({' '.join(step[:4])} exited "
                    f"{done.returncode}): {(done.stderr or done.stdout).strip()[-1500:]}"
                )
        ready.touch()
    return python


def record(which: str, url: str, out: Path, *, stream: bool = False) -> dict[str, object]:
    """Record ``foreign_agent`` with ``which`` instrumentor against ``url`` into ``out``.

    Returns what the agent printed: its final ``answer`` and the ``tools`` it ran.
    """
    python = ensure_installed()
    command = [str(python), str(HERE / "foreign_recorder.py"), which, url, str(out)] + (["--stream"] if stream else [])
    done = subprocess.run(command, capture_output=True, text=True, timeout=RECORD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise AssertionError(f"recording with {which} failed (exit {done.returncode}): {done.stderr[-3000:]}")
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def fixture_name(which: str, *, stream: bool) -> str:
    return f"{which}-{'stream' if stream else 'create'}.binpb"


def record_fixtures(directory: Path, which: tuple[str, ...] = INSTRUMENTORS) -> None:
    """Record the fixture files of ``which`` into ``directory`` against the support model."""
    sys.path.insert(0, str(HERE.parent.parent / "src"))
    from spanreplay.testing.messages_api import MessagesAPIServer, support_model

    directory.mkdir(parents=True, exist_ok=True)
    with MessagesAPIServer(default=support_model) as server:
        for name in which:
            for stream in (False, True):
                result = record(name, server.url, directory / fixture_name(name, stream=stream), stream=stream)
                print(fixture_name(name, stream=stream), json.dumps(result))


def main(argv: list[str]) -> int:
    started = time.monotonic()
    with contextlib.suppress(ValueError):
        index = argv.index("--fixtures")
        record_fixtures(Path(argv[index + 1]), tuple(argv[index + 2 :]) or INSTRUMENTORS)
        return 0
    python = ensure_installed()
    print(f"foreign instrumentors ready in {python.parent.parent} ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

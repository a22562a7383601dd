"""Arize Phoenix as a real OTLP receiver for tests: its own virtualenv, free ports, spans read back over REST.

Phoenix pins other OpenTelemetry versions than spanreplay's, so it lives in a
virtual environment of its own, created on first use and kept between runs at
``~/.cache/spanreplay-phoenix-venv/<version>`` (``SPANREPLAY_PHOENIX_VENV`` moves
it). ``Phoenix`` starts its server on 127.0.0.1 with free ports and a temporary
working directory (SQLite), takes OTLP over HTTP/protobuf (``/v1/traces``) and
gRPC, and hands spans back through its REST API:

``GET /v1/projects/{project}/spans/otlpv1?attribute=spanreplay.run.id:"RUN"``
(``span_search_otlpv1`` in ``phoenix/server/api/routers/v1/spans.py``) answers
OTLP-shaped spans in snake case, pages by ``cursor``, and filters by attribute.

What Phoenix changes on the way, and how ``span_records`` undoes it:

- times are kept to the microsecond (a datetime) and returned as float-derived
  nanoseconds: rounded back to the microsecond Phoenix stored;
- 64-bit numbers may come back as text (``int_value`` and the times are
  ``int | str`` in its schema): turned back into integers;
- OpenInference attributes it derives from the GenAI ones (``llm.*``,
  ``openinference.span.kind``, ``tool.name``...): dropped, by the list of
  OpenInference's semantic conventions read from the Phoenix installation;
- it keeps neither the span kind nor the resource: those stay empty.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from hashlib import sha256
from pathlib import Path
from typing import Any, Final

from spanreplay.model.events import EventLog
from spanreplay.model.spans import SpanEventRecord, SpanRecord

PHOENIX_VERSION: Final = "20.26.1"
INSTALL_TIMEOUT_S: Final = 900
START_TIMEOUT_S: Final = 120
_CONVENTIONS_FILE: Final = "openinference-conventions.json"


class PhoenixUnavailable(RuntimeError):
    """Phoenix could not be installed or started here; the message says why and what to do."""


def venv_dir() -> Path:
    base = os.environ.get("SPANREPLAY_PHOENIX_VENV") or Path.home() / ".cache" / "spanreplay-phoenix-venv"
    return Path(base) / PHOENIX_VERSION


def ensure_installed() -> tuple[Path, float]:
    """The Phoenix venv's python, installing it first if needed, and the seconds the install took (0 if cached)."""
    venv = venv_dir()
    python = venv / "bin" / "python"
    ready = venv / _CONVENTIONS_FILE
    if ready.exists():
        return python, 0.0
    try:
        venv.parent.mkdir(parents=True, exist_ok=True)
        lock = open(venv.parent / f"{PHOENIX_VERSION}.lock", "w")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise PhoenixUnavailable(
            f"cannot create the Phoenix virtualenv at {venv} ({exc.strerror or exc}); "
            "set SPANREPLAY_PHOENIX_VENV to a writable directory."
        ) from None
    with lock:
        # Two test processes (or CI jobs on one runner) must not build one venv at once.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists():
            return python, 0.0
        started = time.monotonic()
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             f"arize-phoenix=={PHOENIX_VERSION}"],
            [str(python), "-c", "import json, sys; from phoenix.trace.attributes import SEMANTIC_CONVENTIONS as s; "
             "json.dump(sorted(s), open(sys.argv[1], 'w'))", str(ready)],
        ]  # fmt: skip
        for step in steps:
            try:
                done = subprocess.run(step, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                raise PhoenixUnavailable(
                    f"installing arize-phoenix=={PHOENIX_VERSION} into {venv} took longer than "
                    f"{INSTALL_TIMEOUT_S} s; check the connection to PyPI."
                ) from None
            if done.returncode != 0:
                raise PhoenixUnavailable(
                    f"installing arize-phoenix=={PHOENIX_VERSION} into {venv} failed ({' '.join(step[:4])} exited "
                    f"{done.returncode}): {(done.stderr or done.stdout).strip()[-1500:]}"
                )
        return python, time.monotonic() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Phoenix:
    """A Phoenix server on 127.0.0.1, running in its own venv and working directory."""

    def __init__(self, working_dir: Path, python: Path) -> None:
        self.working_dir = working_dir
        self.python = python
        self.http_port = free_port()
        self.grpc_port = free_port()
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.grpc_url = f"http://127.0.0.1:{self.grpc_port}"
        self.log = working_dir / "phoenix.log"
        self.startup_s = 0.0
        self.install_s = 0.0
        self._conventions = tuple(json.loads((python.parent.parent / _CONVENTIONS_FILE).read_text()))
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Phoenix:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PHOENIX_"))}
        env.update(
            PHOENIX_HOST="127.0.0.1",
            PHOENIX_PORT=str(self.http_port),
            PHOENIX_GRPC_PORT=str(self.grpc_port),
            PHOENIX_WORKING_DIR=str(self.working_dir),
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
        )
        started = time.monotonic()
        with open(self.log, "wb") as log:
            self._process = subprocess.Popen(
                [str(self.python), "-m", "phoenix.server.main", "serve"],
                cwd=self.working_dir,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            self._wait_until_up(started + START_TIMEOUT_S)
        except BaseException:
            self.__exit__()
            raise
        self.startup_s = time.monotonic() - started
        return self

    def _wait_until_up(self, deadline: float) -> None:
        assert self._process is not None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise PhoenixUnavailable(
                    f"Phoenix exited with status {self._process.returncode} while starting; its log "
                    f"({self.log}) ends: {self._log_tail()}"
                )
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/healthz", timeout=2) as answer:
                if answer.status == 200 and self._grpc_listens():
                    return
            time.sleep(0.25)
        raise PhoenixUnavailable(
            f"Phoenix did not answer on {self.url}/healthz within {START_TIMEOUT_S} s; its log ends: {self._log_tail()}"
        )

    def _grpc_listens(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.grpc_port), timeout=1).close()
        except OSError:
            return False
        return True

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-2000:]
        except OSError:
            return "(no log)"

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)

    # --- reading spans back ----------------------------------------------------------

    def otlp_spans(self, run_id: str, project: str = "default") -> list[dict[str, Any]]:
        """Every span of one run as Phoenix's ``spans/otlpv1`` endpoint answers them (all pages)."""
        spans: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = [("limit", "1000"), ("attribute", f"spanreplay.run.id:{json.dumps(run_id)}")]
            if cursor:
                query.append(("cursor", cursor))
            path = f"/v1/projects/{urllib.parse.quote(project)}/spans/otlpv1?{urllib.parse.urlencode(query)}"
            with urllib.request.urlopen(self.url + path, timeout=30) as answer:
                page = json.load(answer)
            spans.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return spans

    def wait_for_spans(self, run_id: str, count: int, timeout: float = 60) -> list[dict[str, Any]]:
        """The run's spans once Phoenix holds ``count`` of them (it inserts in batches, a moment later)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.otlp_spans(run_id)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.2)

    def span_records(self, run_id: str, count: int) -> list[SpanRecord]:
        return [self.span_record(span) for span in self.wait_for_spans(run_id, count)]

    def span_record(self, span: dict[str, Any]) -> SpanRecord:
        """One ``spans/otlpv1`` span as a SpanRecord, Phoenix's changes undone (see the module docstring)."""
        status = span.get("status") or {}
        return SpanRecord(
            trace_id=span["trace_id"],
            span_id=span["span_id"],
            parent_span_id=span.get("parent_span_id") or None,
            name=span["name"],
            start_ns=_microsecond(span.get("start_time_unix_nano")),
            end_ns=_microsecond(span.get("end_time_unix_nano")),
            attributes={
                kv["key"]: _value(kv["value"])
                for kv in span.get("attributes") or ()
                if not self.derived_by_phoenix(kv["key"])
            },
            status_code=int(status.get("code") or 0),
            status_message=status.get("message") or "",
            events=tuple(
                SpanEventRecord(
                    name=event.get("name") or "",
                    time_ns=_microsecond(event.get("time_unix_nano")),
                    attributes={kv["key"]: _value(kv["value"]) for kv in event.get("attributes") or ()},
                )
                for event in span.get("events") or ()
            ),
            origin=f"phoenix {self.url} span {span['span_id']}",
        )

    def derived_by_phoenix(self, key: str) -> bool:
        """An OpenInference attribute, which Phoenix derives from the GenAI ones on the way in."""
        return any(key == name or key.startswith(f"{name}.") for name in self._conventions)


def assert_same_run(remote: EventLog, local: EventLog) -> None:
    """The event log read back from Phoenix is the trace file's: same steps, order, payloads and digests.

    Only what Phoenix does not keep is left out: times below the microsecond
    (compared to within 1 µs) and the resource (``RunInfo.service_name``).
    """

    def comparable(log: EventLog) -> tuple[Any, ...]:
        run = dataclasses.replace(log.run, service_name="", start_ns=0, end_ns=0)
        return (run, tuple(dataclasses.replace(e, start_ns=0, end_ns=0) for e in log))

    def times(log: EventLog) -> list[int]:
        return [log.run.start_ns, log.run.end_ns, *(t for e in log for t in (e.start_ns, e.end_ns))]

    def digests(log: EventLog) -> list[tuple[int, str, str, str]]:
        return [
            (e.seq, e.call_id, sha256(e.input_json).hexdigest(), sha256(e.output_json or b"").hexdigest()) for e in log
        ]

    assert comparable(remote) == comparable(local)
    assert digests(remote) == digests(local)
    assert all(abs(a - b) <= 1000 for a, b in zip(times(remote), times(local), strict=True))


def _microsecond(value: int | str | None) -> int:
    """Phoenix's float-derived nanoseconds, back on the microsecond it stored."""
    if value in (None, ""):
        return 0
    return round(int(value) / 1000) * 1000


def _value(value: dict[str, Any]) -> Any:
    """An OTLP-shaped AnyValue from Phoenix (snake case, every field present, most of them null)."""
    if value.get("string_value") is not None:
        return value["string_value"]
    if value.get("bool_value") is not None:
        return bool(value["bool_value"])
    if value.get("int_value") is not None:
        return int(value["int_value"])  # an int, or its decimal text
    if value.get("double_value") is not None:
        return float(value["double_value"])  # a float, or "inf" / "nan" as text
    if value.get("array_value") is not None:
        return [_value(v) for v in value["array_value"].get("values") or ()]
    if value.get("bytes_value") is not None:
        return bytes.fromhex(value["bytes_value"])  # Phoenix writes bytes as hex, not base64
    return None


_shared: Phoenix | PhoenixUnavailable | None = None


def shared_phoenix() -> Phoenix:
    """One Phoenix for the whole test session (it takes seconds to start), stopped at exit.

    Raises:
        PhoenixUnavailable: it could not be installed or started (again, for every caller).
    """
    global _shared
    if isinstance(_shared, Phoenix):
        return _shared
    if isinstance(_shared, PhoenixUnavailable):
        raise _shared
    try:
        python, installed_s = ensure_installed()
        working_dir = Path(tempfile.mkdtemp(prefix="spanreplay-phoenix-"))
        phoenix = Phoenix(working_dir, python).__enter__()
    except PhoenixUnavailable as exc:
        _shared = exc
        raise
    phoenix.install_s = installed_s
    atexit.register(_stop, phoenix)
    _shared = phoenix
    return phoenix


def phoenix_for_tests() -> Phoenix:
    """The shared Phoenix; where it cannot run, the test skips, except under ``CI=true``, where it fails."""
    import pytest

    try:
        return shared_phoenix()
    except PhoenixUnavailable as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"Phoenix is needed in CI and could not run: {exc}")
        pytest.skip(f"Phoenix could not run here: {exc}")


def _stop(phoenix: Phoenix) -> None:
    phoenix.__exit__()
    shutil.rmtree(phoenix.working_dir, ignore_errors=True)


if __name__ == "__main__":
    # CI installs Phoenix ahead of the tests, so the install time shows on its own line:
    #   python tests/helpers/phoenix_receiver.py
    try:
        python, took = ensure_installed()
    except PhoenixUnavailable as exc:
        sys.exit(f"error: {exc}")
    print(
        f"arize-phoenix {PHOENIX_VERSION} ready in {python.parent.parent}"
        + (f" (installed in {took:.0f} s)" if took else " (cached)")
    )

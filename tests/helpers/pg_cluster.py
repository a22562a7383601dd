"""A Postgres cluster of a test's own: initdb in a temporary directory, on a free port.

Fault tests stop, freeze (SIGSTOP) and slow this cluster, never the shared
server the other tests use. Without the server binaries (``initdb``,
``pg_ctl``) the tests that ask for it skip, except in CI (CI=true), where they
fail. Run as root, the cluster runs as the ``postgres`` user, since Postgres
refuses to run as root.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.postgres import IN_CI


def server_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (the newest installed version), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Cluster:
    """One initdb'ed cluster: ``start``, ``stop``, ``freeze``/``thaw``, and its ``dsn``."""

    def __init__(self, binaries: Path, root: Path) -> None:
        self.binaries = binaries
        self.root = root
        self.data = root / "data"
        self.port = _free_port()
        self.dsn = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_postgres: list[str] = []
        if os.geteuid() == 0:
            self._as_postgres = ["runuser", "-u", "postgres", "--"]
            shutil.chown(root, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync")

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._as_postgres, str(self.binaries / tool), *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            timeout=60,
        )

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        log = str(self.root / "log")
        self._run("pg_ctl", "-D", str(self.data), "-l", log, "-w", "-t", "30", "-o", options, "start")

    def stop(self) -> None:
        self.thaw()
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    @property
    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()

    def pids(self) -> list[int]:
        """The postmaster and every process it started (the backends serving the connections)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        children = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError):
                    # The parent pid is the 2nd field after the parenthesised command name.
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                        children.append(int(entry.name))
        return [postmaster, *children]

    def freeze(self) -> None:
        """SIGSTOP the whole server: connections stay open, nothing answers."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        if self.running:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)


@contextlib.contextmanager
def own_cluster() -> Iterator[Cluster]:
    """A started cluster, stopped and removed afterwards whatever the test did to it."""
    binaries = server_binaries()
    if binaries is None:
        raise FileNotFoundError("initdb is not installed (apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="spanreplay-pg-"))
    try:
        cluster = Cluster(binaries, root)
        cluster.start()
        try:
            yield cluster
        finally:
            if cluster.running:
                cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def require_server_binaries() -> None:
    """Skip the test (fail it in CI) when no cluster of its own can be started."""
    if server_binaries() is None:
        message = "initdb is not installed, so no Postgres cluster of the test's own can be started"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)

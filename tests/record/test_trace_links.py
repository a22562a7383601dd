"""A link planted in a shared trace folder never redirects a run's trace or salt.

Each test plants a real symbolic link where spanreplay will write next (the run's
trace file, the salt folder, a salt file) and checks that the link's target is
left byte for byte as it was, that recording carried on, and what it said.
"""

from __future__ import annotations

import logging
import os
import stat
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

import spanreplay
from spanreplay.model.private_files import TraceFileLinkError, make_private_dirs
from spanreplay.run.salts import SALT_DIR, create_salt, read_salt, salt_path

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="symbolic links and O_NOFOLLOW")

RUN_ID = "run_20270301_090000_0badc0de"
VICTIM = b"export PATH=/usr/bin\n"


@spanreplay.tool
def lookup(order: int) -> dict[str, int]:
    return {"order": order}


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "outside" / "profile.sh"
    victim.parent.mkdir()
    victim.write_bytes(VICTIM)
    return victim


def test_a_link_planted_as_the_runs_trace_file_is_refused_and_its_target_untouched(
    tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    trace_dir = tmp_path / "traces"
    trace_dir.mkdir()
    victim = _victim(tmp_path)
    (trace_dir / f"{RUN_ID}.jsonl").symlink_to(victim)
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=False)
    with caplog.at_level(logging.WARNING, logger="spanreplay"), spanreplay.record(agent="a", run_id=RUN_ID):
        assert lookup(7) == {"order": 7}  # the agent goes on
    assert victim.read_bytes() == VICTIM
    assert (trace_dir / f"{RUN_ID}.jsonl").is_symlink()  # left as it was, not replaced either
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "symbolic link" in r.getMessage()]
    assert len(warnings) == 1  # one warning for the run, not one per span
    message = warnings[0].getMessage()
    assert f"{trace_dir / RUN_ID}.jsonl is a symbolic link (to {str(victim)!r})" in message
    assert f"did not record run {RUN_ID} to a file" in message
    assert warnings[0].exc_info is None


def test_a_dangling_link_does_not_create_its_target(tmp_path: Path, provider: TracerProvider) -> None:
    trace_dir = tmp_path / "traces"
    trace_dir.mkdir()
    target = tmp_path / "outside" / "planted.jsonl"
    target.parent.mkdir()
    (trace_dir / f"{RUN_ID}.jsonl").symlink_to(target)
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=False)
    with spanreplay.record(agent="a", run_id=RUN_ID):
        lookup(1)
    assert not target.exists()


def test_strict_recording_raises_the_refusal(tmp_path: Path, provider: TracerProvider) -> None:
    trace_dir = tmp_path / "traces"
    trace_dir.mkdir()
    victim = _victim(tmp_path)
    (trace_dir / f"{RUN_ID}.jsonl").symlink_to(victim)
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=True)
    with pytest.raises(TraceFileLinkError, match="is a symbolic link"), spanreplay.record(agent="a", run_id=RUN_ID):
        lookup(1)
    assert victim.read_bytes() == VICTIM


def test_a_trace_folder_that_is_a_link_the_user_made_is_still_used(tmp_path: Path, provider: TracerProvider) -> None:
    # Only the file's own name is refused as a link: a trace_dir pointing elsewhere is a user's choice.
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "traces").symlink_to(real)
    spanreplay.configure(trace_dir=tmp_path / "traces", tracer_provider=provider, raise_internal_errors=True)
    with spanreplay.record(agent="a", run_id=RUN_ID):
        lookup(1)
    assert (real / f"{RUN_ID}.jsonl").is_file()


def test_a_salt_file_planted_as_a_link_is_refused_and_not_read(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = salt_path(tmp_path / "traces", RUN_ID)
    path.parent.mkdir(parents=True)
    path.symlink_to(victim)
    with pytest.raises(TraceFileLinkError, match="is a symbolic link"):
        create_salt(tmp_path / "traces", RUN_ID)
    assert victim.read_bytes() == VICTIM
    # A salt that is a link is not read either: its target could be any file of the right shape.
    victim.write_text("ab" * 32 + "\n")
    assert read_salt(path) is None


def test_a_salt_folder_planted_as_a_link_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    trace_dir = tmp_path / "traces"
    trace_dir.mkdir()
    (trace_dir / SALT_DIR).symlink_to(outside)
    with pytest.raises(TraceFileLinkError, match=f"{SALT_DIR} is a symbolic link"):
        create_salt(trace_dir, RUN_ID)
    assert list(outside.iterdir()) == []


def test_a_planted_salt_link_costs_the_run_its_checks_with_one_warning(
    tmp_path: Path, provider: TracerProvider, caplog: pytest.LogCaptureFixture
) -> None:
    trace_dir = tmp_path / "traces"
    outside = tmp_path / "outside"
    outside.mkdir()
    trace_dir.mkdir()
    (trace_dir / SALT_DIR).symlink_to(outside)
    spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=False)

    @spanreplay.tool
    def email(to: str) -> str:
        return "sent"

    with caplog.at_level(logging.WARNING, logger="spanreplay"), spanreplay.record(agent="a", run_id=RUN_ID):
        email("ada@example.com")
        email("grace@example.com")
    assert list(outside.iterdir()) == []
    warnings = [r.getMessage() for r in caplog.records if "symbolic link" in r.getMessage()]
    assert len(warnings) == 1
    assert f"records run {RUN_ID} without exact checks" in warnings[0]
    assert (trace_dir / f"{RUN_ID}.jsonl").is_file()  # the trace itself is written


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_folders_spanreplay_makes_are_owner_only_and_a_users_folder_keeps_its_mode(
    tmp_path: Path, provider: TracerProvider
) -> None:
    users = tmp_path / "shared"
    users.mkdir()
    os.chmod(users, 0o755)
    trace_dir = users / "deep" / "traces"
    umask = os.umask(0o277)  # a umask that would leave a folder its owner cannot write
    try:
        spanreplay.configure(trace_dir=trace_dir, tracer_provider=provider, raise_internal_errors=True)
        with spanreplay.record(agent="a"):
            lookup(1)
    finally:
        os.umask(umask)
    assert _mode(users) == 0o755
    assert _mode(users / "deep") == 0o700
    assert _mode(trace_dir) == 0o700
    made = tmp_path / "salts" / SALT_DIR
    create_salt(made.parent, RUN_ID)
    assert _mode(made.parent) == 0o700
    assert _mode(made) == 0o700
    assert _mode(salt_path(made.parent, RUN_ID)) == 0o600


def test_make_private_dirs_leaves_an_existing_folder_alone(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o751)
    make_private_dirs(tmp_path)
    assert _mode(tmp_path) == 0o751

"""``spanreplay prune`` on hostile trace files: it deletes nothing outside the trace directory.

Prune deleted ``.spanreplay-salts/{run id}.salt`` with the run id read from a
file's contents, so a run id of ``/abs/path/victim`` or ``../../outside/victim``
deleted ``victim.salt`` outside the directory. Each trace below is written by hand
(helpers/hand_made_traces.py); prune leaves a file whose run id is no plain name
as it is, warns naming the file and the run id, and prunes the rest.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.hand_made_traces import write_run
from spanreplay.cli import cli
from spanreplay.run.salts import SALT_DIR

OLD_RUN = "run_20200101_000000_0a0a0a0a"


def prune(trace_dir: Path, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["prune", str(trace_dir), *args])
    assert result.exit_code == 0, result.output
    return result


def plant(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not prune's to delete\n")
    return path


def salt(trace_dir: Path, run_id: str) -> Path:
    return plant(trace_dir / SALT_DIR / f"{run_id}.salt")


@pytest.mark.parametrize("dry_run", [False, True])
def test_run_ids_that_lead_out_of_the_trace_dir_delete_nothing_there(tmp_path: Path, dry_run: bool) -> None:
    trace_dir = tmp_path / "traces"
    absolute = str(tmp_path / "abs" / "victim")
    relative = "../../outside/victim"  # from traces/.spanreplay-salts/ to tmp_path/outside/
    victims = [
        plant(tmp_path / "abs" / "victim"),
        plant(tmp_path / "abs" / "victim.salt"),
        plant(tmp_path / "outside" / "victim"),
        plant(tmp_path / "outside" / "victim.salt"),
    ]
    hostile = [
        write_run(trace_dir / "absolute.jsonl", absolute),
        write_run(trace_dir / "relative.jsonl", relative, error=("ValueError", "builtins", "bad")),
    ]
    # An ordinary expired run beside them, with its salt: pruned as before.
    write_run(trace_dir / f"{OLD_RUN}.jsonl", OLD_RUN)
    own_salt = salt(trace_dir, OLD_RUN)

    result = prune(trace_dir, *(["--dry-run"] if dry_run else []))

    assert all(victim.read_text() == "not prune's to delete\n" for victim in victims)
    assert all(path.is_file() for path in hostile)
    output = " ".join(result.output.split())
    for path, run_id in zip(hostile, (absolute, relative), strict=True):
        assert f"warning: kept {path}: The run id {run_id!r} in the trace file {path} cannot name a trace file" in (
            output
        )
    assert "give the run another id, or leave this trace out." in output
    verb = "Would remove" if dry_run else "Removed"
    assert f"{verb} 1 run(s) (1 ok older than 7d, 0 failed or crashed older than 90d)" in output
    assert (trace_dir / f"{OLD_RUN}.jsonl").exists() is dry_run
    assert own_salt.exists() is dry_run


def test_a_salt_folder_that_links_out_of_the_trace_dir_is_left_alone(tmp_path: Path) -> None:
    trace_dir = tmp_path / "traces"
    outside = tmp_path / "outside"
    victim = plant(outside / f"{OLD_RUN}.salt")  # an orphan salt by its name, old enough to go
    trace_dir.mkdir()
    (trace_dir / SALT_DIR).symlink_to(outside)
    result = prune(trace_dir)
    assert victim.read_text() == "not prune's to delete\n"
    output = " ".join(result.output.split())
    assert f"warning: kept {trace_dir / SALT_DIR / victim.name}, the salt of run {OLD_RUN} whose trace is gone" in (
        output
    )
    assert "leads outside the folder" in output


def test_a_collector_file_with_one_hostile_run_is_kept_whole_and_the_other_files_are_pruned(tmp_path: Path) -> None:
    trace_dir = tmp_path / "traces"
    victim = plant(tmp_path / "victim.salt")
    shared = trace_dir / "collector.jsonl"
    shared.parent.mkdir(parents=True)
    lines = [write_run(tmp_path / "a.jsonl", "run_20200101_000000_1b1b1b1b").read_bytes()]
    lines.append(write_run(tmp_path / "b.jsonl", "../victim").read_bytes())
    shared.write_bytes(b"".join(lines))
    before = shared.read_bytes()
    write_run(trace_dir / f"{OLD_RUN}.jsonl", OLD_RUN)
    result = prune(trace_dir)
    assert shared.read_bytes() == before
    assert victim.exists()
    assert not (trace_dir / f"{OLD_RUN}.jsonl").exists()
    assert f"The run id '../victim' in the trace file {shared} cannot name a trace file" in " ".join(
        result.output.split()
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    run_id=st.one_of(
        st.text(min_size=1, max_size=30),
        st.sampled_from(["..", "../x", "../../x", "../../../x", "a/../../../x", "x/.", "ABSOLUTE"]),
    )
)
def test_no_run_id_read_from_a_trace_makes_prune_touch_a_file_outside_the_trace_dir(
    tmp_path: Path, run_id: str
) -> None:
    with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
        root = Path(scratch)
        run_id = run_id.replace("ABSOLUTE", str(root / "x"))
        trace_dir = root / "deep" / "traces"
        # Whatever the run id points at from the salt folder, it is planted outside, salt and all.
        planted = [plant(root / "x.salt"), plant(root / "deep" / "x.salt"), plant(root / "deep" / "x")]
        write_run(trace_dir / "hostile.jsonl", run_id)
        outside = {p: p.read_bytes() for p in root.rglob("*") if p.is_file() and trace_dir not in p.parents}
        CliRunner().invoke(cli, ["prune", str(trace_dir)])
        assert {p: p.read_bytes() for p in outside if p.is_file()} == outside
        assert all(p.exists() for p in planted)


@pytest.mark.parametrize("dry_run", [False, True])
def test_an_old_looking_copy_of_a_live_run_does_not_cost_the_run_its_salt(tmp_path: Path, dry_run: bool) -> None:
    """A second file holding the live run's id with old times (a stale Collector copy, or one planted).

    Expiry is decided per file, the salt belongs to the run: before, the copy expired, prune
    deleted ``.spanreplay-salts/myrun.salt`` though ``myrun.jsonl`` (recorded now) was kept,
    and said ``Removed 1 run(s) ...; kept 0``.
    """
    trace_dir = tmp_path / "traces"
    live = write_run(trace_dir / "myrun.jsonl", "myrun", start_ns=time.time_ns())
    copy = write_run(trace_dir / "zzz-collector.jsonl", "myrun")  # the same run id, started in 2020
    own_salt = salt(trace_dir, "myrun")
    # An ordinary expired run beside them, with its salt: pruned, salt and all, as before.
    write_run(trace_dir / f"{OLD_RUN}.jsonl", OLD_RUN)
    old_salt = salt(trace_dir, OLD_RUN)

    result = prune(trace_dir, *(["--dry-run"] if dry_run else []))

    output = " ".join(result.output.split())
    assert own_salt.read_text() == "not prune's to delete\n"
    assert live.is_file()
    assert copy.exists() is dry_run  # the copy itself is expired: it goes
    assert old_salt.exists() is dry_run
    assert "the salt of run myrun" not in output
    assert "kept run myrun and its salt: a file that stays still holds the run" in output
    verb = "Would remove" if dry_run else "Removed"
    assert f"{verb} 1 run(s) (1 ok older than 7d, 0 failed or crashed older than 90d); kept 1." in output

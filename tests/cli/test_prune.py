"""``spanreplay prune`` on trace directories: retention by status, dates from run ids."""

from __future__ import annotations

import gzip
import shutil
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import spanreplay
from helpers.paths import FIXTURES
from spanreplay.cli import _prune, cli
from spanreplay.cli._prune import run_date
from spanreplay.run.salts import SALT_DIR


def _run_id(days_ago: float) -> str:
    when = datetime.now(UTC) - timedelta(days=days_ago)
    return f"run_{when:%Y%m%d_%H%M%S}_{uuid.uuid4().hex[:8]}"


def _record(trace_dir: Path, days_ago: float, outcome: str, run_id: str | None = None) -> str:
    """One run dated ``days_ago``: ok, error, or crashed (the run span never ended)."""
    run_id = run_id or _run_id(days_ago)
    try:
        with spanreplay.record(agent="dated", run_id=run_id):
            # A masked input: the run gets a salt file, which prune removes with the run.
            spanreplay.boundary("tool", "t", {"n": 1, "to": "ann@example.com"}, lambda: 1)
            if outcome == "error":
                raise ValueError("bad")
    except ValueError:
        pass
    if outcome == "crashed":
        path = trace_dir / f"{run_id}.jsonl"
        lines = path.read_bytes().splitlines(keepends=True)
        path.write_bytes(b"".join(lines[:-1]))  # as after SIGKILL: the run span's end was never written
    return run_id


def _files(trace_dir: Path) -> set[str]:
    # Not the hidden directory of the runs' salts, which the readers skip too.
    return {p.name.removesuffix(".jsonl") for p in trace_dir.iterdir() if not p.name.startswith(".")}


def _salts(trace_dir: Path) -> set[str]:
    return {p.name.removesuffix(".salt") for p in (trace_dir / SALT_DIR).glob("*.salt")}


@pytest.mark.usefixtures("edge_date_now")
def test_prune_removes_exactly_the_run_files_past_their_retention(trace_dir: Path) -> None:
    keep = [
        _record(trace_dir, 1, "ok"),
        _record(trace_dir, 6.9, "ok"),
        _record(trace_dir, 8, "error"),
        _record(trace_dir, 89, "crashed"),
    ]
    drop = [_record(trace_dir, 7.1, "ok"), _record(trace_dir, 91, "error"), _record(trace_dir, 120, "crashed")]
    assert spanreplay.load(trace_dir, drop[2]).run.status == "crashed"
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert _files(trace_dir) == set(keep)
    removed = [line.split() for line in result.output.splitlines() if line.startswith("removed ")]
    assert {words[1]: words[2] for words in removed} == {drop[0]: "ok", drop[1]: "error", drop[2]: "crashed"}
    assert all(str(trace_dir) in " ".join(words) for words in removed)  # each line names the file it deleted
    assert "Removed 3 run(s) (1 ok older than 7d, 2 failed or crashed older than 90d); kept 4." in result.output
    # Each run's salt goes with it, and only with it.
    assert _salts(trace_dir) == set(keep)
    assert all(f"deleted the salt of run {run_id}" in result.output for run_id in drop)


@pytest.mark.usefixtures("edge_date_now")
def test_a_dry_run_prints_the_same_runs_and_removes_nothing(trace_dir: Path) -> None:
    old = _record(trace_dir, 30, "ok")
    young = _record(trace_dir, 0, "ok")
    dry = CliRunner().invoke(cli, ["prune", str(trace_dir), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert [line.split()[2] for line in dry.output.splitlines() if line.startswith("would remove ")] == [old]
    assert "Would remove 1 run(s)" in dry.output
    assert f"would delete the salt of run {old}" in dry.output
    assert _files(trace_dir) == {old, young}
    assert _salts(trace_dir) == {old, young}


def test_a_duration_past_any_date_is_refused() -> None:
    result = CliRunner().invoke(cli, ["prune", "/nonexistent/spanreplay-prune", "--success", "999999w"])
    assert result.exit_code == 2
    assert "--success '999999w' reaches back before any date a run can have" in result.output


@pytest.mark.usefixtures("edge_date_now")
def test_custom_windows_apply_by_status(trace_dir: Path) -> None:
    ok = _record(trace_dir, 2, "ok")
    failed = _record(trace_dir, 2, "error")
    crashed = _record(trace_dir, 0.5, "crashed")
    result = CliRunner().invoke(cli, ["prune", str(trace_dir), "--success", "1d", "--failure", "3d"])
    assert result.exit_code == 0, result.output
    assert _files(trace_dir) == {failed, crashed}
    assert ok not in _files(trace_dir)
    tighter = CliRunner().invoke(cli, ["prune", str(trace_dir), "--success", "1d", "--failure", "6h"])
    assert tighter.exit_code == 0, tighter.output
    assert _files(trace_dir) == set()


@pytest.mark.usefixtures("edge_date_now")
def test_a_run_id_without_a_date_is_aged_by_its_start_time(trace_dir: Path) -> None:
    _record(trace_dir, 0, "ok", run_id="nightly-build-42")
    result = CliRunner().invoke(cli, ["prune", str(trace_dir), "--success", "1h"])
    assert result.exit_code == 0, result.output
    assert _files(trace_dir) == {"nightly-build-42"}  # it started just now
    zero = CliRunner().invoke(cli, ["prune", str(trace_dir), "--success", "0s"])
    assert zero.exit_code == 0, zero.output
    assert _files(trace_dir) == set()


@pytest.mark.usefixtures("edge_date_now")
def test_a_file_that_is_not_a_trace_is_kept_with_a_warning(trace_dir: Path) -> None:
    old = _record(trace_dir, 200, "error")
    notes = trace_dir / "notes.txt"
    notes.write_text("not a trace\n")
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert notes.exists()
    assert "kept" in result.output
    assert "notes.txt" in result.output
    assert old not in _files(trace_dir)


def _foreign_line(name: str) -> bytes:
    """One span of another service, as the Collector's file exporter writes it: no spanreplay run id."""
    span = {
        "traceId": uuid.uuid4().hex,
        "spanId": uuid.uuid4().hex[:16],
        "name": name,
        "kind": 2,
        "startTimeUnixNano": "1700000000000000000",
        "endTimeUnixNano": "1700000000500000000",
        "attributes": [{"key": "http.route", "value": {"stringValue": "/charge"}}],
        "status": {},
    }
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "billing"}}]}
    return orjson.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {}, "spans": [span]}]}]})


def _span_names(path: Path) -> list[str]:
    return [
        span["name"]
        for line in path.read_bytes().splitlines()
        if line.strip()
        for resource in orjson.loads(line)["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def _collector_export(trace_dir: Path, old: str, young: str) -> tuple[Path, list[bytes]]:
    """A shared export: another service's spans between two runs' spans, one line holding both kinds."""
    old_lines = (trace_dir / f"{old}.jsonl").read_bytes().splitlines(keepends=True)
    young_lines = (trace_dir / f"{young}.jsonl").read_bytes().splitlines(keepends=True)
    (trace_dir / f"{old}.jsonl").unlink()
    (trace_dir / f"{young}.jsonl").unlink()
    # The Collector batches: one line may hold an expired run's span beside another service's.
    mixed = orjson.loads(old_lines[0])
    mixed["resourceSpans"].append(orjson.loads(_foreign_line("charge-batched"))["resourceSpans"][0])
    foreign = [_foreign_line("charge-1") + b"\n", _foreign_line("charge-2") + b"\n"]
    lines = [orjson.dumps(mixed) + b"\n", foreign[0], *old_lines[1:], *young_lines, foreign[1]]
    export = trace_dir / "otelcol" / "traces.json"
    export.parent.mkdir()
    export.write_bytes(b"".join(lines))
    export.chmod(0o640)
    return export, [foreign[0], *young_lines, foreign[1]]


def _run_ids(path: Path) -> set[str]:
    return {run.run_id for run in spanreplay.runs(path)}


@pytest.mark.usefixtures("edge_date_now")
def test_a_shared_export_is_rewritten_without_the_expired_run_and_keeps_other_services_spans(
    trace_dir: Path,
) -> None:
    old = _record(trace_dir, 100, "error")
    young = _record(trace_dir, 1, "error")
    export, untouched = _collector_export(trace_dir, old, young)
    assert _run_ids(export) == {old, young}
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert _run_ids(export) == {young}
    names = _span_names(export)
    assert {"charge-batched", "charge-1", "charge-2"} <= set(names)
    # The lines that held no span of the expired run are kept byte for byte, in their order.
    assert [line for line in export.read_bytes().splitlines(keepends=True) if line in untouched] == untouched
    assert export.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in export.parent.iterdir()) == ["traces.json"]  # no temporary file left
    assert any(line.startswith(f"removed {old}  error") and str(export) in line for line in result.output.splitlines())
    assert f"rewrote {export} without 1 expired run(s)" in result.output
    assert "Removed 1 run(s) (0 ok older than 7d, 1 failed or crashed older than 90d); kept 1." in result.output


@pytest.mark.usefixtures("edge_date_now")
def test_a_dry_run_on_a_shared_export_says_it_would_rewrite_it_and_changes_nothing(trace_dir: Path) -> None:
    old = _record(trace_dir, 100, "ok")
    young = _record(trace_dir, 1, "ok")
    export, _ = _collector_export(trace_dir, old, young)
    before = export.read_bytes()
    result = CliRunner().invoke(cli, ["prune", str(trace_dir), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert export.read_bytes() == before
    assert sorted(p.name for p in export.parent.iterdir()) == ["traces.json"]
    assert any(line.startswith(f"would remove {old}  ok") for line in result.output.splitlines())
    assert f"would rewrite {export} without 1 expired run(s)" in result.output
    assert "Would remove 1 run(s)" in result.output


@pytest.mark.usefixtures("edge_date_now")
def test_an_export_holding_only_expired_runs_is_deleted(trace_dir: Path) -> None:
    first = _record(trace_dir, 100, "error")
    second = _record(trace_dir, 30, "ok")
    export = trace_dir / "traces.json"
    export.write_bytes(b"".join((trace_dir / f"{run}.jsonl").read_bytes() for run in (first, second)))
    (trace_dir / f"{first}.jsonl").unlink()
    (trace_dir / f"{second}.jsonl").unlink()
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert not export.exists()
    assert "Removed 2 run(s)" in result.output


@pytest.mark.usefixtures("edge_date_now")
def test_a_compressed_shared_export_is_left_as_it_was_with_the_reason(trace_dir: Path) -> None:
    old = _record(trace_dir, 100, "error")
    young = _record(trace_dir, 1, "error")
    export, _ = _collector_export(trace_dir, old, young)
    packed = export.with_name("traces.json.gz")
    packed.write_bytes(gzip.compress(export.read_bytes()))
    export.unlink()
    before = packed.read_bytes()
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert packed.read_bytes() == before
    assert f"kept {packed}, which holds expired run(s) {old}: it is compressed" in result.output
    assert "Removed 0 run(s)" in result.output
    assert "Left 1 file(s) holding expired runs as they were" in result.output


@pytest.mark.usefixtures("edge_date_now")
def test_a_compressed_run_file_of_an_expired_run_is_deleted(trace_dir: Path) -> None:
    old = _record(trace_dir, 100, "error")
    plain = trace_dir / f"{old}.jsonl"
    packed = trace_dir / f"{old}.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    plain.unlink()
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert not packed.exists()
    assert "Removed 1 run(s)" in result.output


@pytest.mark.usefixtures("edge_date_now")
def test_a_run_file_cut_short_mid_line_is_deleted_whole(trace_dir: Path) -> None:
    old = _record(trace_dir, 100, "crashed")
    path = trace_dir / f"{old}.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])  # SIGKILL mid-write
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert not path.exists()
    assert f"removed {old}  crashed" in result.output


@pytest.mark.usefixtures("edge_date_now")
def test_a_file_of_other_services_spans_only_is_never_touched(trace_dir: Path) -> None:
    old = _record(trace_dir, 100, "error")
    export = trace_dir / "traces.json"
    export.write_bytes(_foreign_line("charge") + b"\n")
    before = export.read_bytes()
    result = CliRunner().invoke(cli, ["prune", str(trace_dir), "--success", "0s", "--failure", "0s"])
    assert result.exit_code == 0, result.output
    assert export.read_bytes() == before
    assert old not in _files(trace_dir)


@pytest.mark.usefixtures("edge_date_now")
def test_a_trace_another_instrumentation_wrote_is_never_touched(trace_dir: Path) -> None:
    # It reads as a run named by its trace id; it is still not spanreplay's to prune.
    old = _record(trace_dir, 100, "error")
    export = trace_dir / "openinference.binpb"
    shutil.copyfile(FIXTURES / "foreign" / "openinference-create.binpb", export)
    before = (export.read_bytes(), export.stat().st_ino)
    result = CliRunner().invoke(cli, ["prune", str(trace_dir), "--success", "0s", "--failure", "0s"])
    assert result.exit_code == 0, result.output
    assert (export.read_bytes(), export.stat().st_ino) == before
    assert "openinference" not in result.output
    assert old not in _files(trace_dir)


def test_an_empty_directory_prunes_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["prune", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Removed 0 run(s)" in result.output


def test_a_source_that_is_neither_a_directory_nor_a_dsn_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["prune", str(tmp_path / "missing")])
    assert result.exit_code == 2
    assert "is not a directory or a Postgres DSN" in result.output


def _refused(duration: str) -> None:
    # A path that does not exist: nothing could be pruned even if the duration were taken.
    result = CliRunner().invoke(cli, ["prune", "/nonexistent/spanreplay-prune", "--failure", duration])
    assert result.exit_code == 2
    assert f"--failure {duration!r} is not a duration" in result.output
    assert "30m, 12h, 7d or 2w" in result.output


@pytest.mark.parametrize("duration", ["7", "d", "7days", "-1d", "1.5d", "", "7 x", "1y", "9999999d"])
def test_a_malformed_duration_is_refused_with_the_accepted_forms(duration: str) -> None:
    _refused(duration)


@given(st.text(alphabet=st.characters(blacklist_categories=("Nd",)), max_size=12))
def test_a_duration_without_a_number_is_always_refused(duration: str) -> None:
    _refused(duration)


@pytest.mark.parametrize(
    ("run_id", "expected"),
    [
        ("run_20261129_021503_a1b2c3d4", datetime(2026, 11, 29, 2, 15, 3, tzinfo=UTC)),
        ("run_20261399_021503_a1b2c3d4", None),  # shaped like a date, but month 13
        ("nightly-build-42", None),
        ("run_2026112_021503_a1b2c3d4", None),
    ],
)
def test_run_date_reads_the_utc_start_from_a_default_run_id(run_id: str, expected: datetime | None) -> None:
    assert run_date(run_id) == expected


def test_a_recorded_run_id_carries_its_utc_start_so_prune_ages_it_right(
    trace_dir: Path, edge_date_now: datetime
) -> None:
    with spanreplay.record(agent="dated") as run:
        spanreplay.boundary("tool", "t", {"n": 1}, lambda: 1)
    from_id = run_date(run.run_id)
    started = spanreplay.load(trace_dir, run.run_id).run.started
    assert from_id is not None
    assert started is not None
    # The id has whole seconds; both read the clock (UTC, not the local UTC+14) as the run began.
    assert from_id <= started < from_id + timedelta(seconds=2)
    assert edge_date_now <= started < edge_date_now + timedelta(minutes=5)
    # An hour-old window keeps it; a zero one removes it, by the date in its name.
    result = CliRunner().invoke(cli, ["prune", str(trace_dir), "--success", "1h"])
    assert result.exit_code == 0, result.output
    assert _files(trace_dir) == {run.run_id}
    zero = CliRunner().invoke(cli, ["prune", str(trace_dir), "--success", "0s"])
    assert zero.exit_code == 0, zero.output
    assert f"removed {run.run_id}  ok       {from_id:%Y-%m-%d %H:%M}" in zero.output
    assert _files(trace_dir) == set()


@pytest.mark.usefixtures("edge_date_now")
def test_a_shared_export_written_to_while_it_is_rewritten_is_left_whole(
    trace_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _record(trace_dir, 100, "error")
    young = _record(trace_dir, 1, "error")
    export, _ = _collector_export(trace_dir, old, young)
    late = _foreign_line("charge-late") + b"\n"
    count = _prune._expired_spans

    def appended_meanwhile(name: str, expired: set[str]) -> int:
        with open(name, "ab") as collector:  # the Collector appends as prune reads
            collector.write(late)
        return count(name, expired)

    monkeypatch.setattr(_prune, "_expired_spans", appended_meanwhile)
    before = export.read_bytes()
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert export.read_bytes() == before + late
    assert sorted(p.name for p in export.parent.iterdir()) == ["traces.json"]
    assert "it changed while prune read it" in result.output
    assert "Removed 0 run(s)" in result.output


@pytest.mark.usefixtures("edge_date_now")
def test_the_salt_of_a_run_whose_trace_is_gone_is_removed_once_past_both_windows(trace_dir: Path) -> None:
    old = _record(trace_dir, 120, "ok")
    recent = _record(trace_dir, 30, "ok")
    for run_id in (old, recent):
        (trace_dir / f"{run_id}.jsonl").unlink()  # deleted by hand; the salt stayed
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert f"deleted the salt of run {old}" in result.output
    # Inside the failure window it might still be a failed run's: kept.
    assert _salts(trace_dir) == {recent}


def test_a_salt_of_a_kept_run_stays(trace_dir: Path) -> None:
    young = _record(trace_dir, 0, "ok")
    result = CliRunner().invoke(cli, ["prune", str(trace_dir)])
    assert result.exit_code == 0, result.output
    assert _salts(trace_dir) == {young}

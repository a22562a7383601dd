"""The pytest plugin: a test that asks for it runs inside a run that replays its trace, or records it.

Loaded through the ``pytest11`` entry point wherever spanreplay is installed; a
test that neither carries ``@pytest.mark.spanreplay`` nor asks for the
``spanreplay_run`` fixture is left alone. A marked test runs inside one run::

    @pytest.mark.spanreplay
    def test_order_status(spanreplay_run):
        assert "Lyon" in agent.answer("Where is order A-17?")

``--spanreplay-mode`` decides what the run does: ``once`` (the default) replays the
test's trace when it exists and records it when it does not; ``replay`` replays and
fails a test whose trace is missing; ``record`` runs every test live, saving the
traces that are missing and keeping the others; ``rewrite`` runs every test live
and saves its trace in place of the old one. A trace is saved only when the test
passes, so a failure (a network error, an assertion) never becomes the recording.

The trace of ``tests/test_agent.py::test_order_status`` is
``tests/traces/test_agent/test_order_status.jsonl``; ``trace=`` names another file,
relative to the test module's folder, and ``run=`` the run to replay in it (or the
run id to record under).

Under pytest-xdist (``pytest -n auto``) each worker finds a test's trace the same
way, beside the test module whatever the worker's directory. Two workers that
would record the same missing trace (``trace=`` naming one file for two tests)
take turns (``recording.trace_claims``): the first records it, the second waits
and then replays what the first saved, as it would have run after it in one
process. A saved trace is never overwritten but in ``rewrite`` mode.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn, cast

import pytest

if TYPE_CHECKING:
    from spanreplay.recording.trace_claims import TraceClaim
    from spanreplay.replaying.replaying_run import ReplayingRun
    from spanreplay.run.base import Run

__all__ = [
    "MODES",
    "pytest_addoption",
    "pytest_configure",
    "pytest_runtest_call",
    "pytest_runtest_teardown",
    "spanreplay_run",
    "trace_path",
]

MODES: Final = ("once", "replay", "record", "rewrite")
MARKER: Final = "spanreplay"
# The folder of traces beside a test module, as vcrpy's cassettes/ is.
TRACES: Final = "traces"
_OPTIONS: Final = frozenset({"trace", "run", "ignore_paths"})
_UNSAFE: Final = re.compile(r"[^\w.\[\]-]+")


def pytest_addoption(parser: pytest.Parser) -> None:
    # pytest's own conventions: a capitalized group title, option and ini help without a
    # final period, marker help in lower case after the signature (as @pytest.mark.skip's).
    group = parser.getgroup("spanreplay", "Recorded agent runs (spanreplay)")
    group.addoption(
        "--spanreplay-mode",
        action="store",
        dest="spanreplay_mode",
        choices=MODES,
        default=None,
        help="What a test marked spanreplay does with its trace: 'once' replays it, or records it when "
        "missing; 'replay' replays it and fails the test when it is missing; 'record' runs live and saves "
        "the missing traces; 'rewrite' runs live and saves every trace anew. Default: the spanreplay_mode "
        "ini option, else 'once'",
    )
    parser.addini("spanreplay_mode", "Default for --spanreplay-mode (once, replay, record or rewrite)", default="once")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "spanreplay(trace=None, run=None, ignore_paths=()): run the test inside a spanreplay run that replays "
        "its recorded trace (traces/<test module>/<test name>.jsonl beside the module, or trace=PATH), or "
        "records it; see --spanreplay-mode.",
    )
    mode = _mode(config)
    if mode not in MODES:
        raise pytest.UsageError(f"spanreplay_mode = {mode!r} in the ini file is not one of {', '.join(MODES)}.")


def _mode(config: pytest.Config) -> str:
    return str(config.getoption("spanreplay_mode") or config.getini("spanreplay_mode") or "once")


@dataclass
class _TestRun:
    """What the plugin planned for one test: its run, and where its trace is."""

    trace: Path
    run: Run | None = None
    # Replay only: the same run, as the replay whose outcome the test's result follows.
    replaying: ReplayingRun | None = None
    # Record only: move the recorded file to ``trace`` when the test passes.
    save: bool = False
    # Why the test fails before its body runs (replay mode with no trace).
    failure: str | None = None
    # Record only: this worker's turn to record the missing trace, held until it is saved
    # (or the test failed); and the folders made for it, removed again when nothing is saved.
    claim: TraceClaim | None = None
    made: tuple[Path, ...] = ()

    def release(self) -> None:
        if self.claim is not None:
            self.claim.release()


_planned_key = pytest.StashKey[_TestRun]()


def trace_path(item: pytest.Item, trace: str | os.PathLike[str] | None = None) -> Path:
    """Where the trace of ``item`` is: ``trace`` relative to its module's folder, else the default.

    The default is ``traces/<module>/<test>.jsonl`` beside the module, the test named
    as in its node id after the module (``TestOrders.test_status[fr]``), with
    characters a file name cannot hold replaced by ``_``. A name longer than the
    file system takes (a test with long parameters) keeps its start and ends with
    a hash of the whole name, so each run of the test finds the same file.
    """
    folder = item.path.parent
    if trace is not None:
        return folder / Path(trace)
    name = item.nodeid.split("::", 1)[1].replace("::", ".") if "::" in item.nodeid else item.name
    traces = folder / TRACES / item.path.stem
    return traces / _fitting(traces, _UNSAFE.sub("_", name), ".jsonl")


def _fitting(folder: Path, stem: str, suffix: str) -> str:
    """``stem + suffix``, or when that is longer than a file name in ``folder`` may be, the
    start of ``stem``, a dash, 16 hex digits of the sha256 of the whole stem, and ``suffix``."""
    limit = _name_max(folder)
    name = stem + suffix
    if len(os.fsencode(name)) <= limit:
        return name
    tail = f"-{hashlib.sha256(os.fsencode(stem)).hexdigest()[:16]}{suffix}"
    room = max(limit - len(os.fsencode(tail)), 0)
    # Cut in bytes, then drop a character the cut split in two (a name may hold any letter).
    start = os.fsencode(stem)[:room].decode("utf-8", "ignore") if room else ""
    while len(os.fsencode(start)) > room:
        start = start[:-1]
    return start + tail


def _name_max(folder: Path) -> int:
    """The longest file name (in bytes) the file system of ``folder`` takes; 255 when it cannot say."""
    existing = next((p for p in (folder, *folder.parents) if p.is_dir()), None)
    try:
        found = os.pathconf(existing if existing is not None else ".", "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):  # no pathconf (Windows), or no such setting
        return 255
    return found if found > 0 else 255


@pytest.fixture
def spanreplay_run(request: pytest.FixtureRequest) -> Run:
    """The spanreplay run this test runs in: its recorded trace replayed, or a new recording.

    Open for the whole test body; ``--spanreplay-mode`` and ``@pytest.mark.spanreplay``
    decide which run it is.
    """
    planned = _planned(request.node)
    # None only when the test fails before its body starts (its trace is missing).
    return cast("Run", planned.run)


def _planned(item: pytest.Item) -> _TestRun:
    planned = item.stash.get(_planned_key, None)
    if planned is None:
        planned = item.stash[_planned_key] = _plan(item)
    return planned


def _plan(item: pytest.Item) -> _TestRun:
    from spanreplay.errors import SpanReplayError
    from spanreplay.recording.recording_run import RecordingRun

    options = _marker_options(item)
    trace = trace_path(item, options.get("trace"))
    run_id: str | None = options.get("run")
    ignore_paths = tuple(options.get("ignore_paths", ()))
    mode = _mode(item.config)
    exists = trace.is_file()
    where = _shown(trace, item.config)
    made: tuple[Path, ...] = ()
    claim: TraceClaim | None = None
    if not exists and mode in ("once", "record"):
        try:
            made, claim = _claim(trace)
        except (SpanReplayError, OSError) as exc:  # a planted link, a folder this user cannot write to
            raise pytest.fail.Exception(f"spanreplay: cannot record {where}: {exc}", pytrace=False) from None
        # Another worker may have recorded it while this one waited: replayed (once) or kept (record).
        exists = trace.is_file()
        if exists:
            claim.release()
            claim = None
    if mode == "replay" or (mode == "once" and exists):
        if not exists:
            return _TestRun(
                trace,
                failure=f"spanreplay: no trace to replay at {where} (--spanreplay-mode=replay); record it with "
                "--spanreplay-mode=once, or name the file with @pytest.mark.spanreplay(trace=...).",
            )
        try:
            replaying = _open_replay(trace, run_id, ignore_paths)
            return _TestRun(trace, replaying, replaying=replaying)
        except SpanReplayError as exc:
            raise pytest.fail.Exception(
                f"spanreplay: cannot replay the trace at {where}: {exc}", pytrace=False
            ) from None
    try:
        run = RecordingRun(_UNSAFE.sub("_", item.name), run_id)
    except SpanReplayError as exc:
        if claim is not None:
            claim.release()
        raise pytest.fail.Exception(f"spanreplay: cannot record {item.nodeid}: {exc}", pytrace=False) from None
    return _TestRun(trace, run, save=mode == "rewrite" or not exists, claim=claim, made=made)


def _claim(trace: Path) -> tuple[tuple[Path, ...], TraceClaim]:
    """The folders about to be made for ``trace`` (the deepest first), and this worker's turn to record it."""
    from spanreplay.recording.trace_claims import claim_trace

    made = tuple(itertools.takewhile(lambda folder: not folder.exists(), trace.parents))
    return made, claim_trace(trace)


def _open_replay(trace: Path, run_id: str | None, ignore_paths: Sequence[str]) -> ReplayingRun:
    """The replay a test runs in: every replay option the plugin sets is set here.

    The runtime guard is on: a test is where a direct clock or random read should
    surface, as a warning naming its file and line, before it makes a replay diverge.
    live=False: a replayed test never runs a tool, even one a foreign trace lacks.
    """
    from spanreplay.api.runs import replay

    return replay(trace, run_id, ignore_paths=ignore_paths, guard=True, live=False)


def _marker_options(item: pytest.Item) -> dict[str, Any]:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return {}
    if marker.args:
        pytest.fail(
            f"@pytest.mark.spanreplay takes keyword arguments only (trace=, run=, ignore_paths=), not "
            f"{marker.args!r}, in {item.nodeid}.",
            pytrace=False,
        )
    unknown = sorted(set(marker.kwargs) - _OPTIONS)
    if unknown:
        pytest.fail(
            f"@pytest.mark.spanreplay got {', '.join(unknown)}, which it does not take, in {item.nodeid}; "
            "it takes trace=, run= and ignore_paths=.",
            pytrace=False,
        )
    trace, run_id = marker.kwargs.get("trace"), marker.kwargs.get("run")
    if trace is not None and not isinstance(trace, str | os.PathLike):
        pytest.fail(
            f"@pytest.mark.spanreplay(trace={trace!r}) in {item.nodeid} is not a path; write trace='traces/x.jsonl'.",
            pytrace=False,
        )
    if run_id is not None and not isinstance(run_id, str):
        pytest.fail(
            f"@pytest.mark.spanreplay(run={run_id!r}) in {item.nodeid} is not a run id; write run='run_...'.",
            pytrace=False,
        )
    paths = marker.kwargs.get("ignore_paths", ())
    if not isinstance(paths, list | tuple) or not all(isinstance(p, str) for p in paths):
        pytest.fail(
            f"@pytest.mark.spanreplay(ignore_paths={paths!r}) in {item.nodeid} is not a list of JSON paths; "
            "write ignore_paths=['messages[*].timestamp'].",
            pytrace=False,
        )
    return dict(marker.kwargs)


def _shown(path: Path, config: pytest.Config) -> str:
    try:
        return str(path.relative_to(config.rootpath))
    except ValueError:
        return str(path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    if item.stash.get(_planned_key, None) is None and item.get_closest_marker(MARKER) is None:
        return (yield)
    planned = _planned(item)
    if planned.failure is not None:
        pytest.fail(planned.failure, pytrace=False)
    if planned.replaying is not None:
        return (yield from _replayed(planned, planned.replaying, item.config))
    return (yield from _recorded(planned, item.config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, object, object]:
    try:
        return (yield)
    finally:
        # A run is used once: a rerun of the test plans a new one, and the recording's
        # events are not kept alive while the other tests run.
        if _planned_key in item.stash:
            item.stash[_planned_key].release()  # a test that ended before its body still lets others record
            del item.stash[_planned_key]


def _replayed(planned: _TestRun, run: ReplayingRun, config: pytest.Config) -> Generator[None, object, object]:
    """The test body inside the replay; a divergence fails the test with its own text.

    The test's own failures (an assertion, an error of the code between the
    boundaries) pass through as they are. The test body decides about the run's
    outcome: a test that expects the recorded failure (``pytest.raises``) and gets
    it at the recorded step passes.
    """
    from spanreplay.errors import OutcomeChangedError, ReplayDivergenceError

    run.__enter__()
    try:
        result = yield
    except BaseException as exc:
        try:
            run.__exit__(type(exc), exc, exc.__traceback__)
        except OutcomeChangedError as changed:
            if changed.__cause__ is not exc:
                _diverged(planned, changed, config)
        except ReplayDivergenceError as first:  # caught by the code, and it went on
            _diverged(planned, first, config)
        if isinstance(exc, ReplayDivergenceError):
            _diverged(planned, exc, config)
        raise
    try:
        run.__exit__(None, None, None)
    except OutcomeChangedError as changed:
        # Raised without a cause only when the recorded run failed and this one completed:
        # the test caught the recorded failure itself, at the recorded step (no steps left over).
        if changed.__cause__ is not None or run.engine.first_failure is not None:
            _diverged(planned, changed, config)
    except ReplayDivergenceError as error:
        _diverged(planned, error, config)
    return result


def _diverged(planned: _TestRun, error: BaseException, config: pytest.Config) -> NoReturn:
    told = "\n".join([str(error), *getattr(error, "__notes__", ())])
    # From None: the failure text is the divergence, once, without the chain it was raised in.
    raise pytest.fail.Exception(
        f"spanreplay: the replay of {_shown(planned.trace, config)} diverged.\n{told}\n"
        "If the change is intended, record the trace again with --spanreplay-mode=rewrite.",
        pytrace=False,
    ) from None


def _recorded(planned: _TestRun, config: pytest.Config) -> Generator[None, object, object]:
    """The test body inside a recording into a scratch folder; the trace moves in place if it passes."""
    from spanreplay.recording.configuration import recording_into

    run = planned.run
    assert run is not None
    # The folders made for the trace, the deepest first: removed again if no trace is saved in them.
    made = planned.made or tuple(itertools.takewhile(lambda folder: not folder.exists(), planned.trace.parents))
    planned.trace.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".spanreplay-", dir=planned.trace.parent))
    try:
        with recording_into(scratch), run:
            result = yield
        if planned.save:
            _save(scratch, run.run_id, planned.trace, config)
        return result
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        planned.release()
        for folder in made:
            with contextlib.suppress(OSError):  # not empty: a trace was saved there
                folder.rmdir()


def _save(scratch: Path, run_id: str, trace: Path, config: pytest.Config) -> None:
    from spanreplay.model.run_ids import checked_run_id, path_inside
    from spanreplay.recording.trace_claims import publish_trace

    # The recording's own run id (checked when the run was made); kept inside the scratch folder all the same.
    recorded = path_inside(scratch, f"{checked_run_id(run_id, where='the recording')}.jsonl")
    others = sorted(p.stem for p in scratch.glob("*.jsonl") if p != recorded)
    if others:
        pytest.fail(
            f"spanreplay: the test opened runs of its own ({', '.join(others)}) inside the run it records, so "
            f"no single trace holds it; {_shown(trace, config)} was not written. Call the function that does "
            "the agent's work, not the one that opens spanreplay.record().",
            pytrace=False,
        )
    if not recorded.is_file():
        pytest.fail(
            f"spanreplay: the recording of run {run_id} wrote no trace, so {_shown(trace, config)} was not written; "
            "a test that records must not turn recording off (spanreplay.reset(), configure(trace_dir=None)).",
            pytrace=False,
        )
    # Kept when another recorder saved it first (only without a claim: a platform without flock).
    publish_trace(recorded, trace, replace=_mode(config) == "rewrite")

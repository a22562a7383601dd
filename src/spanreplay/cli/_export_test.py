"""``spanreplay export-test SOURCE RUN --entry M:F``: a recorded run, kept as a regression test."""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path

import click

from .. import _semconv as sc
from .._events import EventLog
from .._loader import load
from ..readers import writers
from ._common import BadInput, console
from ._convert import CountedSpans, select_spans, write_spans
from ._replay import cwd_on_path, failing_step, load_entry


@click.command("export-test")
@click.argument("source")
@click.argument("run_id", metavar="RUN")
@click.option(
    "--entry",
    required=True,
    metavar="MODULE:FUNCTION",
    help="The agent code the test calls, with no arguments (as for spanreplay replay); the current "
    "directory is on sys.path.",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The test file to write; default tests/test_regress_RUN.py. The trace goes to traces/RUN.jsonl beside it.",
)
@click.option("--force", is_flag=True, help="Replace the test file and the trace when they exist.")
def export_test_command(source: str, run_id: str, entry: str, output: Path | None, force: bool) -> None:
    """Write a pytest test that replays run RUN of SOURCE against the entry function.

    The run's spans are copied, masked as they were recorded, to traces/RUN.jsonl
    beside the test file. The test replays them through the spanreplay pytest
    plugin and asserts the recorded outcome: the run completes, or it fails with
    the recorded error at the recorded step. It passes on the code that recorded
    the run, and fails with the divergence once the code goes another way.

    SOURCE is anything `spanreplay convert` reads (not Postgres, which keeps
    steps, not spans).
    """
    if source.startswith(("postgresql://", "postgres://")):
        raise BadInput(
            f"export-test copies the run's spans, and Postgres keeps its steps, not its spans; export run {run_id} "
            "from the trace files, a Collector file or a Jaeger or Tempo backend instead."
        )
    log = load(source, run_id)
    if log.run.status not in (sc.RUN_STATUS_OK, sc.RUN_STATUS_ERROR):
        raise BadInput(
            f"Run {run_id} {log.run.status}: its recording ends where the process died, so there is no outcome "
            "for a test to assert; export a run that completed or failed (spanreplay runs lists them)."
        )
    with cwd_on_path():
        function = load_entry(entry)
    module, _, name = entry.partition(":")
    output = output or Path("tests") / f"test_regress_{run_id}.py"
    trace = output.parent / "traces" / f"{run_id}.jsonl"
    existing = [str(p) for p in (output, trace) if p.exists()]
    if existing and not force:
        raise BadInput(f"{' and '.join(existing)} already exist; pass --force to replace them.")
    output.parent.mkdir(parents=True, exist_ok=True)
    trace.parent.mkdir(parents=True, exist_ok=True)
    spans = CountedSpans(select_spans(source, run_id))
    write_spans(str(trace), writers.json_lines(spans), spans)
    root = os.path.relpath(Path.cwd(), output.parent.resolve())
    text = test_source(log, module, name, inspect.iscoroutinefunction(function), root)
    _write_text(output, text)
    console().print(
        f"wrote {output} and {trace} ({spans.count} spans): the test replays run {run_id} against {entry} and "
        f"asserts it {'completes' if log.run.error is None else 'fails with ' + str(log.run.error)}.",
        markup=False,
        soft_wrap=True,
    )


def _write_text(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.part")
    part.write_text(text)
    os.replace(part, path)


def test_source(log: EventLog, module: str, function: str, is_async: bool, root: str) -> str:
    """The text of the test module for ``log``, calling ``module:function`` (from ``root``, relative)."""
    run = log.run
    call = f"asyncio.run({function}())" if is_async else f"{function}()"
    ident = re.sub(r"\W", "_", run.run_id)
    error = run.error
    agent = _docstring_safe(run.agent or "agent")
    lines = [
        f'"""Run {run.run_id} of {agent}, replayed as recorded (written by spanreplay export-test).',
        "",
        f"The trace is traces/{run.run_id}.jsonl: {len(log)} steps, masked as recorded. No tool, model, clock",
        "or random source is called. The test fails with the divergence when the code stops matching it;",
        "run pytest with --spanreplay-mode=rewrite only to replace it with a new recording.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        *(["import asyncio"] if is_async else []),
        "import sys",
        "from pathlib import Path",
        "",
        "import pytest",
        "",
        "# Where export-test ran: the agent's module is imported from there, as spanreplay replay does.",
        f"ROOT = str((Path(__file__).parent / {_literal(root)}).resolve())",
        "if ROOT not in sys.path:",
        "    sys.path.insert(0, ROOT)",
        "",
        f"from {module} import {function}  # noqa: E402",
        "",
        "",
        f'@pytest.mark.spanreplay(trace="traces/{run.run_id}.jsonl", run="{run.run_id}")',
    ]
    if error is None:
        lines += [
            f"def test_{ident}_completes_as_recorded(spanreplay_run: object) -> None:",
            f"    {call}",
        ]
    else:
        step = failing_step(log)
        where = f" at seq {step.seq} ({step.kind} {step.key!r})" if step is not None else ""
        lines += [
            f"def test_{ident}_fails_as_recorded(spanreplay_run: object) -> None:",
            f'    """Recorded: {_docstring_safe(str(error))}{where}."""',
            "    with pytest.raises(Exception) as raised:  # noqa: PT011",
            f"        {call}",
            "    # The recorded type, rebuilt, or a RecordedError that names it; no step left over",
            "    # (the plugin checks) means the failure came where it was recorded.",
            '    assert getattr(raised.value, "type_name", type(raised.value).__qualname__) == '
            + _literal(error.type_name),
        ]
        if step is not None and error.message:
            # A replayed step raises the recorded message itself; an error raised between the
            # boundaries holds the live one, which masking may have changed in the recording.
            lines.append(f"    assert {_literal(error.message)} in str(raised.value)")
    return "\n".join(lines) + "\n"


def _literal(text: str) -> str:
    """``text`` as a double-quoted Python string literal, readable where it can be."""
    # repr() of one character that cannot stand as itself is its escape (a line end, NUL, a lone surrogate).
    return '"' + "".join("\\" + c if c in '"\\' else c if c.isprintable() else repr(c)[1:-1] for c in text) + '"'


def _docstring_safe(text: str) -> str:
    """``text`` for the inside of a docstring: quotes, backslashes and line ends escaped."""
    return _literal(text)[1:-1]

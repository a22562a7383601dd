"""``spanreplay export-test SOURCE RUN --entry M:F``: a recorded run, kept as a regression test."""

from __future__ import annotations

import ast
import contextlib
import copy
import inspect
import keyword
import os
import re
from pathlib import Path

import click

from spanreplay import semconv as sc
from spanreplay.api.loading import load
from spanreplay.errors import UnsafeTraceValueError
from spanreplay.model.events import EventLog
from spanreplay.model.run_ids import checked_run_id, path_inside
from spanreplay.readers import writers
from spanreplay.sources.kinds import is_postgres_dsn

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
    help="The test file to write; default tests/test_regress_RUN.py, with each character of RUN that cannot be in "
    "a module name (. or -) written as _. The trace goes to traces/RUN.jsonl beside it.",
)
@click.option("--force", is_flag=True, help="Replace the test file and the trace when they exist.")
def export_test_command(source: str, run_id: str, entry: str, output: Path | None, *, force: bool) -> None:
    """Write a pytest test that replays run RUN of SOURCE against the entry function.

    The run's spans are copied, masked as they were recorded, to traces/RUN.jsonl
    beside the test file. The test replays them through the spanreplay pytest
    plugin and asserts the recorded outcome: the run completes, or it fails with
    the recorded error at the recorded step. It passes on the code that recorded
    the run, and fails with the divergence once the code goes another way.

    SOURCE is anything `spanreplay convert` reads (not Postgres, which keeps
    steps, not spans).
    """
    if is_postgres_dsn(source):
        raise BadInput(
            f"export-test copies the run's spans, and Postgres keeps its steps, not its spans; export run {run_id} "
            "from the trace files, a Collector file or a Jaeger or Tempo backend instead."
        )
    module, attr = _entry_names(entry)
    log = load(source, run_id)
    if log.run.status not in (sc.RUN_STATUS_OK, sc.RUN_STATUS_ERROR):
        raise BadInput(
            f"Run {run_id} {log.run.status}: its recording ends where the process died, so there is no outcome "
            "for a test to assert; export a run that completed or failed (spanreplay runs lists them)."
        )
    # The run id read from the trace names the copy and the test: a plain name, inside the folders.
    run = checked_run_id(log.run.run_id, where=source)
    with cwd_on_path():
        function = load_entry(entry)
    # The test file's name is a module name pytest imports (test_regress_dot.run.py is not one);
    # the trace copy keeps the run id itself, which names the run it holds.
    output = output or path_inside("tests", f"test_regress_{ident_of(run)}.py")
    trace = path_inside(output.parent / "traces", f"{run}.jsonl")
    root = os.path.relpath(Path.cwd(), output.parent.resolve())
    # Checked before anything is written: a refused export leaves no file behind.
    text = checked_module_text(log, module, attr, is_async=inspect.iscoroutinefunction(function), root=root)
    existing = [str(p) for p in (output, trace) if p.exists()]
    if existing and not force:
        raise BadInput(f"{' and '.join(existing)} already exist; pass --force to replace them.")
    spans = _write_both(source, run_id, output, trace, text)
    console().print(
        f"wrote {output} and {trace} ({spans} spans): the test replays run {run} against {entry} and "
        f"asserts it {'completes' if log.run.error is None else 'fails with ' + str(log.run.error)}.",
        markup=False,
        soft_wrap=True,
    )


def _entry_names(entry: str) -> tuple[str, str]:
    """``module`` and ``function`` of ``--entry module:function``, each made of Python names.

    They are written into the test as code (an import and a call), so nothing else is.
    """
    module, _, attr = entry.partition(":")
    if not all(_is_name(part) for part in [*module.split("."), *attr.split(".")]):
        raise BadInput(
            f"--entry {entry!r} is not module:function made of Python names; write it as e.g. "
            "--entry mypkg.agent:main (a module importable from the current directory, and a function in it)."
        )
    return module, attr


def ident_of(run_id: str) -> str:
    """``run_id`` (a checked one) as part of a Python name: the test function's and the default file's.

    A run id may hold ``.`` and ``-``, which no module or function name can.
    """
    return re.sub(r"\W", "_", run_id)


def _is_name(text: str) -> bool:
    return text.isidentifier() and not keyword.iskeyword(text)


def _write_both(source: str, run_id: str, output: Path, trace: Path, text: str) -> int:
    """Write the trace copy, then the test: both, or (a write failing) neither, and no folder made for them."""
    made = [folder for folder in (trace.parent, *trace.parent.parents) if not folder.exists()]
    had_trace = trace.exists()
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        trace.parent.mkdir(parents=True, exist_ok=True)
        spans = CountedSpans(select_spans(source, run_id))
        write_spans(str(trace), writers.json_lines(spans), spans)
        _write_text(output, text)
    except BaseException:
        if not had_trace:
            with contextlib.suppress(OSError):
                trace.unlink()
        for folder in made:  # the deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    return spans.count


def _write_text(path: Path, text: str) -> None:
    part = path.with_name(f".{path.name}.part")
    try:
        part.write_text(text, encoding="utf-8")
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(OSError):
            part.unlink()
        raise


def checked_module_text(log: EventLog, module: str, function: str, *, is_async: bool, root: str) -> str:
    """``module_text``, once its syntax tree is shown to be the template's: the trace's values are data.

    The same template is filled with neutral values in the places the trace fills
    (the agent, the error, the failing step's kind and key); the two trees must be
    the same but for their string constants, and every call must be one the template
    makes. A value from the trace that became code would change the tree.
    """
    text = module_text(log, module, function, is_async=is_async, root=root)
    where = f"the test written for run {log.run.run_id!r}"
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise UnsafeTraceValueError(
            f"{where} would not be valid Python ({exc.msg}, line {exc.lineno}): a value from the trace did "
            "not stay a string. Nothing was written; report this with the trace."
        ) from None
    template = ast.parse(module_text(log, module, function, is_async=is_async, root=root, neutral=True))
    allowed = {ast.dump(node.func) for node in ast.walk(template) if isinstance(node, ast.Call)}
    calls = [node.func for node in ast.walk(tree) if isinstance(node, ast.Call)]
    strange = sorted({ast.unparse(func) for func in calls if ast.dump(func) not in allowed})
    if strange or _shape(tree) != _shape(template):
        what = (
            f"would call {', '.join(strange)}, which the template does not" if strange else "differs from the template"
        )
        raise UnsafeTraceValueError(
            f"{where} {what}: a value from the trace would have become code. Nothing was written; the trace "
            "was not written by spanreplay or was edited, so export a run from a trace you trust."
        )
    return text


def _shape(tree: ast.AST) -> str:
    """The tree without its string constants: what the code does, whatever the strings say."""
    blank = copy.deepcopy(tree)
    for node in ast.walk(blank):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(blank)


def module_text(log: EventLog, module: str, function: str, *, is_async: bool, root: str, neutral: bool = False) -> str:
    """The text of the test module for ``log``, calling ``module:function`` (from ``root``, relative).

    Every value read from the trace is written as ``repr()`` of a ``str``, in code
    or in a comment, and the run id is a plain one (``checked_run_id``) before it
    names the test function. With ``neutral``, those values are replaced by plain
    words (the template ``checked_module_text`` compares against).
    """
    run = log.run
    run_id = checked_run_id(run.run_id, where="the run being exported")
    call = f"asyncio.run({function}())" if is_async else f"{function}()"
    error = run.error
    step = failing_step(log) if error is not None else None

    def shown(value: object, plain: str) -> str:
        return repr(plain if neutral else str(value))

    lines = [
        '"""A recorded run, replayed as recorded (written by spanreplay export-test).',
        "",
        "The trace is TRACE below, beside this file: the run's steps, masked as recorded. No tool, model,",
        "clock or random source is called. The test fails with the divergence when the code stops matching",
        "it; run pytest with --spanreplay-mode=rewrite only to replace it with a new recording.",
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
        # Every value from the trace below is repr() of a str: it stays a string, in code and in comments.
        f"# Agent {shown(run.agent or 'agent', 'agent')}; steps recorded: {len(log)}.",
        f"RUN = {run_id!r}",
        f"TRACE = {f'traces/{run_id}.jsonl'!r}",
        "",
        "# Where export-test ran: the agent's module is imported from there, as spanreplay replay does.",
        f"ROOT = str((Path(__file__).parent / {root!r}).resolve())",
        "if ROOT not in sys.path:",
        "    sys.path.insert(0, ROOT)",
        "",
        f"from {module} import {function.split('.')[0]}  # noqa: E402",
        "",
        "",
        "@pytest.mark.spanreplay(trace=TRACE, run=RUN)",
    ]
    ident = ident_of(run_id)
    if error is None:
        lines += [
            f"def test_{ident}_completes_as_recorded(spanreplay_run: object) -> None:",
            f"    {call}",
        ]
    else:
        lines += [
            f"def test_{ident}_fails_as_recorded(spanreplay_run: object) -> None:",
            f"    # Recorded: {shown(error, 'error')}",
        ]
        if step is not None:
            kind, key = shown(step.kind, "kind"), shown(step.key, "key")
            lines.append(f"    # at seq {int(step.seq)}, kind {kind}, key {key}.")
        lines += [
            "    with pytest.raises(Exception) as raised:  # noqa: PT011",
            f"        {call}",
            "    # The recorded type, rebuilt, or a RecordedError that names it; no step left over",
            "    # (the plugin checks) means the failure came where it was recorded.",
            '    assert getattr(raised.value, "type_name", type(raised.value).__qualname__) == '
            + shown(error.type_name, "Error"),
        ]
        if step is not None and error.message:
            # A replayed step raises the recorded message itself; an error raised between the
            # boundaries holds the live one, which masking may have changed in the recording.
            lines.append(f"    assert {shown(error.message, 'message')} in str(raised.value)")
    return "\n".join(lines) + "\n"

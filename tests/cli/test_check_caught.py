"""A divergence the agent catches names one seq: in its message, ``.seq``, the note and ``check``."""

from __future__ import annotations

import importlib
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

import spanreplay
from spanreplay.cli import CliState, cli

# plan() holds two nested draws, so the recording's seqs run past the calls the code
# makes on replay (nested calls are served with their parent); EXTRA makes one more
# call, which the agent catches.
AGENT = """
import spanreplay

EXTRA = {extra!r}


@spanreplay.tool
def plan(goal: str) -> list:
    return [goal, spanreplay.random(), spanreplay.random()]


@spanreplay.tool
def lookup(n: int) -> int:
    return n


def main():
    plan("ship")
    if EXTRA:
        try:
            lookup(1)
        except Exception:
            pass
    return "done"
"""


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, trace_dir: Path) -> Iterator[tuple[Path, ModuleType]]:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    name = f"caught_{uuid.uuid4().hex[:10]}"
    path = tmp_path / f"{name}.py"
    path.write_text(AGENT.format(extra=False))
    module = importlib.import_module(name)
    yield path, module
    sys.modules.pop(name, None)


def test_a_caught_unexpected_call_names_the_same_seq_in_message_attribute_note_and_check(
    agent: tuple[Path, ModuleType], trace_dir: Path
) -> None:
    path, module = agent
    with spanreplay.record(agent="caught") as run:
        module.main()
    assert [e.seq for e in spanreplay.load(trace_dir, run.run_id)] == [1, 2, 3]

    path.write_text(AGENT.format(extra=True))
    module = importlib.reload(module)
    replaying = spanreplay.replay(trace_dir, run.run_id)
    with pytest.raises(spanreplay.UnexpectedCallError) as caught, replaying:
        module.main()
    error = caught.value
    seq = error.seq
    assert seq is not None
    first_line = str(error).split("\n", 1)[0]
    assert f"diverged at seq {seq} " in first_line, first_line
    assert "after seq" not in first_line
    assert f"caught this error at seq {seq} and went on" in "\n".join(error.__notes__)

    result = CliRunner().invoke(
        cli, ["check", "traces", "--entry", f"{path.stem}:main", "--json"], obj=CliState(), prog_name="spanreplay"
    )
    assert result.exit_code == 1, result.output
    (verdict,) = json.loads(result.stdout)["runs"]
    assert (verdict["outcome"], verdict["seq"], verdict["error_type"]) == ("diverged", seq, "UnexpectedCallError")
    assert f"diverged at seq {seq} " in verdict["reason"].split("\n", 1)[0]

"""A trace another instrumentation recorded is costed under the run id and agent ``spanreplay runs`` lists it by."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from helpers.foreign_fixtures import FILES, FOREIGN
from spanreplay.cli import cli
from spanreplay.cost import PRICES_ENV


def _json(*args: str) -> Any:
    result = CliRunner().invoke(cli, [*args, "--json"], prog_name="spanreplay")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("name", ["openinference-create.binpb", "openllmetry-stream.binpb"])
def test_cost_names_a_foreign_run_and_its_agent_as_runs_lists_them(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PRICES_ENV, raising=False)
    source = str(FOREIGN / name)
    (listed,) = _json("runs", source)
    assert listed["agent"] == FILES[name]
    assert listed["model_calls"] > 0

    by_agent = _json("cost", source, "--by", "agent")
    assert [group["agent"] for group in by_agent["groups"]] == [listed["agent"]]
    assert by_agent["groups"][0]["calls"] == listed["model_calls"]

    (by_run,) = _json("cost", source, "--by", "run")["groups"]
    assert (by_run["run"], by_run["agent"], by_run["status"]) == (listed["run_id"], listed["agent"], listed["status"])
    assert by_run["calls"] == listed["model_calls"]

    table = CliRunner().invoke(cli, ["cost", source, "--by", "run"], prog_name="spanreplay")
    assert table.exit_code == 0, table.output
    (row,) = [line for line in table.stdout.splitlines() if listed["run_id"][:12] in line]
    assert listed["agent"] in row

"""The tests' own layout: a folder per area of the code, and no test module importing another.

What test modules share lives in helpers/, fixtures/ or a conftest.py. A test
module that imports another runs that module's tests' set-up as a side effect,
depends on the order pytest collects them in, and breaks when either moves.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers.paths import TESTS

# One folder per area of src/spanreplay; api/ holds the public surface and what no other area fits.
AREAS = {
    "api",
    "cli",
    "cost",
    "exporters",
    "frameworks",
    "instrumentation",
    "lint",
    "masking",
    "readers",
    "record",
    "replay",
}
TEST_MODULES = sorted(TESTS.rglob("test_*.py"))
SHARED_MODULES = sorted({*(TESTS / "helpers").rglob("*.py"), *(TESTS / "fixtures").glob("*.py")})


def _names_a_test_module(name: str) -> bool:
    return any(part.startswith("test_") or part == "conftest" for part in name.split("."))


def imports_of_test_modules(source: str) -> list[str]:
    """The imports in ``source`` that name a test module or a conftest, as written."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if _names_a_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            if _names_a_test_module(base):
                found.append(base)
            else:  # a test module from its package: from tests.masking import test_x, from . import test_x
                found += [
                    base + ("" if base.endswith(".") else ".") + alias.name
                    for alias in node.names
                    if _names_a_test_module(alias.name)
                ]
    return found


def test_the_tests_are_found() -> None:
    assert len(TEST_MODULES) > 50
    assert Path(__file__) in TEST_MODULES


def test_no_test_or_shared_module_imports_a_test_module() -> None:
    found = {
        p.relative_to(TESTS).as_posix(): imports_of_test_modules(p.read_text()) for p in TEST_MODULES + SHARED_MODULES
    }
    assert {path: names for path, names in found.items() if names} == {}


def test_every_test_module_sits_in_the_folder_of_an_area() -> None:
    misplaced = [p.relative_to(TESTS).as_posix() for p in TEST_MODULES if p.parent.parent != TESTS]
    misplaced += [p.relative_to(TESTS).as_posix() for p in TEST_MODULES if p.parent.name not in AREAS]
    assert misplaced == []
    assert {p.parent.name for p in TEST_MODULES} == AREAS


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import test_postgres", ["test_postgres"]),
        ("import json, test_postgres as pg", ["test_postgres"]),
        ("from test_masking_samples import KINDS", ["test_masking_samples"]),
        ("from masking.test_masking_pipeline import FAST", ["masking.test_masking_pipeline"]),
        ("from tests.masking import test_masking_rewrite", ["tests.masking.test_masking_rewrite"]),
        ("from conftest import EDGE_DATES", ["conftest"]),
        ("from . import test_masking_samples", [".test_masking_samples"]),
        ("from .test_replay import agent", [".test_replay"]),
        ("def f():\n    import test_cli\n", ["test_cli"]),
    ],
)
def test_the_checker_finds_an_import_of_a_test_module(source: str, found: list[str]) -> None:
    assert imports_of_test_modules(source) == found


def test_the_checker_lets_helpers_and_the_library_through() -> None:
    source = "import spanreplay\nfrom helpers.masking_samples import planted\nfrom fixtures.recordings import lines\n"
    source += "from spanreplay.testing import MessagesAPIServer\nimport pytest\nfrom .paths import TESTS\n"
    assert imports_of_test_modules(source) == []

"""``spanreplay lint --fix``: one-to-one rewrites, by source position, and code that passes the lint after."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from spanreplay.cli import cli
from spanreplay.lint import lint_paths, lint_source
from spanreplay.lint._fix import apply_edits
from spanreplay.lint._visitor import scan

FIXTURE = Path(__file__).parent / "fixtures" / "direct_calls.py"

BEFORE = '''"""A module with its own layout."""

from __future__ import annotations

import time
import uuid as ids
from datetime import UTC, datetime
import random


def stamp(  extra:int=0 ) -> dict:   # odd spacing stays as it was
    return {'at': time.time(), "id": ids.uuid4(),
            "when": datetime.now(UTC), 'draw': random.random()}   # trailing comment
'''

AFTER = '''"""A module with its own layout."""

from __future__ import annotations

import time
import uuid as ids
from datetime import UTC, datetime
import random
import spanreplay


def stamp(  extra:int=0 ) -> dict:   # odd spacing stays as it was
    return {'at': spanreplay.time(), "id": spanreplay.uuid4(),
            "when": spanreplay.now(), 'draw': spanreplay.random()}   # trailing comment
'''


def test_fix_rewrites_in_place_and_adds_the_import(tmp_path: Path) -> None:
    module = tmp_path / "stamps.py"
    module.write_text(BEFORE)

    result = CliRunner().invoke(cli, ["lint", "--fix", str(module)])

    assert result.exit_code == 0, result.output
    assert "4 calls rewritten, no findings" in result.stderr
    assert module.read_text() == AFTER
    assert CliRunner().invoke(cli, ["lint", str(module)]).exit_code == 0


def test_fix_uses_the_modules_own_name_for_spanreplay_and_keeps_crlf(tmp_path: Path) -> None:
    module = tmp_path / "aliased.py"
    module.write_bytes(b"import time\r\nimport spanreplay as sr\r\n\r\nx = time.time()\r\n")

    lint_paths([module], fix=True)

    assert module.read_bytes() == b"import time\r\nimport spanreplay as sr\r\n\r\nx = sr.time()\r\n"


def test_fix_leaves_calls_without_a_one_to_one_replacement(tmp_path: Path) -> None:
    source = (
        "import random, uuid\n"
        "from datetime import datetime, timezone\n"
        "a = datetime.now()\n"  # naive local time: spanreplay.now() is aware UTC
        "b = datetime.now(timezone(offset))\n"
        "c = random.choice([1, 2])\n"
        "d = uuid.uuid1()\n"
        "e = random.random()  # noqa: SR201\n"
    )
    module = tmp_path / "kept.py"
    module.write_text(source)

    result = lint_paths([module], fix=True)

    assert result.fixed == 0
    assert module.read_text() == source
    assert [f.line for f in result.findings] == [3, 4, 5, 6]


def test_fix_on_the_fixture_leaves_only_calls_without_a_replacement(tmp_path: Path) -> None:
    module = tmp_path / "direct_calls.py"
    shutil.copyfile(FIXTURE, module)
    before = lint_paths([module]).findings
    fixable = [f for f in before if f.edit is not None]

    result = lint_paths([module], fix=True)

    assert result.fixed == len(fixable) >= 6
    ast.parse(module.read_text())
    after = lint_paths([module]).findings
    assert [(f.code, f.message) for f in after] == [(f.code, f.message) for f in before if f.edit is None]
    assert all(f.edit is None for f in after)


_CALLS = {
    "time": ("import time as {a}", "{a}.time()"),
    "random": ("import random as {a}", "{a}.random()"),
    "uuid": ("from uuid import uuid4 as {a}", "{a}()"),
    "now": ("from datetime import datetime as {a}, UTC", "{a}.now(UTC)"),
    "now_tz": ("import datetime as {a}", "{a}.datetime.now(tz={a}.timezone.utc)"),
}


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(st.sampled_from(sorted(_CALLS)), min_size=1, max_size=6),
    docstring=st.booleans(),
    spaces=st.sampled_from(["", " ", "  "]),
    text=st.text(alphabet="aé€ 𝄞", max_size=4),
)
def test_fixed_code_parses_and_passes_the_lint(picks: list[str], docstring: bool, spaces: str, text: str) -> None:
    imports, lines = [], []
    for number, pick in enumerate(picks):
        alias = f"m{number}"
        template_import, template_call = _CALLS[pick]
        imports.append(template_import.format(a=alias))
        lines.append(f"v{number} = ({text!r},{spaces}{template_call.format(a=alias)}, {text!r})")
    source = ('"""Doc."""\n' if docstring else "") + "\n".join(imports) + "\n\n" + "\n".join(lines) + "\n"

    module = scan("m.py", source)
    edits = [f.edit for f in module.findings if f.edit is not None]
    assert len(edits) == len(picks)
    fixed = apply_edits(source, edits, add_import_after=module.import_line)

    ast.parse(fixed)
    assert lint_source(fixed) == []
    assert fixed.count("import spanreplay\n") == 1
    assert fixed.count(repr(text)) == 2 * len(picks)


def test_fix_keeps_a_bom_and_a_declared_encoding(tmp_path: Path) -> None:
    with_bom = tmp_path / "bom.py"
    with_bom.write_bytes(b"\xef\xbb\xbfimport time\nx = ('\xc3\xa9', time.time())\n")
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# -*- coding: latin-1 -*-\nimport time\nx = ('\xe9', time.time())\n")

    result = lint_paths([with_bom, latin], fix=True)

    assert (result.fixed, result.findings) == (2, [])
    assert with_bom.read_bytes() == b"\xef\xbb\xbfimport time\nimport spanreplay\nx = ('\xc3\xa9', spanreplay.time())\n"
    assert (
        latin.read_bytes()
        == b"# -*- coding: latin-1 -*-\nimport time\nimport spanreplay\nx = ('\xe9', spanreplay.time())\n"
    )

"""The public surface: everything exported is listed, and everything listed exists."""

from __future__ import annotations

import types

import spanreplay
import spanreplay.errors


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name, value in vars(spanreplay).items()
        if not name.startswith("_") and name != "annotations" and not isinstance(value, types.ModuleType)
    }
    assert spanreplay.__all__ == sorted(spanreplay.__all__)
    assert public <= set(spanreplay.__all__)
    for name in spanreplay.__all__:
        assert hasattr(spanreplay, name), name


def test_every_error_derives_from_the_one_root() -> None:
    for name in spanreplay.errors.__all__:
        cls = getattr(spanreplay.errors, name)
        assert issubclass(cls, spanreplay.SpanReplayError), name
    assert issubclass(spanreplay.TraceFormatError, ValueError)
    assert issubclass(spanreplay.RunNotFoundError, LookupError)


def test_every_spanreplay_variable_is_read_in_one_module_and_listed_in_the_readme() -> None:
    import ast
    from pathlib import Path

    from spanreplay._environment import VARIABLES

    src = Path(spanreplay.__file__).parent
    readers = []
    for path in src.rglob("*.py"):
        if path.name == "_environment.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            # os.environ.get("SPANREPLAY_..."), os.environ["SPANREPLAY_..."], os.getenv("SPANREPLAY_...")
            if isinstance(node, (ast.Call, ast.Subscript)):
                text = ast.unparse(node)
                if ("environ" in text or "getenv" in text) and "SPANREPLAY_" in text:
                    readers.append(f"{path.relative_to(src)}:{node.lineno}")
    assert readers == []
    readme = (src.parents[1] / "README.md").read_text()
    assert [name for name in VARIABLES if f"| `{name}` |" not in readme] == []


def test_a_name_that_left_all_still_imports_with_a_warning() -> None:
    import pytest

    from spanreplay.recording.recording_run import RecordingRun

    assert "RecordingRun" not in spanreplay.__all__
    assert "RecordingRun" not in vars(spanreplay)
    with pytest.warns(DeprecationWarning, match="spanreplay.recording.recording_run"):
        assert spanreplay.RecordingRun is RecordingRun  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        spanreplay.NoSuchName  # type: ignore[attr-defined]  # noqa: B018


def _readme() -> str:
    from pathlib import Path

    return (Path(spanreplay.__file__).parents[2] / "README.md").read_text()


def test_every_exported_name_is_documented_in_the_readme() -> None:
    readme = _readme()
    undocumented = [
        name
        for name in spanreplay.__all__
        if not any(form in readme for form in (f"`{name}`", f"`{name}(", f"`spanreplay.{name}", f"`@{name}"))
    ]
    assert undocumented == []


def test_every_exported_error_has_a_row_in_the_readme_error_table() -> None:
    readme = _readme()
    table = readme[readme.index("| error | raised when | the fix |") :]
    table = table[: table.index("\n\n")]
    rows = {line.split("|")[1].strip().split()[0].strip("`"): line for line in table.splitlines()[2:]}
    errors = [name for name in spanreplay.__all__ if name.endswith("Error")]
    assert sorted(errors) == sorted(rows)
    for name, row in rows.items():
        assert all(cell.strip() for cell in row.split("|")[1:-1]), name

"""docs/api.md is generated from the docstrings, and must be current: the CI step runs the same check."""

from __future__ import annotations

import importlib.util
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "gen_api.py"


def _generator() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("gen_api", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def gen_api() -> types.ModuleType:
    return _generator()


def test_every_public_name_has_a_docstring(gen_api: types.ModuleType) -> None:
    missing = gen_api.missing_docstrings()
    assert missing == [], f"public names without a docstring (a constant: a comment above it): {missing}"


def test_docs_api_md_is_current(gen_api: types.ModuleType) -> None:
    expected = gen_api.render()
    current = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert current == expected, "docs/api.md is not current; run: python docs/gen_api.py"


def test_the_reference_is_deterministic(gen_api: types.ModuleType) -> None:
    text = gen_api.render()
    assert text == _generator().render()
    assert " at 0x" not in text
    assert "0x7f" not in text


def test_the_reference_lists_every_name_of_every_documented_module(gen_api: types.ModuleType) -> None:
    text = gen_api.render()
    for module_name in gen_api.MODULES:
        module = importlib.import_module(module_name)
        for name in gen_api.public_names(module):
            # semconv's constants are one table, by their bare names; its functions are documented as any.
            constant = module_name == "spanreplay.semconv" and not callable(getattr(module, name))
            entry = f"| `{name}` |" if constant else f"`{module_name}.{name}`"
            assert entry in text, f"{module_name}.{name}"


def test_a_name_without_a_docstring_is_reported(gen_api: types.ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    import spanreplay

    def undocumented() -> None:
        pass

    monkeypatch.setattr(spanreplay, "undocumented", undocumented, raising=False)
    monkeypatch.setattr(spanreplay, "__all__", [*spanreplay.__all__, "undocumented"])
    assert "spanreplay.undocumented" in gen_api.missing_docstrings()
    assert gen_api.main(["--check"]) == 1


def test_check_names_the_command_when_the_file_is_stale(
    gen_api: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stale = tmp_path / "api.md"
    stale.write_text("# API reference\n", encoding="utf-8")
    monkeypatch.setattr(gen_api, "OUTPUT", stale)
    assert gen_api.main(["--check"]) == 1
    assert "run: python docs/gen_api.py" in capsys.readouterr().err
    assert gen_api.main([]) == 0
    assert gen_api.main(["--check"]) == 0

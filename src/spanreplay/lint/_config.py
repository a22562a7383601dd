"""``[tool.spanreplay.lint]`` in pyproject.toml: which rules, which files.

The table is looked for upward from each linted file; the nearest
pyproject.toml that holds it applies, and its paths are relative to that
file's folder::

    [tool.spanreplay.lint]
    select = ["SR1", "SR2"]           # rule ids or prefixes; default: every rule
    ignore = ["SR103"]
    exclude = ["scripts/", "tests/fixtures/*.py"]
    per-file-ignores = { "tests/**" = ["SR2"] }
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Final

from spanreplay.errors import ConfigurationError

from ._rules import is_rule_selector

__all__ = ["LintConfig", "check_rules", "config_for", "load_config"]

_KEYS: Final = ("select", "ignore", "exclude", "per-file-ignores")


@dataclass(frozen=True)
class LintConfig:
    """The lint settings that apply to a file.

    Attributes:
        select: rule ids or prefixes to report (``SR`` is every rule).
        ignore: rule ids or prefixes never to report; wins over ``select``.
        exclude: glob patterns of files and folders not to lint, relative to ``root``.
        per_file_ignores: (pattern, rule prefixes) pairs: rules ignored in the files a pattern matches.
        root: the folder the patterns are relative to (the pyproject.toml's), or None.
    """

    select: tuple[str, ...] = ("SR",)
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    root: Path | None = None
    source: Path | None = field(default=None, compare=False)

    def reports(self, code: str, path: Path) -> bool:
        """Whether a finding of rule ``code`` in ``path`` is reported."""
        if not any(code.startswith(prefix) for prefix in self.select):
            return False
        if any(code.startswith(prefix) for prefix in self.ignore):
            return False
        relative = self._relative(path)
        return not any(
            _matches(relative, pattern) and any(code.startswith(prefix) for prefix in prefixes)
            for pattern, prefixes in self.per_file_ignores
        )

    def excludes(self, path: Path) -> bool:
        """Whether ``path`` (a file or a folder) is left out of the lint."""
        relative = self._relative(path)
        return any(_matches(relative, pattern) for pattern in self.exclude)

    def _relative(self, path: Path) -> str:
        root = self.root or Path.cwd()
        try:
            return path.resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return path.as_posix()


def _matches(relative: str, pattern: str) -> bool:
    """A glob, or a folder that holds the path (``scripts/`` and ``scripts`` both match ``scripts/x.py``)."""
    folder = pattern.rstrip("/")
    if not folder:
        return False
    return (
        fnmatch.fnmatchcase(relative, folder)
        or relative.startswith(folder + "/")
        or PurePath(relative).match(folder)
        or fnmatch.fnmatchcase(relative, folder + "/*")
    )


def load_config(pyproject: Path) -> LintConfig | None:
    """The ``[tool.spanreplay.lint]`` table of one pyproject.toml, or None when it has none."""
    try:
        with pyproject.open("rb") as file:
            document = tomllib.load(file)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{pyproject} is not valid TOML ({exc}); fix the file or remove it.") from exc
    except OSError as exc:
        raise ConfigurationError(f"{pyproject} cannot be read ({exc.strerror}).") from exc
    table = document.get("tool", {}).get("spanreplay", {}).get("lint")
    if table is None:
        return None
    where = f"[tool.spanreplay.lint] in {pyproject}"
    if not isinstance(table, dict):
        raise ConfigurationError(f"{where} must be a table of settings, not {type(table).__name__}.")
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigurationError(f"{where} has unknown key {unknown[0]!r}; the keys are {', '.join(_KEYS)}.")
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, Mapping):
        raise ConfigurationError(f"{where}: per-file-ignores must be a table of pattern = [rule ids].")
    return LintConfig(
        select=_rules(table.get("select", ["SR"]), "select", where),
        ignore=_rules(table.get("ignore", []), "ignore", where),
        exclude=_strings(table.get("exclude", []), "exclude", where),
        per_file_ignores=tuple(
            (str(pattern), _rules(codes, f"per-file-ignores {pattern!r}", where)) for pattern, codes in per_file.items()
        ),
        root=pyproject.parent,
        source=pyproject,
    )


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigurationError(f'{where}: {key} must be a list of strings, like {key} = ["SR101"].')
    return tuple(value)


def _rules(value: Any, key: str, where: str) -> tuple[str, ...]:
    codes = tuple(code.strip().upper() for code in _strings(value, key, where))
    check_rules(codes, f"{where}: {key}")
    return codes


def check_rules(codes: Iterable[str], where: str) -> None:
    """Raise ConfigurationError naming the first code that names no rule."""
    for code in codes:
        if not is_rule_selector(code):
            raise ConfigurationError(
                f"{where} names {code!r}, which is no spanreplay lint rule; the rules are SR101-SR103 (clock), "
                "SR201-SR203 (randomness) and SR301-SR302 (network), see docs/testing.md."
            )


def config_for(path: Path, cache: dict[Path, LintConfig]) -> LintConfig:
    """The settings for ``path``: the nearest pyproject.toml upward with ``[tool.spanreplay.lint]``.

    ``cache`` holds what one lint run has read already, by folder.
    """
    folder = path.resolve()
    if not folder.is_dir():
        folder = folder.parent
    seen: list[Path] = []
    found = LintConfig()
    for candidate in (folder, *folder.parents):
        if candidate in cache:
            found = cache[candidate]
            break
        seen.append(candidate)
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file():
            loaded = load_config(pyproject)
            if loaded is not None:
                found = loaded
                break
    for candidate in seen:
        cache[candidate] = found
    return found

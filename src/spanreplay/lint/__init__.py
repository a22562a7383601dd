"""The determinism lint: find the direct calls that make a replay diverge, without importing the code.

``spanreplay lint PATH...`` on the command line; ``lint_paths`` here. The rules
are in ``RULES`` (and in docs/testing.md); ``# noqa: SR101`` on a line silences
a rule there, and ``[tool.spanreplay.lint]`` in pyproject.toml selects rules
and leaves paths out.
"""

from __future__ import annotations

import io
import os
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from spanreplay.errors import ConfigurationError

from ._config import LintConfig, check_rules, config_for, load_config
from ._fix import apply_edits
from ._rules import PARSE_ERROR, RULES, Rule
from ._visitor import Finding, noqa_codes, package_of, scan

__all__ = ["RULES", "Finding", "LintConfig", "LintResult", "Rule", "lint_paths", "lint_source", "load_config"]

# Folders that hold no code of the project's own.
_SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages"})


@dataclass
class LintResult:
    """What one lint run found.

    Attributes:
        findings: the reported findings, by file, line and column.
        files: how many files were read.
        fixed: how many calls ``fix=True`` rewrote (they are not in ``findings``).
    """

    findings: list[Finding] = field(default_factory=list)
    files: int = 0
    fixed: int = 0

    @property
    def fixable(self) -> int:
        """How many of the findings ``--fix`` would rewrite."""
        return sum(1 for finding in self.findings if finding.edit is not None)


def lint_source(
    source: str, path: str = "<string>", *, config: LintConfig | None = None, package: str | None = None
) -> list[Finding]:
    """The reported findings in one module's source (noqa and ``config`` applied)."""
    return _reported(source, path, Path(path), config or LintConfig(), package)


def _reported(source: str, shown: str, path: Path, config: LintConfig, package: str | None) -> list[Finding]:
    try:
        module = scan(shown, source, package)
    except SyntaxError as exc:
        line, col = exc.lineno or 1, (exc.offset or 1)
        return [Finding(shown, line, col, PARSE_ERROR.code, f"cannot be parsed: {exc.msg}; the lint reads Python 3.11")]
    noqa = noqa_codes(source)
    return [
        finding
        for finding in module.findings
        if config.reports(finding.code, path) and not _silenced(finding, noqa.get(finding.line, frozenset()))
    ]


def _silenced(finding: Finding, codes: frozenset[str] | None) -> bool:
    return codes is None or finding.code in codes


def lint_paths(
    paths: Sequence[str | os.PathLike[str]],
    *,
    select: Sequence[str] | None = None,
    ignore: Sequence[str] = (),
    fix: bool = False,
) -> LintResult:
    """Lint files and folders (``*.py`` under a folder, recursively).

    Args:
        paths: files and folders; a folder's hidden subfolders and ``__pycache__`` are skipped.
        select: rule ids or prefixes that replace the config's ``select``.
        ignore: rule ids or prefixes ignored on top of the config's ``ignore``.
        fix: rewrite the calls that have a one-to-one replacement, then report the rest.

    Raises:
        ConfigurationError: a path that does not exist, an unknown rule, a bad config table.
    """
    check_rules(select or (), "--select")
    check_rules(ignore, "--ignore")
    cache: dict[Path, LintConfig] = {}
    result = LintResult()
    for path in _files(paths, cache):
        config = config_for(path, cache)
        if select is not None or ignore:
            config = LintConfig(
                select=tuple(select) if select is not None else config.select,
                ignore=(*config.ignore, *ignore),
                exclude=config.exclude,
                per_file_ignores=config.per_file_ignores,
                root=config.root,
            )
        result.files += 1
        result.findings.extend(_lint_file(path, config, result, fix=fix))
    return result


def _lint_file(path: Path, config: LintConfig, result: LintResult, *, fix: bool) -> list[Finding]:
    shown = str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"{shown} cannot be read ({exc.strerror}).") from exc
    try:
        # PEP 263: a coding cookie or a BOM says how the file is encoded; --fix writes it back so.
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
        source = raw.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError) as exc:
        message = f"cannot be decoded ({exc}); save it as UTF-8 or declare its encoding"
        return [Finding(shown, 1, 1, PARSE_ERROR.code, message)]
    package = package_of(path)
    findings = _reported(source, shown, path, config, package)
    edits = [finding.edit for finding in findings if finding.edit is not None]
    if not fix or not edits:
        return findings
    module = scan(shown, source, package)
    fixed = apply_edits(source, edits, add_import_after=None if module.spanreplay_name else module.import_line)
    path.write_bytes(fixed.encode(encoding))
    result.fixed += len(edits)
    return _reported(fixed, shown, path, config, package)


def _files(paths: Iterable[str | os.PathLike[str]], cache: dict[Path, LintConfig]) -> Iterator[Path]:
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if not path.exists():
            raise ConfigurationError(f"{path} does not exist; name Python files or folders that hold them.")
        found = [path] if path.is_file() else _walk(path, cache)
        for file in found:
            key = file.resolve()
            if key not in seen and not config_for(file, cache).excludes(file):
                seen.add(key)
                yield file


def _walk(folder: Path, cache: dict[Path, LintConfig]) -> Iterator[Path]:
    for entry in sorted(folder.iterdir()):
        if entry.is_dir():
            hidden = entry.name.startswith(".") or entry.name in _SKIPPED_FOLDERS
            if not hidden and not config_for(entry, cache).excludes(entry):
                yield from _walk(entry, cache)
        elif entry.suffix == ".py":
            yield entry

"""Reading one module: its import table, the calls that make replay diverge, and where they are allowed.

The lint reads the code (``ast``) and never imports it. A call is resolved
through the module's imports (``import time as t``, ``from datetime import
datetime as dt``, ``from random import choice``), so ``t.time()`` is
``time.time()`` and ``choice(xs)`` is ``random.choice(xs)``. A name the module
does not import is not resolved: a local ``datetime`` variable is not the module.

A call is allowed where spanreplay records it: in the body of a function
decorated with ``@spanreplay.tool`` (or ``@tool`` imported from spanreplay), in
the arguments of a ``spanreplay.boundary(...)`` call (``lambda: httpx.get(url)``),
and in a function of the module that is passed by name as a boundary's ``fn``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ._rules import RULES, SR103, Target, target_for

__all__ = ["Edit", "Finding", "ModuleScan", "noqa_codes", "package_of", "scan", "split_lines"]

_TOOL: Final = frozenset({"spanreplay.tool", "spanreplay.instrumentation.tools.tool"})
_BOUNDARY: Final = frozenset({"spanreplay.boundary", "spanreplay.api.runs.boundary"})
_UTC: Final = frozenset({"datetime.UTC", "datetime.timezone.utc"})
# The argument of boundary(kind, key, input, fn) that holds the real work.
_BOUNDARY_FN_INDEX: Final = 3


@dataclass(frozen=True)
class Edit:
    """Replace the source from ``start`` to ``end`` (line from 1, column in UTF-8 bytes, as ``ast`` gives)."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str


@dataclass(frozen=True)
class Finding:
    """One call that makes a replay diverge.

    Attributes:
        path: the file, as the lint was given it.
        line: the line, from 1.
        col: the column, from 1, in characters.
        code: the rule id (``SR101``).
        message: what the call does and what to use instead.
        edit: the one-to-one rewrite ``--fix`` applies, or None.
    """

    path: str
    line: int
    col: int
    code: str
    message: str
    edit: Edit | None = None

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"


@dataclass(frozen=True)
class ModuleScan:
    """What the lint found in one module, and what ``--fix`` needs to know about it.

    Attributes:
        findings: every finding, noqa'd ones included (the caller filters).
        spanreplay_name: the name the module binds ``spanreplay`` to, or None when it does not import it.
        import_line: the line after which ``--fix`` adds ``import spanreplay`` (0: the top).
    """

    findings: list[Finding]
    spanreplay_name: str | None
    import_line: int


def package_of(path: Path) -> str | None:
    """The dotted package a file belongs to (its folders that hold an ``__init__.py``), or None."""
    parts: list[str] = []
    folder = path.resolve().parent
    while (folder / "__init__.py").is_file():
        parts.append(folder.name)
        if folder.parent == folder:
            break
        folder = folder.parent
    return ".".join(reversed(parts)) or None


def _import_table(tree: ast.Module, package: str | None) -> dict[str, str]:
    """Local name -> the dotted name it stands for, from every import in the module."""
    table: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    table[alias.asname] = alias.name
                else:
                    first = alias.name.split(".")[0]
                    table[first] = first
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            if module is None:
                continue
            for alias in node.names:
                if alias.name != "*":
                    table[alias.asname or alias.name] = f"{module}.{alias.name}"
    return table


def _absolute(node: ast.ImportFrom, package: str | None) -> str | None:
    if not node.level:
        return node.module
    if package is None:
        return None
    parts = package.split(".")
    if node.level - 1 >= len(parts):
        return None
    base = ".".join(parts[: len(parts) - (node.level - 1)])
    return f"{base}.{node.module}" if node.module else base


def _qualified(node: ast.expr, table: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return table.get(node.id)
    if isinstance(node, ast.Attribute):
        base = _qualified(node.value, table)
        return None if base is None else f"{base}.{node.attr}"
    return None


class _Scanner:
    def __init__(self, path: str, source: str, tree: ast.Module, package: str | None) -> None:
        self.path = path
        self.lines = [line.encode() for line in split_lines(source)]
        self.table = _import_table(tree, package)
        self.spanreplay = next((local for local, name in self.table.items() if name == "spanreplay"), None)
        self.parents: dict[ast.AST, ast.AST] = {
            child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)
        }
        self.boundary_bodies = self._boundary_bodies(tree)
        self.findings: list[Finding] = []

    def _is(self, node: ast.expr, names: frozenset[str]) -> bool:
        return _qualified(node.func if isinstance(node, ast.Call) else node, self.table) in names

    def _boundary_bodies(self, tree: ast.Module) -> set[str]:
        """Names of functions the module hands to ``boundary()`` as the real work."""
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and self._is(node, _BOUNDARY):
                fns = [kw.value for kw in node.keywords if kw.arg == "fn"]
                fns += node.args[_BOUNDARY_FN_INDEX : _BOUNDARY_FN_INDEX + 1]
                names.update(fn.id for fn in fns if isinstance(fn, ast.Name))
        return names

    def visit(self, node: ast.AST, *, allowed: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            outer: list[ast.AST] = [*node.decorator_list, node.args]
            if node.returns is not None:
                outer.append(node.returns)
            for part in outer:
                self.visit(part, allowed=allowed)
            inner = allowed or node.name in self.boundary_bodies or any(self._is(d, _TOOL) for d in node.decorator_list)
            for statement in node.body:
                self.visit(statement, allowed=inner)
            return
        if isinstance(node, ast.Call):
            if not allowed:
                self._check(node)
            allowed = allowed or self._is(node, _BOUNDARY)
        for child in ast.iter_child_nodes(node):
            self.visit(child, allowed=allowed)

    def _check(self, call: ast.Call) -> None:
        qualified = _qualified(call.func, self.table)
        if qualified is None:
            return
        target = target_for(qualified, len(call.args), len(call.keywords))
        if target is None or (target.rule is SR103 and self._measures(call)):
            return
        line_bytes = self.lines[call.lineno - 1] if call.lineno <= len(self.lines) else b""
        col = len(line_bytes[: call.col_offset].decode(errors="replace")) + 1
        rule = RULES[target.rule.code]
        self.findings.append(
            Finding(
                self.path,
                call.lineno,
                col,
                rule.code,
                f"{target.shown}() {rule.problem}; {rule.advice}",
                self._edit(call, target),
            )
        )

    def _edit(self, call: ast.Call, target: Target) -> Edit | None:
        if target.replacement is None or call.end_lineno is None or call.end_col_offset is None:
            return None
        arguments = [*call.args, *(kw.value for kw in call.keywords)]
        if target.replacement == "now":
            # Only datetime.now(UTC) is spanreplay.now(): now() is naive local time, and a
            # naive and an aware datetime do not even compare.
            keywords_ok = all(kw.arg == "tz" for kw in call.keywords)
            if len(arguments) != 1 or not keywords_ok or _qualified(arguments[0], self.table) not in _UTC:
                return None
        elif arguments:
            return None
        name = self.spanreplay or "spanreplay"
        return Edit(
            (call.lineno, call.col_offset), (call.end_lineno, call.end_col_offset), f"{name}.{target.replacement}()"
        )

    def _measures(self, call: ast.Call) -> bool:
        """A monotonic or perf_counter read that only measures: ``start = ...`` or ``... - start``.

        Outside a condition (an ``if``, ``while``, ``assert``, a comparison, a
        ternary's test) and not returned: an elapsed time for a log line does not
        change what the code does, so replay does not care that it differs.
        """
        parent = self.parents[call]
        if isinstance(parent, ast.Assign | ast.AnnAssign) and parent.value is call:
            return all(isinstance(t, ast.Name | ast.Attribute) for t in _targets(parent))
        if not (isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Sub)):
            return False
        node: ast.AST = parent
        parent = self.parents[node]
        while not isinstance(parent, ast.stmt):
            if isinstance(parent, ast.Compare | ast.BoolOp) or (isinstance(parent, ast.IfExp) and parent.test is node):
                return False
            node, parent = parent, self.parents[parent]
        return not isinstance(parent, ast.If | ast.While | ast.Assert | ast.Return)


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return node.targets if isinstance(node, ast.Assign) else [node.target]


_LINE: Final = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(source: str) -> list[str]:
    """Lines as the tokenizer counts them (``str.splitlines`` also splits on form feeds)."""
    return _LINE.findall(source)


def _import_anchor(tree: ast.Module) -> int:
    """The line after which a new import goes: the end of the leading imports, or of the docstring."""
    anchor = 0
    for index, statement in enumerate(tree.body):
        docstring = index == 0 and isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        if docstring or isinstance(statement, ast.Import | ast.ImportFrom):
            anchor = statement.end_lineno or statement.lineno
        else:
            break
    return anchor


def scan(path: str, source: str, package: str | None = None) -> ModuleScan:
    """Every finding in ``source`` (a module read from ``path``). Raises SyntaxError."""
    tree = ast.parse(source, filename=path)
    scanner = _Scanner(path, source, tree, package)
    scanner.visit(tree, allowed=False)
    return ModuleScan(scanner.findings, scanner.spanreplay, _import_anchor(tree))


_NOQA: Final = re.compile(r"#\s*noqa(?::[\s]?(?P<codes>[A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?", re.IGNORECASE)


def noqa_codes(source: str) -> dict[int, frozenset[str] | None]:
    """Line -> the codes its ``# noqa:`` comment names (None: a bare ``# noqa``, every code).

    Read from the tokens, so ``"# noqa"`` inside a string is not a comment.
    """
    found: dict[int, frozenset[str] | None] = {}
    for token in _comments(source):
        match = _NOQA.search(token.string)
        if match is None:
            continue
        codes = match.group("codes")
        found[token.start[0]] = None if codes is None else frozenset(re.split(r"[,\s]+", codes.upper()))
    return found


def _comments(source: str) -> Iterator[tokenize.TokenInfo]:
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == tokenize.COMMENT:
                yield token
    except (tokenize.TokenError, SyntaxError):  # the parse already succeeded; a tokenizer quirk ends the scan
        return

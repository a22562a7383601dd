"""The layout of src/spanreplay: modules a maintainer can read whole, imports that form no loop.

Three rules, checked on the source with ``ast`` (nothing is imported):

- no module is over 500 lines;
- no module imports another module's private (``_name``) names: a name used
  across modules is public within the package, so it drops the underscore and
  lives in a module whose name says what it holds;
- the imports between spanreplay's modules form no cycle (no strongly connected
  component). Every import that can run counts: at module level and inside
  functions and classes alike, since an import moved into a function still ties the
  two modules together. Only imports under ``if TYPE_CHECKING:`` are left out: they
  never run, and import-linter's layer contracts (pyproject.toml) check them.
"""

from __future__ import annotations

import ast
import functools
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import spanreplay

SRC = Path(spanreplay.__file__).parent
MAX_LINES = 500


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(path): path for path in sorted(SRC.rglob("*.py"))}


def is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


@dataclass(frozen=True)
class Import:
    """One spanreplay module that another imports."""

    source: str  # the importing module
    target: str  # the module that has to run first
    line: int
    names: tuple[str, ...]  # the names taken from it (``from target import ...``)


def resolve(module: str, level: int, name: str | None) -> str:
    """The absolute module a (possibly relative) import in ``module`` refers to."""
    if level == 0:
        return name or ""
    base = module.split(".") if is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_statements(node: ast.AST, *, type_checking: bool = False) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement in ``node``, in source order: at module level, in functions and classes, in
    any block. Those under ``if TYPE_CHECKING:`` (never run) only with ``type_checking``; its ``else`` runs."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
        return
    children: Iterable[ast.AST] = ast.iter_child_nodes(node)
    if isinstance(node, ast.If) and is_type_checking(node.test) and not type_checking:
        children = node.orelse
    for child in children:
        yield from import_statements(child, type_checking=type_checking)


def is_ancestor(package: str, module: str) -> bool:
    """Whether ``package`` is ``module`` itself or a package above it: already being imported."""
    return module == package or module.startswith(package + ".")


@functools.cache
def parsed(module: str) -> ast.Module:
    return ast.parse(MODULES[module].read_text(), str(MODULES[module]))


def imports(module: str, tree: ast.Module | None = None, *, type_checking: bool = False) -> Iterator[Import]:
    """Every spanreplay module ``module`` imports, anywhere in it, with the names it takes; those under
    ``if TYPE_CHECKING:`` only with ``type_checking``."""
    tree = tree or parsed(module)
    for node in import_statements(tree, type_checking=type_checking):
        if isinstance(node, ast.Import):
            for alias in node.names:
                # ``import spanreplay.a.b`` runs spanreplay.a first, unless it is being imported already.
                parts = alias.name.split(".")
                for n in range(1, len(parts) + 1):
                    name = ".".join(parts[:n])
                    if name in MODULES and not is_ancestor(name, module):
                        yield Import(module, name, node.lineno, ())
            continue
        target = resolve(module, node.level, node.module)
        if target not in MODULES:
            continue
        names = tuple(alias.name for alias in node.names)
        submodules = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
        for sub in submodules:
            yield Import(module, sub, node.lineno, ())
        attributes = tuple(n for n in names if f"{target}.{n}" not in MODULES)
        # ``from . import _file`` in a package being imported runs the submodule only;
        # a package that is not an ancestor runs its __init__ first.
        if attributes or not is_ancestor(target, module):
            yield Import(module, target, node.lineno, attributes)


def where(module: str, line: int | None = None) -> str:
    path = MODULES[module].relative_to(SRC.parent.parent) if SRC.parent.parent in MODULES[module].parents else module
    return f"{path}:{line}" if line is not None else str(path)


def test_no_module_is_over_500_lines() -> None:
    too_long = {
        where(name): count
        for name, path in MODULES.items()
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not too_long, "\n".join(
        f"{path} has {count} lines (at most {MAX_LINES}): split it along a seam into modules whose names "
        "say what they hold, and import the names from where they now live."
        for path, count in too_long.items()
    )


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_aliases(module: str, tree: ast.Module) -> dict[str, str]:
    """The local names under which ``module`` holds other spanreplay modules (``from .exporters import _otlp``)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            target = resolve(module, node.level, node.module)
            for alias in node.names:
                if f"{target}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{target}.{alias.name}"
        elif isinstance(node, ast.Import):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in MODULES})
    return aliases


def private_uses(module: str, tree: ast.Module | None = None) -> Iterator[tuple[int, str, str]]:
    """(line, name, owner) for each private name of another spanreplay module that ``module`` uses."""
    tree = tree or parsed(module)
    for imp in imports(module, tree, type_checking=True):
        for name in imp.names:
            if is_private(name):
                yield imp.line, name, imp.target
    aliases = module_aliases(module, tree)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and is_private(node.attr)
            and f"{aliases[node.value.id]}.{node.attr}" not in MODULES
        ):
            yield node.lineno, node.attr, aliases[node.value.id]


def test_no_module_imports_another_modules_private_names() -> None:
    found = [
        f"{where(module, line)} uses {name} of {owner}: a name used across modules is public within the "
        f"package; rename it {name.lstrip('_')} (in a module whose name says what it holds, moving it if "
        "need be) and update every importer."
        for module in MODULES
        for line, name, owner in private_uses(module)
    ]
    assert not found, "\n".join(found)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module, or a module importing itself (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in graph[node]:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def loop_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One closed path of imports through the component, to show in the message."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    node = start
    while True:
        # In a component every module imports another of it: the walk always goes on, and closes.
        nxt = sorted(graph[node] & members)
        step = start if start in nxt else next((m for m in nxt if m not in seen), nxt[0])
        path.append(step)
        if step in seen:
            return path[path.index(step) :]
        seen.add(step)
        node = step


def test_imports_form_no_cycle() -> None:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    lines: dict[tuple[str, str], int] = {}
    for module in MODULES:
        for imp in imports(module):
            graph[module].add(imp.target)
            lines.setdefault((module, imp.target), imp.line)
    messages = []
    for component in cycles(graph):
        loop = loop_in(component, graph)
        steps = ", ".join(f"{where(a, lines[a, b])} imports {b}" for a, b in itertools.pairwise(loop))
        messages.append(
            f"{' -> '.join(loop)} form an import cycle ({steps}): move the names they share down into a "
            "module of a lower layer that both import (or pass the value in from above); an import inside a "
            "function is a cycle all the same."
        )
    assert not messages, "\n".join(messages)


# --- the checks themselves ---------------------------------------------------------


def test_resolve_reads_relative_imports_as_python_does() -> None:
    assert resolve("spanreplay._environment", 1, "errors") == "spanreplay.errors"
    assert resolve("spanreplay.recording.exporters._otlp", 3, "errors") == "spanreplay.errors"
    assert resolve("spanreplay.recording.exporters._otlp", 2, "settings") == "spanreplay.recording.settings"
    assert resolve("spanreplay.recording.exporters", 1, "_file") == "spanreplay.recording.exporters._file"
    assert resolve("spanreplay.recording.exporters._file", 1, None) == "spanreplay.recording.exporters"


def test_every_import_counts_but_those_under_type_checking() -> None:
    tree = ast.parse(
        "import a\n"
        "if TYPE_CHECKING:\n    import b\nelse:\n    import c\n"
        "def f():\n    import d\n    if typing.TYPE_CHECKING:\n        import h\n"
        "class K:\n    import e\n"
        "try:\n    import f\nexcept ImportError:\n    import g\n"
    )
    found = [alias.name for node in import_statements(tree) for alias in node.names]
    assert found == ["a", "c", "d", "e", "f", "g"]
    every = [alias.name for node in import_statements(tree, type_checking=True) for alias in node.names]
    assert every == ["a", "b", "c", "d", "h", "e", "f", "g"]


def test_cycles_finds_loops_and_only_loops() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert sorted(cycles(graph)) == [["a", "b", "c"], ["e"]]
    assert loop_in(["a", "b", "c"], graph) == ["a", "b", "c", "a"]
    # A walk that comes back to a module other than where it started shows that loop.
    graph = {"a": {"b"}, "b": {"c"}, "c": {"b", "a"}}
    assert loop_in(["a", "b", "c"], graph) == ["a", "b", "c", "a"]
    graph = {"a": {"b"}, "b": {"c"}, "c": {"b"}, "x": {"a"}}
    assert loop_in(["b", "c"], graph) == ["b", "c", "b"]


def test_private_uses_finds_imported_and_attribute_names_but_not_modules() -> None:
    tree = ast.parse(
        "from ..model.payloads import _private, public\n"
        "from ..model import codec, spans as sp\n"
        "from .exporters import _otlp\n"
        "codec._hidden(sp._internal, _otlp.GuardedExporter)\n"
        "__all__ = codec.__name__\n"
        "def f():\n    from ..model.codec import _later\n"
    )
    found = sorted(private_uses("spanreplay.recording.settings", tree))
    assert found == [
        (1, "_private", "spanreplay.model.payloads"),
        (4, "_hidden", "spanreplay.model.codec"),
        (4, "_internal", "spanreplay.model.spans"),
        (7, "_later", "spanreplay.model.codec"),
    ]


def test_imports_read_from_a_package_run_its_init_unless_it_is_already_being_imported() -> None:
    tree = ast.parse("from . import keep\nfrom ..readers import iter_spans\nfrom .exporters import _file\n")
    tree.body += ast.parse("import spanreplay.readers.writers").body
    targets = sorted(imp.target for imp in imports("spanreplay.recording.settings", tree))
    assert targets == [
        "spanreplay.readers",
        "spanreplay.readers",
        "spanreplay.readers.writers",
        "spanreplay.recording.exporters",
        "spanreplay.recording.exporters._file",
        "spanreplay.recording.keep",
    ]

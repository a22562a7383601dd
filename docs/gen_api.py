"""Write docs/api.md, the API reference, from the docstrings of spanreplay's public names.

    python docs/gen_api.py            # rewrite docs/api.md
    python docs/gen_api.py --check    # exit 1 when docs/api.md is not current, or a name lacks a docstring

Documents every name in ``spanreplay.__all__`` and in the ``__all__`` of the public
modules users import (``spanreplay.semconv`` has none: its public constants), with
signatures. A function or class is documented by its docstring; a constant by the
comment lines right above its assignment (or a string right after it) in the module
that defines it. The output is deterministic: names sorted, no addresses, no dates.
Standard library only.
"""

from __future__ import annotations

import argparse
import ast
import enum
import importlib
import inspect
import re
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUTPUT = ROOT / "docs" / "api.md"
COMMAND = "python docs/gen_api.py"

# The root package first, then the public modules users import, sorted.
MODULES = (
    "spanreplay",
    "spanreplay.cost",
    "spanreplay.errors",
    "spanreplay.exporters",
    "spanreplay.masking",
    "spanreplay.postgres",
    "spanreplay.readers",
    "spanreplay.semconv",
    "spanreplay.sources",
    "spanreplay.testing",
)

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_RST_LITERAL = re.compile(r"``([^`]+)``")


def public_names(module: types.ModuleType) -> list[str]:
    """The module's ``__all__``, or its public non-module names when it has none, sorted."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and not isinstance(value, types.ModuleType)
            and name != "annotations"
            and name.isupper()
        ]
    return sorted(names)


def clean(text: str) -> str:
    """Text fit for the page: no object addresses, RST literals as Markdown code."""
    return _RST_LITERAL.sub(r"`\1`", _ADDRESS.sub("", text))


def own_doc(value: Any) -> str | None:
    """The docstring written for this object itself (a class's own, not one it inherits)."""
    if inspect.isclass(value):
        doc = value.__dict__.get("__doc__")
    elif inspect.isroutine(value) or isinstance(value, property):
        doc = getattr(value, "__doc__", None)
    else:
        return None
    return inspect.cleandoc(doc) if isinstance(doc, str) and doc.strip() else None


class _Written:
    """An annotation shown as it is written in the source (modules use postponed annotations)."""

    def __init__(self, text: object) -> None:
        self.text = text if isinstance(text, str) else inspect.formatannotation(text)

    def __repr__(self) -> str:
        return self.text


def signature(value: Any, *, bound: bool = False) -> str | None:
    """``(parameters) -> return``, annotations as written; ``bound`` drops the first parameter (self, cls)."""
    try:
        sig = inspect.signature(value)
    except (TypeError, ValueError):
        return None
    empty = inspect.Signature.empty
    parameters = [
        p.replace(annotation=_Written(p.annotation)) if p.annotation is not empty else p
        for p in list(sig.parameters.values())[1 if bound else 0 :]
    ]
    returns = sig.return_annotation
    sig = sig.replace(parameters=parameters, return_annotation=_Written(returns) if returns is not empty else empty)
    return _ADDRESS.sub("", str(sig))


def _module_source(name: str) -> tuple[ast.Module, list[str]] | None:
    module = sys.modules.get(name) or importlib.import_module(name)
    try:
        text = inspect.getsource(module)
    except (OSError, TypeError):
        return None
    return ast.parse(text), text.splitlines()


def _resolve(module: str, level: int, target: str | None, *, is_package: bool) -> str:
    if not level:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def constant_doc(module_name: str, name: str, depth: int = 0) -> str | None:
    """The comment above a constant's assignment, or the string after it, followed to where it is defined."""
    found = _module_source(module_name)
    if found is None or depth > 6:
        return None
    tree, lines = found
    module = sys.modules[module_name]
    is_package = hasattr(module, "__path__")
    body = tree.body
    for index, statement in enumerate(body):
        for node in ast.walk(statement):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return _comment_above(lines, statement.lineno) or _string_after(body, index)
        if isinstance(statement, ast.ImportFrom):
            for alias in statement.names:
                if (alias.asname or alias.name) == name:
                    source = _resolve(module_name, statement.level, statement.module, is_package=is_package)
                    if source.startswith("spanreplay"):
                        return constant_doc(source, alias.name, depth + 1)
    return None


def _comment_above(lines: list[str], lineno: int) -> str | None:
    comment: list[str] = []
    at = lineno - 2
    while at >= 0 and lines[at].lstrip().startswith("#"):
        text = lines[at].strip().lstrip("#:").strip()
        if text.startswith("---") or text.startswith("noqa"):
            break
        comment.insert(0, text)
        at -= 1
    return " ".join(comment).strip() or None


def _string_after(body: list[ast.stmt], index: int) -> str | None:
    if index + 1 < len(body):
        following = body[index + 1]
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
            text = following.value.value
            return inspect.cleandoc(text) if isinstance(text, str) else None
    return None


def _short_value(value: Any) -> str | None:
    plain = (str, bytes, int, float, bool)
    if isinstance(value, plain) or (isinstance(value, tuple) and all(isinstance(v, plain) for v in value)):
        text = repr(value)
        return text if len(text) <= 100 else None
    return None


def _kind(value: Any) -> str:
    if inspect.isclass(value):
        if issubclass(value, BaseException):
            return "exception"
        return "class"
    if inspect.isroutine(value):
        return "function"
    return "constant"


def _bases(cls: type) -> str:
    bases = [b for b in cls.__bases__ if b is not object]
    return f"({', '.join(b.__name__ for b in bases)})" if bases else ""


def _class_signature(cls: type) -> str | None:
    # Exceptions and classes that keep object's or a builtin's constructor have nothing to show.
    for klass in cls.__mro__:
        if "__init__" in klass.__dict__ or "__new__" in klass.__dict__:
            if klass.__module__ == "builtins":
                return None
            break
    return signature(cls)


def _members(cls: type) -> Iterator[tuple[str, str, str | None]]:
    """(name, signature line, docstring) of the public methods and properties a class defines itself."""
    if issubclass(cls, enum.Enum):
        for member in cls:
            yield member.name, f"{member.name} = {member.value!r}", None
        return
    for name, value in sorted(cls.__dict__.items()):
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            yield name, f"property {name}", own_doc(value)
        elif isinstance(value, (staticmethod, classmethod)):
            func = value.__func__
            bound = isinstance(value, classmethod)
            yield name, f"{name}{signature(func, bound=bound) or '(...)'}", own_doc(func)
        elif inspect.isfunction(value):
            yield name, f"{name}{signature(value, bound=True) or '(...)'}", own_doc(value)


def describe(module_name: str, name: str, value: Any) -> tuple[str, str | None]:
    """The code block that heads a name's entry, and its documentation (None when it has none)."""
    qualified = f"{module_name}.{name}"
    if inspect.isclass(value):
        sig = _class_signature(value)
        return f"class {qualified}{_bases(value)}" + (f"\n    {name}{sig}" if sig else ""), own_doc(value)
    if inspect.isroutine(value):
        prefix = "async def" if inspect.iscoroutinefunction(value) else "def"
        return f"{prefix} {qualified}{signature(value) or '(...)'}", own_doc(value)
    # A dunder's value (``__version__``) belongs to the installation, not to the docs.
    shown = None if name.startswith("__") else _short_value(value)
    type_name = type(value).__name__ if not hasattr(value, "__origin__") else "type alias"
    head = f"{qualified}: {type_name}" + (f" = {shown}" if shown is not None else "")
    if type_name == "type alias":
        head = f"{qualified} = {value!r}"
    return head, constant_doc(module_name, name)


def _module_section(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    out = [f"## `{module_name}`", ""]
    if module.__doc__:
        out += [clean(inspect.cleandoc(module.__doc__)), ""]
    names = public_names(module)
    if module_name == "spanreplay.semconv":
        out += ["| name | value | note |", "| --- | --- | --- |"]
        constants = [name for name in names if not callable(getattr(module, name))]
        for name in constants:
            note = (constant_doc(module_name, name) or "").replace("|", "\\|")
            out.append(f"| `{name}` | `{getattr(module, name)!r}` | {clean(note)} |")
        out.append("")
        names = [name for name in names if name not in constants]
    for name in names:
        value = getattr(module, name)
        head, doc = describe(module_name, name, value)
        out += [f"### `{module_name}.{name}` ({_kind(value)})", "", "```python", head, "```", ""]
        if doc:
            out += [clean(doc), ""]
        if inspect.isclass(value):
            members = list(_members(value))
            if members:
                out += ["Members:", ""]
                for _, line, member_doc in members:
                    summary = clean(member_doc.splitlines()[0]) if member_doc else ""
                    out.append(f"- `{line}`" + (f": {summary}" if summary else ""))
                out.append("")
    return out


def render() -> str:
    """docs/api.md as it should read."""
    out = [
        "# API reference",
        "",
        f"Generated from the docstrings by `{COMMAND}`; do not edit by hand. The README",
        "says how the pieces fit; this page lists every public name with its signature.",
        "",
        "Modules:",
        "",
    ]
    out += [f"- [`{name}`](#{name.replace('.', '')})" for name in MODULES]
    out.append("")
    for module_name in MODULES:
        out += _module_section(module_name)
    return "\n".join(out).rstrip() + "\n"


def missing_docstrings() -> list[str]:
    """Public names with no documentation: a class or function without a docstring, a constant without a comment."""
    missing = []
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in public_names(module):
            _, doc = describe(module_name, name, getattr(module, name))
            if not doc and module_name != "spanreplay.semconv":
                missing.append(f"{module_name}.{name}")
    return missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when docs/api.md is not current")
    args = parser.parse_args(argv)
    missing = missing_docstrings()
    if missing:
        print("These public names have no docstring (or, for a constant, no comment):", file=sys.stderr)
        for name in missing:
            print(f"  {name}", file=sys.stderr)
        return 1
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text(encoding="utf-8") != text:
            print(f"docs/api.md is not current; run: {COMMAND}", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

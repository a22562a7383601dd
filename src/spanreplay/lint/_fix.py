"""``--fix``: rewrite the calls that have a one-to-one spanreplay replacement, by source position.

Only the replaced calls change: the edits splice the source text at the
positions ``ast`` gives, so comments, quotes and layout elsewhere stay as they
were (no ``ast.unparse`` of the module). ``import spanreplay`` is added after the
module's leading imports when the module does not import it yet.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._visitor import Edit, split_lines

__all__ = ["apply_edits"]


def apply_edits(source: str, edits: Sequence[Edit], *, add_import_after: int | None) -> str:
    """``source`` with ``edits`` applied; with ``import spanreplay`` after line ``add_import_after`` unless None."""
    lines = split_lines(source)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        line, byte_col = position
        text = lines[line - 1]
        return starts[line - 1] + len(text.encode()[:byte_col].decode())

    text = source
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: offset(edit.start)] + edit.text + text[offset(edit.end) :]
    if add_import_after is None:
        return text
    newline = next((line[len(line.rstrip("\r\n")) :] for line in lines if line.endswith(("\n", "\r"))), "\n")
    # Edits never add or remove lines before the anchor's end: the replacements are one-line calls
    # that stand where a call stood, and the anchor is an import or a docstring, which hold none.
    fixed = split_lines(text)
    head, tail = fixed[:add_import_after], fixed[add_import_after:]
    if head and not head[-1].endswith(("\n", "\r")):
        head[-1] += newline
    return "".join([*head, f"import spanreplay{newline}", *tail])

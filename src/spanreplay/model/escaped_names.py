"""Names on spanreplay's spans that UTF-8 cannot hold: escaped when written, undone when read.

A boundary's kind and key, its call id (which holds them and the names of the
tasks it runs in) and the agent's name come from the agent, and a key may be a
file name from ``os.listdir()`` that holds a lone surrogate. The trace file,
OTLP and Postgres cannot hold one, and refusing it cost the whole span: the
step, or the run's end. Such a name is written with ``_text_escapes.escape``
(the span name shows the same readable text) and its attribute is listed in
``spanreplay.escaped``; the codec gives back the identical ``str``, so replay
matches the call id the agent makes again. Names UTF-8 can hold are written as
they are, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from spanreplay import semconv as sc
from spanreplay.errors import TraceFormatError

from .text_escapes import escape, unescape, utf8_ok

__all__ = ["BOUNDARY_NAMES", "escape_names", "plain_name"]

# The attributes of a boundary span that carry the agent's names, as the run keeps them.
BOUNDARY_NAMES: Final = (sc.KIND, sc.KEY, sc.GEN_AI_TOOL_NAME)
# Every attribute that may be written escaped; a file that lists any other is not believed.
_ESCAPABLE: Final = frozenset({*BOUNDARY_NAMES, sc.CALL_ID, sc.GEN_AI_AGENT_NAME})


def escape_names(attributes: dict[str, Any], *names: str) -> None:
    """Escape, in place, each of ``names`` whose text UTF-8 cannot hold, and list it as escaped."""
    found = [name for name in names if isinstance(text := attributes.get(name), str) and not utf8_ok(text)]
    if not found:
        return
    for name in found:
        attributes[name] = escape(attributes[name])
    listed = tuple(attributes.get(sc.ESCAPED_NAMES, ()))
    attributes[sc.ESCAPED_NAMES] = listed + tuple(name for name in found if name not in listed)


def plain_name(attributes: Mapping[str, Any], name: str, text: str, where: str) -> str:
    """``text``, read from attribute ``name``, as the agent gave it: unescaped when the span lists it.

    The list comes from an untrusted file: only a list of strings is read, and text
    that ``escape`` could not have written is refused with the attribute and the span.
    """
    listed = attributes.get(sc.ESCAPED_NAMES)
    if listed is None:
        return text
    if not isinstance(listed, (list, tuple)) or not all(isinstance(item, str) for item in listed):
        raise TraceFormatError(
            f"Attribute {sc.ESCAPED_NAMES} holds {listed!r}, not the list of attribute names spanreplay "
            f"writes ({where}); the span was edited or not written by spanreplay.",
            source=where,
        )
    if name not in listed or name not in _ESCAPABLE:
        return text
    try:
        return unescape(text)
    except ValueError as error:
        raise TraceFormatError(
            f"Attribute {name} holds {text!r}, listed in {sc.ESCAPED_NAMES} as escaped text, but {error} "
            f"({where}); the span was edited. Record the run again.",
            source=where,
        ) from error

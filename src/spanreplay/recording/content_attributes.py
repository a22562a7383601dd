"""The opt-in GenAI message-content attributes of a model span, masked like its payloads.

``gen_ai.input.messages``, ``gen_ai.output.messages`` and
``gen_ai.system_instructions`` hold the conversation as JSON text when the user
opts in to content capture; the stop sequences are the request's own strings.
They are spanreplay's own attributes, so they are masked before they go on the
span, with the same masker (and the same part: input or output) as the payloads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from spanreplay import semconv as sc

__all__ = ["mask_content_attributes"]

# RecordingRun.mask: (kind, key, part, value) -> (masked value, masked paths).
Mask = Callable[[str, str, str, Any], tuple[Any, str | None]]


def mask_content_attributes(mask: Mask, kind: str, key: str, attributes: dict[str, Any]) -> None:
    """Mask the content attributes and the stop sequences in ``attributes``, in place."""
    stops = attributes.get(sc.GEN_AI_REQUEST_STOP_SEQUENCES)
    if isinstance(stops, (list, tuple)):
        masked_stops, _ = mask(kind, key, "input", list(stops))
        attributes[sc.GEN_AI_REQUEST_STOP_SEQUENCES] = (
            tuple(str(s) for s in masked_stops) if isinstance(masked_stops, list) else (str(masked_stops),)
        )
    for name, part in sc.CONTENT_ATTRIBUTES:
        text = attributes.get(name)
        if isinstance(text, str):
            try:
                content = orjson.loads(text)
            except orjson.JSONDecodeError:
                content = text
            masked, _ = mask(kind, key, part, content)
            attributes[name] = masked if isinstance(masked, str) else orjson.dumps(masked).decode()

"""A boundary's output as its recorded payload: typed, masked, and never lost.

Values JSON cannot say (a datetime, a dataclass) are written as readable JSON and
named by type tags beside it, so replay gives back the same types (``_typed``).
When the JSON encoder refuses what that gives (text UTF-8 cannot hold: a file
name from ``os.listdir()`` that is not UTF-8), the output is written again with
such text escaped under a ``~`` tag, and replay gives back the identical ``str``.
When it refuses even that (an integer past 64 bits, nesting past the encoder's
depth), the step is recorded as an output that could not be recorded, tagged
``!``, which replay refuses at that step with a sentence, rather than lost from
the trace.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from spanreplay.masking._names import NameMasker, masked_keys
from spanreplay.model import typed_values as _typed
from spanreplay.model.payloads import encode_output
from spanreplay.model.typed_values import BytesMasker

__all__ = ["output_payload"]

# RecordingRun._masked_payload: (kind, key, part, value, encode) -> (value, data, masked paths).
MaskedPayload = Callable[[str, str, str, Any, Callable[[Any], bytes]], tuple[Any, bytes, str | None]]


def output_payload(
    kind: str,
    key: str,
    result: Any,
    *,
    masked_payload: MaskedPayload,
    names: NameMasker | None,
    report: Callable[[str, str, list[tuple[str, str]]], None],
    mask_bytes: BytesMasker | None = None,
) -> tuple[bytes, str | None, str | None]:
    """The output's JSON (masked), the JSON list of the paths masked, and its type tags.

    ``names``: masks dict keys that are not plain strings (None when masking is off);
    ``report``: told the kind, key and (path, type) of each value that could not be recorded;
    ``mask_bytes``: masks the bytes in the output before they are written as base64.
    """
    for escape_text in (False, True):
        # Inline rather than a helper per attempt: this runs once per recorded boundary.
        try:
            value, types, unencodable = _typed.to_json(result, escape_text=escape_text, mask_bytes=mask_bytes)
            typed = result
            if types is not None and names is not None:
                # Tagged: it may hold dict keys that are not plain strings, kept as they are.
                rekeyed = masked_keys(result, names)
                if rekeyed is not result:
                    typed = rekeyed
                    value, types, unencodable = _typed.to_json(typed, escape_text=escape_text, mask_bytes=mask_bytes)
            _, data, masked = masked_payload(kind, key, "output", value, encode_output)
            if unencodable:
                report(kind, key, unencodable)
            if masked and types is not None:
                # A masked value is recorded as its masked text: its tag goes (a tag for each
                # item, so that one masked item does not take its siblings' tags with it).
                tagged = _typed.to_json(typed, collapse=False, escape_text=escape_text, mask_bytes=mask_bytes)[1]
                types = _typed.without_masked(tagged or "{}", masked)
        except orjson.JSONEncodeError:
            continue
        else:
            return data, masked, types
    text, types, type_name = _typed.unencodable_output(result)
    report(kind, key, [("$", type_name)])
    _, data, masked = masked_payload(kind, key, "output", text, encode_output)
    return data, masked, types

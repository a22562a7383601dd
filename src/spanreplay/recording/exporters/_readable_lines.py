"""A span holding text UTF-8 cannot hold, written readable rather than lost.

spanreplay escapes the names it writes itself (``_escaped_names``), but any
library may set an attribute, an event or a span name to a ``str`` with a lone
surrogate (a file name from ``os.listdir()``); orjson refuses it, and the whole
span used to be dropped from the trace file. Such a span is written through the
reference encoder with each of those strings in Python's ``\\udcxx`` escape,
readable and valid UTF-8. That text is not given back as it was (nobody replays
another library's attributes), so a warning says so, once per process.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import orjson
from opentelemetry.sdk.trace import ReadableSpan

from spanreplay.model.text_escapes import readable_values

from ._otlp_dicts import key_values, span_dict

__all__ = ["readable_line"]

logger = logging.getLogger("spanreplay")

_warned = threading.Event()


def readable_line(span: ReadableSpan) -> bytes:
    """The OTLP/JSON line of ``span`` (one ``TracesData``), every string made valid UTF-8."""
    resource = span.resource
    scope = span.instrumentation_scope
    scope_json: dict[str, Any] = {"name": scope.name if scope else ""}
    if scope is not None and scope.version:
        scope_json["version"] = scope.version
    if scope is not None and scope.attributes:
        scope_json["attributes"] = key_values(scope.attributes)
    resource_spans: dict[str, Any] = {"resource": {"attributes": key_values(resource.attributes)}}
    if resource.schema_url:
        resource_spans["schemaUrl"] = resource.schema_url
    resource_spans["scopeSpans"] = [{"scope": scope_json, "spans": [span_dict(span)]}]
    line = orjson.dumps(readable_values({"resourceSpans": [resource_spans]})) + b"\n"
    if not _warned.is_set():
        _warned.set()
        logger.warning(
            "spanreplay wrote span %s with text that UTF-8 cannot hold (a lone surrogate, as in a file name "
            "from os.listdir()) in its name, attributes, events or resource, each such character as a "
            "\\udcxx escape; that text reads back as the escape, not as the str that was set. The span is "
            "otherwise whole. Decode such text before setting it on a span to keep it as it was "
            "(further spans like this are written the same way, without this warning).",
            ascii(span.name),
        )
    return line

"""Rewriting a trace file without the expired runs' spans, for ``spanreplay prune``.

OTLP/JSON lines are filtered span by span: lines that hold none of the expired
runs' spans stay byte for byte. The copy replaces the file whole (a temporary
file beside it, then a rename), and only if the file did not change meanwhile.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from typing import IO, Any

import orjson

from spanreplay import semconv as sc
from spanreplay.readers._json_lines import BOM
from spanreplay.sources.runlog import RUN_MARKER


class CannotRewrite(Exception):
    """Why a file that holds other spans besides expired runs cannot be rewritten without them."""


def replace_file(name: str, temp: IO[bytes], before: os.stat_result) -> None:
    """Put the rewritten copy in place of the file, with its mode, unless the file changed since it was read."""
    temp.flush()
    os.fsync(temp.fileno())
    temp.close()
    os.chmod(temp.name, stat.S_IMODE(before.st_mode))
    unchanged_since(name, before)
    os.replace(temp.name, name)


def unchanged_since(name: str, before: os.stat_result) -> None:
    """Refuse to replace or delete a file that was written to after prune read it."""
    now = os.stat(name)
    if (now.st_size, now.st_mtime_ns, now.st_ino) != (before.st_size, before.st_mtime_ns, before.st_ino):
        raise CannotRewrite("it changed while prune read it (something still writes to it); run prune again later")


class SpanFilter:
    """Filters OTLP/JSON lines, dropping the spans of the expired runs.

    Lines that hold no span of those runs are kept byte for byte; a line that holds
    some is written again without them (and dropped once it holds no span at all).
    """

    def __init__(self, expired: set[str], own: str | None) -> None:
        self.expired = expired
        self.own = own  # the run whose own file this is: a torn last line is its
        self.found: set[str] = set()
        self.dropped = 0
        self.kept = False  # anything but blank lines left

    def filter(self, stream: IO[bytes], write: Callable[[bytes], object]) -> None:
        for number, line in enumerate(stream, 1):
            kept = self._line(number, line)
            if kept.strip():
                self.kept = True
            write(kept)

    def _line(self, number: int, line: bytes) -> bytes:
        bom = BOM if number == 1 and line.startswith(BOM) else b""
        text = line[len(bom) :]
        if not text.strip():
            return line
        if RUN_MARKER not in text:
            return line
        try:
            doc = orjson.loads(text)
        except orjson.JSONDecodeError:
            if not line.endswith(b"\n"):
                # The last line, cut short when its writer was stopped: no span can be read from it.
                return b"" if self.own is not None else line
            raise CannotRewrite(f"line {number} is not a whole JSON value") from None
        resource_spans = doc.get("resourceSpans") if isinstance(doc, dict) else None
        if not isinstance(resource_spans, list):
            raise CannotRewrite(f"line {number} is not OTLP/JSON (it has no resourceSpans)")
        dropped = self.dropped
        doc["resourceSpans"] = [rs for rs in map(self._resource, resource_spans) if rs is not None]
        if self.dropped == dropped:
            return line
        if not doc["resourceSpans"]:
            return b""
        return bom + orjson.dumps(doc) + (b"\n" if line.endswith(b"\n") else b"")

    def _resource(self, resource: Any) -> Any:
        if not isinstance(resource, dict) or not isinstance(resource.get("scopeSpans"), list):
            return resource
        scopes = []
        for scope in resource["scopeSpans"]:
            if isinstance(scope, dict) and isinstance(scope.get("spans"), list) and scope["spans"]:
                spans = [span for span in scope["spans"] if not self._expired(span)]
                if not spans:
                    continue
                scope = {**scope, "spans": spans}
            scopes.append(scope)
        if not scopes and resource["scopeSpans"]:
            return None
        return {**resource, "scopeSpans": scopes}

    def _expired(self, span: Any) -> bool:
        run_id = _run_of(span)
        if run_id in self.expired:
            assert run_id is not None
            self.found.add(run_id)
            self.dropped += 1
            return True
        return False


def _run_of(span: Any) -> str | None:
    attributes = span.get("attributes") if isinstance(span, dict) else None
    for attribute in attributes if isinstance(attributes, list) else ():
        if isinstance(attribute, dict) and attribute.get("key") == sc.RUN_ID:
            value = attribute.get("value")
            found = value.get("stringValue") if isinstance(value, dict) else None
            return found if isinstance(found, str) else None
    return None

"""What others write on spanreplay's own spans, masked before the span is written.

Inside a boundary or a run, ``trace.get_current_span()`` is spanreplay's span,
and any code may write on it: ``set_attribute("enduser.id", email)``,
``add_event(...)``, ``record_exception(exc)`` with a key in the message and the
traceback, a span processor's ``on_start``. spanreplay's own payloads are masked
before they become attributes; everything else on its spans is masked here,
once, as the span ends and before any processor's ``on_end`` sees it, so the
trace file, OTLP and Postgres all receive the masked form.

Others' attributes are masked as one payload ``{name: value}`` of the boundary
(the run's is kind ``run``, key the agent): the detectors, the field-name rules
(``db.password`` is a credential's name) and the path rules of the user's
masking configuration apply, as to an output; an exception event's attributes
as an error. Event names, a span name that someone changed and the status
description are scanned by the detectors. Bytes values are masked as the text
they hold and stay bytes. What cannot be masked is dropped, never written raw.

A span that no one else wrote on costs one test of a few fields at its end.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from opentelemetry.sdk.trace import Event
from opentelemetry.sdk.trace import Span as SdkSpan
from opentelemetry.sdk.util import BoundedList
from opentelemetry.trace import Link, Status

from spanreplay import semconv as sc
from spanreplay.masking import Masker

logger = logging.getLogger("spanreplay")

__all__ = ["OthersMasking", "bounded_list", "mask_sdk_span"]

_PRIMITIVE: Final = (str, bool, int, float)


class OthersMasking:
    """Masks what others set on the spans of one run, with the run's masker."""

    __slots__ = ("masker", "own")

    def __init__(self, masker: Masker) -> None:
        self.masker = masker
        # Spans started through the tracer's own start_span (the run's, and boundaries'
        # where BoundarySpans cannot serve): id -> the attributes and name spanreplay
        # gave them, so what others wrote can be told apart and masked as they end.
        self.own: dict[int, tuple[Mapping[str, Any], str]] = {}

    def remember(self, span: Any, attributes: Mapping[str, Any], name: str) -> None:
        """Note what spanreplay itself started an SDK span with."""
        self.own[id(span)] = (attributes, name)

    def mask_started(self, span: Any, kind: str, key: str) -> None:
        """Mask what others wrote on a span ``remember`` was told of, before spanreplay's
        last attributes go on it and it ends (a ``BoundarySpan`` does this as it ends)."""
        own = self.own.pop(id(span), None)
        if own is not None and not mask_sdk_span(self, span, kind, key, *own):
            logger.debug("spanreplay cannot mask what others set on a %s span", type(span).__name__)

    def attributes(self, kind: str, key: str, attributes: Mapping[str, Any], part: str = "output") -> dict[str, Any]:
        """``attributes`` masked, each value keeping its attribute type; dropped where
        masking fails."""
        plain: dict[str, Any] = {}
        binary: dict[str, Any] = {}
        for name, value in attributes.items():
            if isinstance(value, (bytes, bytearray)):
                binary[name] = value
            else:
                plain[name] = list(value) if isinstance(value, (tuple, list)) else value
        out: dict[str, Any] = {}
        try:
            result = self.masker.mask_payload(kind, key, plain, part) if plain else None
        except Exception:
            logger.debug("spanreplay could not mask attributes set on its span; they are dropped", exc_info=True)
            plain = {}
            result = None
        if result is None:
            out.update((name, attributes[name]) for name in plain)
        elif isinstance(result.value, dict):
            for name, value in result.value.items():
                converted = _attribute_value(value)
                if converted is not None:
                    out[name] = converted
        for name, value in binary.items():
            try:
                out[name] = self.masker.mask_bytes(value)[0]
            except Exception:
                logger.debug(
                    "spanreplay could not mask a bytes attribute set on its span; it is dropped", exc_info=True
                )
        return out

    def text(self, text: str) -> str:
        """A name or a description: what the detectors find in it masked (all of it when that fails)."""
        try:
            return self.masker.scan_text(text)[0]
        except Exception:
            logger.debug("spanreplay could not mask a name set on its span", exc_info=True)
            return "<masked>"

    def events(self, kind: str, key: str, events: Sequence[Event]) -> list[Event]:
        """Each event with its name and attributes masked (the event itself where nothing changed)."""
        out: list[Event] = []
        for event in events:
            name = self.text(event.name)
            attributes = event.attributes or {}
            part = "error" if event.name == sc.EXCEPTION_EVENT else "output"
            masked = self.attributes(kind, key, attributes, part) if attributes else {}
            if name == event.name and masked == dict(attributes):
                out.append(event)
            else:
                out.append(Event(name, masked, event.timestamp, limit=None))
        return out

    def links(self, kind: str, key: str, links: Sequence[Link]) -> list[Link]:
        """Each link with its attributes masked (the link itself where nothing changed)."""
        out: list[Link] = []
        for link in links:
            attributes = link.attributes or {}
            masked = self.attributes(kind, key, attributes) if attributes else {}
            out.append(link if masked == dict(attributes) else Link(link.context, masked))
        return out

    def status(self, status: Status) -> Status:
        description = status.description
        if not description:
            return status
        masked = self.text(description)
        return status if masked == description else Status(status.status_code, masked)


def _attribute_value(value: Any) -> Any:
    """A masked JSON value as an attribute value: a list as a tuple of one type."""
    if isinstance(value, _PRIMITIVE):
        return value
    if isinstance(value, list):
        if all(isinstance(item, str) for item in value) or len({type(item) for item in value}) <= 1:
            return tuple(value)
        # A masked item changed type (a number masked to text): all as text, as an attribute array holds one type.
        return tuple(str(item) for item in value)
    if isinstance(value, dict):
        return value  # a map attribute (AnyValue): masked as a whole
    return None  # dropped by a rule


def mask_sdk_span(masking: OthersMasking, span: Any, kind: str, key: str, own: Mapping[str, Any], name: str) -> bool:
    """Mask, in place, what others set on an SDK ``Span`` that is still open: every attribute
    that is not spanreplay's own as ``own`` holds it, the events, the links' attributes, a
    name other than ``name`` and the status description. False when ``span`` is not an
    SDK span whose parts can be read (nothing is changed then)."""
    if not isinstance(span, SdkSpan) or not all(hasattr(span, field) for field in _SDK_FIELDS):
        return False
    with span._lock:
        # The SDK's BoundedAttributes, writable while the span is open.
        stored: Any = span._attributes
        others = {k: v for k, v in stored.items() if k not in own or own[k] != v}
        if others:
            masked = masking.attributes(kind, key, others)
            for k, v in others.items():
                if k not in masked:
                    del stored[k]
                elif masked[k] is not v:
                    stored[k] = masked[k]
            for k, v in masked.items():
                if k not in others:
                    stored[k] = v
        if span._events:
            span._events = bounded_list(span._events, masking.events(kind, key, list(span._events)))
        if span._links:
            span._links = bounded_list(span._links, masking.links(kind, key, list(span._links)))
        if span._name != name:
            span._name = masking.text(span._name)
        span._status = masking.status(span._status)
    return True


_SDK_FIELDS: Final = ("_lock", "_attributes", "_events", "_links", "_name", "_status")


def bounded_list(original: Any, items: list[Any]) -> Any:
    """``items`` in the SDK's bounded list, keeping the count ``original`` dropped."""
    if not isinstance(original, BoundedList):
        return tuple(items)
    replaced: BoundedList[Any] = BoundedList(getattr(getattr(original, "_dq", None), "maxlen", None))
    replaced.extend(items)
    replaced.dropped = original.dropped
    return replaced

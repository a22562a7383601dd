"""Inputs that repeat the previous input's messages, written as a reference plus the new messages.

A conversation sends its whole history with every model call; ``InputHistory``
writes only what is new, and ``rebuild_inputs`` puts each input back together and
checks it against the full input's recorded length and sha256.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay._environment import environment
from spanreplay.errors import PayloadIntegrityError, TraceFormatError

from .events import Event
from .payloads import add_payload, encode_input, int_attribute

# Kept in Event.attributes until the input is rebuilt, so every store of events
# (trace files, Postgres rows) carries what rebuilding needs.
INPUT_REF_ATTRIBUTES: Final = frozenset(
    (sc.INPUT_BASE_SEQ, sc.INPUT_BASE_MESSAGES, sc.INPUT_MESSAGES_PATH, sc.INPUT_FULL_SIZE, sc.INPUT_FULL_SHA256)
)
# Where a conversation's messages sit in an input: at its top, or in the body of a
# request (the Anthropic instrumentor records {"body": {"messages": [...], ...}, ...}).
_MESSAGES_PATHS: Final = (("messages",), ("body", "messages"))


def input_refs_enabled() -> bool:
    """Whether inputs may reference the previous input's messages (``SPANREPLAY_INPUT_REFS``)."""
    return environment().input_refs


class InputHistory:
    """One run's memory of the last input of each (kind, key) that held a ``messages`` list.

    A conversation sends its whole history with every model call, so writing each
    input whole makes a run's trace grow with the square of its turns. When an
    input's messages begin with the previous input's (same run, kind and key), only
    the new messages are written, with the seq of that input, how many messages it
    had, and the full input's length and sha256; ``rebuild_inputs`` puts the input
    back together and checks it, so replay compares the full input as recorded.
    """

    def __init__(self, *, enabled: bool | None = None) -> None:
        self.enabled = input_refs_enabled() if enabled is None else enabled
        # (kind, key) -> (seq, how many messages that input had, its messages list as canonical JSON)
        self._last: dict[tuple[str, str], tuple[int, int, bytes]] = {}

    def add_input(
        self, attributes: dict[str, Any], kind: str, key: str, seq: int, value: Any, data: bytes | None = None
    ) -> None:
        """Put the input's payload attributes into ``attributes``: whole, or as a reference plus new messages.

        ``data``: ``encode_input(value)`` when the caller has it already.
        """
        if data is None:
            data = encode_input(value)
        # Most inputs are not conversations: two lookups settle it before the paths are walked.
        path = (
            _messages_path(value)
            if self.enabled and type(value) is dict and ("messages" in value or "body" in value)
            else None
        )
        if path is None:
            add_payload(attributes, sc.INPUT, data)
            return
        messages = _at(value, path)
        # The list is encoded whole, once: its JSON is "[" + each message's canonical JSON,
        # joined by "," + "]", and a JSON value ends where it ends, so the previous input's
        # messages are this input's first ones exactly when its list, less the "]", is a
        # prefix of this one followed by "," or "]". A long conversation is thus compared
        # without encoding each of its messages on its own.
        encoded = encode_input(messages)
        # One tuple, swapped in whole: a concurrent call of the same key sees either input, both consistent.
        previous = self._last.get((kind, key))
        self._last[(kind, key)] = (seq, len(messages), encoded)
        if previous is None:
            add_payload(attributes, sc.INPUT, data)
            return
        base_seq, taken, base = previous
        end = len(base) - 1
        if taken > len(messages) or not (
            encoded.startswith(memoryview(base)[:end]) and (taken == 0 or encoded[end : end + 1] in (b",", b"]"))
        ):
            add_payload(attributes, sc.INPUT, data)  # the conversation changed: a new base
            return
        add_payload(attributes, sc.INPUT, encode_input(_replaced(value, path, messages[taken:])))
        attributes[sc.INPUT_BASE_SEQ] = base_seq
        attributes[sc.INPUT_BASE_MESSAGES] = taken
        attributes[sc.INPUT_MESSAGES_PATH] = ".".join(path)
        attributes[sc.INPUT_FULL_SIZE] = len(data)
        attributes[sc.INPUT_FULL_SHA256] = hashlib.sha256(data).hexdigest()
        attributes[sc.SCHEMA] = max(int(attributes.get(sc.SCHEMA, 1)), sc.SCHEMA_VERSION_INPUT_REFS)


def rebuild_inputs(events: Sequence[Event]) -> list[Event]:
    """The events with every input that references an earlier one put back together and verified.

    Events may come in any order; each reference points at an earlier seq of the
    same kind and key, which is rebuilt first.
    """
    if not any(sc.INPUT_BASE_SEQ in event.attributes for event in events):
        return list(events)
    rebuilder = InputRebuilder()
    rebuilt = {event.seq: rebuilder.rebuild(event) for event in sorted(events, key=lambda e: e.seq)}
    return [rebuilt[event.seq] for event in events]


class InputRebuilder:
    """Puts inputs back together from events given in seq order, one at a time.

    Every input that holds a ``messages`` list may be the base of a later one. With
    ``keep``, only the last ``keep`` bases of each (kind, key) are held, which bounds
    the memory of a long run read as a stream: the recorder references the previous
    input of the same kind and key, so a reference past them is rare (concurrent
    calls), and ``fetch`` then reads the base's event again from the source (None
    when the source does not hold it).
    """

    def __init__(self, *, keep: int | None = None, fetch: Callable[[int], Event | None] | None = None) -> None:
        self._keep = keep
        self._fetch = fetch
        # seq -> (kind, key, the full messages of its input)
        self._bases: dict[int, tuple[str, str, list[Any]]] = {}
        self._order: dict[tuple[str, str], deque[int]] = {}

    def rebuild(self, event: Event) -> Event:
        """``event`` with its input whole (verified against the recorded size and sha256)."""
        attributes = event.attributes
        if sc.INPUT_BASE_SEQ not in attributes:
            found = _messages_path(value := _json_or_none(event.input_json))
            if found is not None:
                self._remember(event, _at(value, found))
            return event
        where = f"Run {event.run_id} seq {event.seq}"
        base_seq = int_attribute(attributes, sc.INPUT_BASE_SEQ, where)
        taken = int_attribute(attributes, sc.INPUT_BASE_MESSAGES, where)
        base = self._base(base_seq)
        if base is None or base[:2] != (event.kind, event.key):
            raise TraceFormatError(
                f"{where}: the input continues the messages of seq {base_seq}, which the source does not hold "
                f"as an input of {event.kind} {event.key!r}; load every file of the run (or record it again with "
                f"{sc.INPUT_REFS_ENV}=0 to write each input whole).",
                source=where,
            )
        base_messages = base[2]
        delta = _json_or_none(event.input_json)
        path = tuple(str(attributes.get(sc.INPUT_MESSAGES_PATH, "messages")).split("."))
        if path not in _MESSAGES_PATHS or _messages_path(delta, empty=True) != path or taken > len(base_messages):
            raise TraceFormatError(
                f"{where}: the input that continues seq {base_seq} is not an object with a messages list of "
                f"the size recorded; the file was edited or not written by spanreplay.",
                source=where,
            )
        messages = base_messages[:taken] + _at(delta, path)
        data = encode_input(_replaced(delta, path, messages))
        expected = int_attribute(attributes, sc.INPUT_FULL_SIZE, where)
        if len(data) != expected or hashlib.sha256(data).hexdigest() != attributes.get(sc.INPUT_FULL_SHA256):
            raise PayloadIntegrityError(
                f"{where}: the input rebuilt from seq {base_seq}'s messages does not match the recorded one "
                f"({expected} bytes expected, {len(data)} found, or another sha256). Nothing was replayed from "
                f"it; load the run from a source that holds it unaltered.",
                run_id=event.run_id,
                seq=event.seq,
                attribute=sc.INPUT,
                expected_size=expected,
                found_size=len(data),
                source=where,
            )
        self._remember(event, messages)
        kept = {k: v for k, v in attributes.items() if k not in INPUT_REF_ATTRIBUTES}
        return dataclasses.replace(event, input_json=data, attributes=kept)

    def _remember(self, event: Event, messages: list[Any]) -> None:
        self._bases[event.seq] = (event.kind, event.key, messages)
        if self._keep is None:
            return
        order = self._order.setdefault((event.kind, event.key), deque())
        order.append(event.seq)
        if len(order) > self._keep:
            self._bases.pop(order.popleft(), None)

    def _base(self, seq: int) -> tuple[str, str, list[Any]] | None:
        found = self._bases.get(seq)
        if found is not None or self._fetch is None:
            return found
        event = self._fetch(seq)
        if event is None:
            return None
        # Rebuilt through a rebuilder of its own, so the bases held here stay the latest ones.
        rebuilt = InputRebuilder(keep=self._keep, fetch=self._fetch).rebuild(event)
        value = _json_or_none(rebuilt.input_json)
        path = _messages_path(value)
        return None if path is None else (event.kind, event.key, _at(value, path))


def _messages_path(value: Any, *, empty: bool = False) -> tuple[str, ...] | None:
    """Where a ``messages`` list (non-empty unless ``empty``) sits in an input, or None."""
    for path in _MESSAGES_PATHS:
        node = value
        for name in path:
            node = node.get(name) if type(node) is dict else None
        if type(node) is list and (node or empty):
            return path
    return None


def _at(value: Any, path: tuple[str, ...]) -> list[Any]:
    for name in path:
        value = value[name]
    result: list[Any] = value
    return result


def _replaced(value: dict[str, Any], path: tuple[str, ...], messages: list[Any]) -> dict[str, Any]:
    """A copy of ``value`` with the list at ``path`` replaced (the input itself is left alone)."""
    head, *rest = path
    return {**value, head: _replaced(value[head], tuple(rest), messages) if rest else messages}


def _json_or_none(data: bytes) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return None

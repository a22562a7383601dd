"""The replay half of the exact checks of masked inputs, in a run masked without a key.

Each call served is checked place by place against the salted digests the recording
wrote (``spanreplay.recording.input_checks``), so code that now emails another
customer diverges even though both addresses mask to ``<email>``. Without the salt
file (a run read from Postgres, a backend, an export) masked values are compared by
kind, as the placeholders say, and the replay warns once.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import orjson

from spanreplay import semconv as sc
from spanreplay.errors import InputChangedError, UnsafeTraceValueError
from spanreplay.masking import Masker
from spanreplay.masking._place_checks import changed_place, path_segments, places
from spanreplay.model import jsonpath as _jsonpath
from spanreplay.model.events import Event, EventLog
from spanreplay.readers._base import warn
from spanreplay.run.salts import read_salt, salt_beside

from .engine import ReplayEngine

logger = logging.getLogger("spanreplay")

__all__ = ["ReplayChecks"]


class ReplayChecks:
    """The replay side: each served call's masked places checked against the recording."""

    def __init__(self, log: EventLog, masker: Masker, salt: bytes | None, where: str, ignore: tuple[str, ...]) -> None:
        self._log = log
        self._salt = salt
        self._session = masker.salted(salt).session() if salt is not None else None
        self._where = where
        self._ignore = tuple(_jsonpath.parse(p) for p in ignore)
        self._warned = False
        self._lock = threading.Lock()
        # Rules under which no value is ever checked, salt or not: credentials.
        self._credentials = frozenset(d.name for d in masker.detectors if not getattr(d, "pseudonymize", True))

    def __repr__(self) -> str:
        return f"<ReplayChecks salted={self._salt is not None}>"

    @classmethod
    def for_replay(cls, log: EventLog, masker: Masker, ignore: tuple[str, ...] = ()) -> ReplayChecks | None:
        """The checks of a replay masked without a key; None when masking is off or keyed."""
        if not masker.enabled or masker.keyed:
            return None
        try:
            path = salt_beside(log.run.origin, log.run_id) if log.run.origin else None
        except UnsafeTraceValueError as exc:  # a run id from the file that would point out of its folder
            path, where = None, str(exc).rstrip(".")
        else:
            where = "the run was not read from a trace file" if path is None else f"{path} is missing or unreadable"
        salt = read_salt(path) if path is not None else None
        return cls(log, masker, salt, where, ignore)

    def verify(self, engine: ReplayEngine, event: Event, kind: str, key: str, value: Any) -> None:
        """Raise InputChangedError when a masked place of the input ``value`` (unmasked)
        holds another value than the recording had there."""
        recorded = event.attributes.get(sc.INPUT_CHECKS)
        if self._session is None or self._salt is None:
            if not self._warned and (recorded is not None or self._checkable(event)):
                self._warn_once()
            return
        if recorded is None or recorded == sc.INPUT_UNCHECKED:
            # Nothing recorded at a place a key would pseudonymize (or the checks could not be
            # made): the masked comparison the engine made is all there is.
            return
        found = places(self._session, kind, key, value)
        if self._ignore:
            found = {path: tokens for path, tokens in found.items() if not self._ignored(path)}
        if not found:
            return
        try:
            checks = orjson.loads(recorded) if isinstance(recorded, str) else {}
        except orjson.JSONDecodeError:
            checks = {}
        changed = changed_place(self._salt, event.call_id, checks if isinstance(checks, dict) else {}, found)
        if changed is None:
            return
        error = _changed(self._log.run_id, event, kind, key, *changed)
        engine.refuse(error)
        raise error

    def _checkable(self, event: Event) -> bool:
        """Whether the recorded input was masked by a rule whose values a salt would check."""
        text = event.attributes.get(sc.INPUT + sc.MASKED_SUFFIX)
        if not isinstance(text, str):
            return False
        try:
            records = orjson.loads(text)
        except orjson.JSONDecodeError:
            return True
        rules = [r.get("rule") for r in records if isinstance(r, dict)] if isinstance(records, list) else [None]
        return any(
            not isinstance(rule, str) or not (rule.startswith("field:") or rule in self._credentials) for rule in rules
        )

    def _ignored(self, path: str) -> bool:
        segments = path_segments(path)
        return any(
            len(ignore) <= len(segments)
            and all(part == "*" or part == segment for part, segment in zip(ignore, segments, strict=False))
            for ignore in self._ignore
        )

    def _warn_once(self) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        warn(
            f"Run {self._log.run_id} was masked without a key, and its salt is not here ({self._where}): masked "
            "input values are compared by their kind only (<email> matches any email), so a step that now "
            "sends another masked value than the recorded one is not caught. Replay from the run's trace "
            "file with the .spanreplay-salts directory beside it, or record with a masking key "
            "(SPANREPLAY_MASK_KEY or MaskingConfig(key=...)) for exact comparison from any source."
        )


def _changed(run_id: str, event: Event, kind: str, key: str, path: str, label: str) -> InputChangedError:
    rules = _rules_at(event, path) or label
    attempted = f"{kind} {key!r} (call id {event.call_id}), another value at {path} ({rules})"
    diff = f"masked value at {path} ({rules}): recorded and attempted differ (both mask alike; values not shown)"
    return InputChangedError(
        f"Replay of run {run_id} diverged at seq {event.seq} (call id {event.call_id}): the code made the "
        f"recorded {kind} call {key!r} with another value at {path} ({rules}) than the recorded one. Both "
        "mask to the same placeholder; the run's salt tells them apart, and neither value is shown.\n"
        f"Recorded: {event.describe()}\nAttempted: {attempted}\n"
        f"Find what changed the value at {path}, or leave it out of the comparison: ignore_paths=[...] in "
        "spanreplay.replay(), --ignore PATH on the command line.",
        diff=diff,
        run_id=run_id,
        seq=event.seq,
        call_id=event.call_id,
        recorded=event.describe(),
        attempted=attempted,
    )


def _rules_at(event: Event, path: str) -> str:
    """The rules the recording names for ``path`` (``spanreplay.input.masked``)."""
    text = event.attributes.get(sc.INPUT + sc.MASKED_SUFFIX)
    try:
        records = orjson.loads(text) if isinstance(text, str) else []
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(records, list):
        return ""
    rules = [r.get("rule") for r in records if isinstance(r, dict) and r.get("path") == path]
    return ", ".join(dict.fromkeys(str(rule) for rule in rules if rule))

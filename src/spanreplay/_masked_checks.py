"""Masked inputs compared exactly in a run masked without a key, through the run's salt.

Recording: a run masked without a key gets a salt (``_salts``), and every input
masked at a place a key would pseudonymize carries ``spanreplay.input.checks``
(``masking/_place_checks``). Replay: each call served is checked place by place
against them, so code that now emails another customer diverges even though both
addresses mask to ``<email>``. Without the salt file (a run read from Postgres, a
backend, an export) masked values are compared by kind, as the placeholders say,
and the replay warns once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from . import _jsonpath
from . import _semconv as sc
from ._events import Event, EventLog
from ._private_files import TraceFileLinkError
from ._replay import ReplayEngine
from ._salts import create_salt, read_salt, salt_beside
from .errors import InputChangedError, UnsafeTraceValueError
from .masking import Masker, MaskingSession
from .masking._place_checks import changed_place, checks_of, path_segments, places
from .readers._base import warn

logger = logging.getLogger("spanreplay")

__all__ = ["InputChecks", "ReplayChecks"]


class InputChecks:
    """The recording side: the run's salt, and the checks of each masked input.

    The salt file is written when the first input is masked: a run that masks no
    input has nothing to check, and no salt.
    """

    __slots__ = ("_lock", "_masker", "_run_id", "_salt", "_session", "_trace_dir")

    def __init__(self, masker: Masker, trace_dir: Path, run_id: str) -> None:
        self._masker = masker
        self._trace_dir = trace_dir
        self._run_id = run_id
        self._salt: bytes | None = None
        self._session: MaskingSession | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never shows the salt
        return f"<InputChecks run={self._run_id}>"

    @classmethod
    def start(cls, masker: Masker | None, trace_dir: Path | None, run_id: str) -> InputChecks | None:
        """Checks for a run masked without a key whose trace file is written to ``trace_dir``;
        None otherwise (a key keeps equality itself; without a trace file the salt would
        have nowhere to be kept)."""
        if masker is None or not masker.enabled or masker.keyed or trace_dir is None:
            return None
        return cls(masker, trace_dir, run_id)

    def attribute(
        self, kind: str, key: str, call_id: str, value: Any, fired: Sequence[tuple[str, str]] | None = None
    ) -> str | None:
        """``spanreplay.input.checks`` for the input ``value`` (unmasked), which masking
        changed (``fired``: where, and by which rule); None when no place of it has a check.

        Raises:
            OSError: the salt file could not be written.
        """
        salt, session = self._salted()
        found = places(session, kind, key, value, fired)
        if not found:
            return None
        return orjson.dumps(checks_of(salt, call_id, found)).decode()

    def add_to(
        self,
        attributes: dict[str, Any],
        kind: str,
        key: str,
        call_id: str,
        value: Any,
        masked: str,
        *,
        strict: bool,
        failed: Callable[[str], None],
    ) -> bool:
        """Put the exact checks of a masked input on its span's ``attributes``; ``masked`` is
        the JSON list of the places masked. False when the salt could not be written: the
        run then records on without checks."""
        try:
            fired = [(str(r["path"]), str(r["rule"])) for r in orjson.loads(masked)]
            checks = self.attribute(kind, key, call_id, value, fired)
        except OSError as error:
            if strict:
                raise
            if isinstance(error, TraceFileLinkError):
                # Not a full disk the file processor reports too: a link someone planted.
                logger.warning("spanreplay records run %s without exact checks: %s", self._run_id, error)
                return False
            # Recorded on without exact checks: replay compares masked values by kind and says
            # so. Said quietly here: a trace dir that cannot hold the salt cannot hold the trace
            # file either, and the file processor reports that once.
            logger.debug("spanreplay could not write the salt of run %s", self._run_id, exc_info=True)
            return False
        except Exception:
            attributes[sc.INPUT_CHECKS] = sc.INPUT_UNCHECKED  # replay compares this input by kind
            failed(f"check the masked input of {kind} {key!r}")
            return True
        if checks is not None:
            attributes[sc.INPUT_CHECKS] = checks
        return True

    def _salted(self) -> tuple[bytes, MaskingSession]:
        with self._lock:
            if self._salt is None or self._session is None:
                salt = create_salt(self._trace_dir, self._run_id)
                self._session = self._masker.salted(salt).session()
                self._salt = salt
            return self._salt, self._session


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

"""The recording half of the exact checks of masked inputs, in a run masked without a key.

Such a run gets a salt (``run/salts.py``), and every input masked at a place a key
would pseudonymize carries ``spanreplay.input.checks`` (``masking/_place_checks``):
salted digests of the values that masking hid, which the replay side
(``spanreplay.replaying.input_checks``) compares place by place.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from spanreplay import semconv as sc
from spanreplay.masking import Masker, MaskingSession
from spanreplay.masking._place_checks import checks_of, places
from spanreplay.model.private_files import TraceFileLinkError
from spanreplay.run.salts import create_salt

logger = logging.getLogger("spanreplay")

__all__ = ["InputChecks"]


class InputChecks:
    """The recording side: the run's salt, and the checks of each masked input.

    The salt file is written when the first input is masked: a run that masks no
    input has nothing to check, and no salt.
    """

    __slots__ = ("_lock", "_masker", "_raise_internal_errors", "_run_id", "_salt", "_session", "_trace_dir")

    def __init__(self, masker: Masker, trace_dir: Path, run_id: str, *, raise_internal_errors: bool = False) -> None:
        self._masker = masker
        # A salt that cannot be written is raised rather than recorded on without checks.
        self._raise_internal_errors = raise_internal_errors
        self._trace_dir = trace_dir
        self._run_id = run_id
        self._salt: bytes | None = None
        self._session: MaskingSession | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never shows the salt
        return f"<InputChecks run={self._run_id}>"

    @classmethod
    def start(
        cls, masker: Masker | None, trace_dir: Path | None, run_id: str, *, raise_internal_errors: bool = False
    ) -> InputChecks | None:
        """Checks for a run masked without a key whose trace file is written to ``trace_dir``;
        None otherwise (a key keeps equality itself; without a trace file the salt would
        have nowhere to be kept)."""
        if masker is None or not masker.enabled or masker.keyed or trace_dir is None:
            return None
        return cls(masker, trace_dir, run_id, raise_internal_errors=raise_internal_errors)

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
        failed: Callable[[str], None],
    ) -> bool:
        """Put the exact checks of a masked input on its span's ``attributes``; ``masked`` is
        the JSON list of the places masked. False when the salt could not be written: the
        run then records on without checks."""
        try:
            fired = [(str(r["path"]), str(r["rule"])) for r in orjson.loads(masked)]
            checks = self.attribute(kind, key, call_id, value, fired)
        except OSError as error:
            if self._raise_internal_errors:
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

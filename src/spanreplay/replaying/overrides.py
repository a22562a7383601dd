"""What-if edits: a replay that serves the user's own value in place of a recorded step's output.

``replay(source, run_id, overrides={6: {...}, "model:claude-sonnet-4-6#2": {...}})``.
A key names a step by its seq (an int) or by its call id. A call id the
recording does not have names a call the edited run makes that the recorded
one never did (after an edited tool result, the next model call); it is served
without an input to compare with. A value is served in place of the recorded
output; an exception instance is raised in its place.

A value that is plain JSON data is served the way a recorded output is (a tool
annotated to return a dataclass gets one built from a dict); any other object is
handed to the code as it is. An override is the user's own value: it is not
masked on replay. A fork (``_fork``) records it in its new run, masked there like
any other output. A model call's override is the response as the Messages API
returns it; the instrumentation that made the call turns it into what its
recording holds (``register_output_form``), so the SDK builds its own objects.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib
import re
import threading
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import orjson

from spanreplay.errors import ConfigurationError
from spanreplay.model import typed_rebuild as _typed_replay
from spanreplay.model import typed_values as _typed
from spanreplay.model.error_records import decode_error, encode_error
from spanreplay.model.events import Event, EventLog
from spanreplay.model.typed_hints import ReturnDecoder
from spanreplay.readers._base import SpanReplayWarning

from .engine import enclosing_call

__all__ = ["Overrides", "Served", "exception_from_text", "overrides_from_file", "register_output_form"]

# A call id: segments ``kind:key#n`` joined by ``/``.
_CALL_ID: Final = re.compile(r"[^/#:]+:[^/#]*#\d+(?:/[^/#:]+:[^/#]*#\d+)*")

# kind -> turns an override value into what a recording of that kind holds as its output.
# Arguments: the value, the call's input as JSON data, the call's key, and where it is (for errors).
OutputForm = Callable[[Any, Any, str, str], Any]
_forms: dict[str, OutputForm] = {}


def register_output_form(kind: str, form: OutputForm) -> None:
    """How an override of a ``kind`` step becomes its recorded output (model calls: the HTTP exchange)."""
    _forms[kind] = form


@dataclasses.dataclass(slots=True)
class Served:
    """A step served in place of its recording: the event as edited, and how its value comes back."""

    event: Event
    # The exception instance to raise, as given.
    error: BaseException | None = None
    # The value to hand over as given (an object JSON cannot say); None: serve ``event`` as recorded.
    value: Any = None
    as_given: bool = False

    def result(self, decode: Callable[[Any], Any] | None) -> Any:
        """The value the code gets (or the exception it gets raised)."""
        if self.error is not None:
            raise self.error
        if self.as_given:
            return self.value
        output = self.event.output_json
        value = None if output is None else orjson.loads(output)
        if decode is None:
            return value
        if type(decode) is ReturnDecoder:
            return _typed_replay.served(self.event, value, decode)
        return decode(value)

    async def result_async(self, decode: Callable[[Any], Any] | None) -> Any:
        return self.result(decode)


class Overrides:
    """The what-if edits of one replay, checked against its recording, served once each."""

    def __init__(self, overrides: Mapping[int | str, Any], log: EventLog) -> None:
        self.log = log
        self._values: dict[str, Any] = {}
        # Call ids the recording does not have: calls the edited run makes that it never did.
        self.added: set[str] = set()
        self.served: set[str] = set()
        self._lock = threading.Lock()
        recorded_ids = {event.call_id for event in log}
        for key, value in overrides.items():
            call_id = self._call_id(key)
            if call_id in self._values:
                raise ConfigurationError(
                    f"Overrides for run {log.run_id} name the step {call_id} twice (by seq and by call id); "
                    "give one value for it."
                )
            if isinstance(value, type) and issubclass(value, BaseException):
                raise ConfigurationError(
                    f"The override of {_named(key, call_id)} in run {log.run_id} is the exception class "
                    f"{value.__qualname__}; give an instance to raise, such as {value.__qualname__}('message')."
                )
            self._check_not_nested(key, call_id, recorded_ids)
            if call_id not in recorded_ids:
                self.added.add(call_id)
            self._values[call_id] = value

    def __contains__(self, call_id: object) -> bool:
        return call_id in self._values

    def __len__(self) -> int:
        return len(self._values)

    @property
    def used(self) -> bool:
        """Whether any override was served: the run then no longer has to end as recorded."""
        return bool(self.served)

    def seqs(self) -> dict[str, int | None]:
        """Each overridden call id and its recorded seq (None for an added call)."""
        out: dict[str, int | None] = {}
        for call_id in self._values:
            event = self.log.by_call_id(call_id)
            out[call_id] = event.seq if event is not None else None
        return out

    def serve(self, recorded: Event | None, call_id: str, kind: str, key: str, seq: int, input_json: bytes) -> Served:
        """The step ``call_id`` as edited; ``recorded`` is its recorded event (matched), None for an added call."""
        with self._lock:
            self.served.add(call_id)
        value = self._values[call_id]
        where = f"the override of {call_id} (seq {recorded.seq if recorded else seq}) in run {self.log.run_id}"
        base = recorded or Event(
            run_id=self.log.run_id, seq=seq, call_id=call_id, kind=kind, key=key, input_json=input_json
        )
        if isinstance(value, BaseException):
            info = decode_error(encode_error(value))
            return Served(dataclasses.replace(base, output_json=None, error=info, output_types=None), error=value)
        form = _forms.get(kind)
        if form is not None:
            value = form(value, orjson.loads(input_json), key, where)
        # An object JSON cannot say is served as given all the same; only a fork's record of it
        # keeps no more than its text (as when such a value is recorded).
        data, types, _ = _typed.to_json(value)
        try:
            output = orjson.dumps(data)
        except TypeError as exc:
            raise ConfigurationError(f"{where.capitalize()} cannot be written as JSON ({exc}).") from None
        event = dataclasses.replace(
            base, output_json=output, error=None, output_types=types.encode() if types is not None else None
        )
        return Served(event, value=value, as_given=types is not None)

    def warn_unused(self) -> None:
        """An added call the run never made: the edit did not happen as the user meant it."""
        unused = sorted(self.added - self.served)
        if unused:
            warnings.warn(
                f"The replay of run {self.log.run_id} never made the call(s) {', '.join(unused)} that overrides "
                "name and the recording does not have, so those values were never served; check the call ids "
                "the edited run made (a call id counts the calls of one kind and key in its scope from #0).",
                SpanReplayWarning,
                stacklevel=3,
            )

    def _call_id(self, key: int | str) -> str:
        log = self.log
        if isinstance(key, bool) or not isinstance(key, (int, str)):
            raise ConfigurationError(
                f"Override key {key!r} is neither a seq (an int) nor a call id (a string such as 'tool:search#0')."
            )
        if isinstance(key, int):
            event = log.by_seq(key)
            if event is None:
                seqs = [e.seq for e in log]
                held = f"its steps are seq {seqs[0]} to {seqs[-1]}" if seqs else "it has no steps"
                raise ConfigurationError(
                    f"Run {log.run_id} has no step at seq {key} to override ({held}); spanreplay show lists "
                    "them. To add a call the recording does not have, name it by its call id."
                )
            return event.call_id
        if not _CALL_ID.fullmatch(key):
            raise ConfigurationError(
                f"Override key {key!r} is not a call id (kind:key#n, such as 'tool:search#0', joined by '/' "
                f"when nested); spanreplay show {log.run_id} lists the call ids, or give the seq as an int."
            )
        return key

    def _check_not_nested(self, key: int | str, call_id: str, recorded_ids: set[str]) -> None:
        """A step recorded inside another step is never asked for: its enclosing call is served whole."""
        head = enclosing_call(call_id)
        while head:
            if head in recorded_ids:
                outer = self.log.by_call_id(head)
                assert outer is not None
                raise ConfigurationError(
                    f"The override of {_named(key, call_id)} in run {self.log.run_id} cannot be served: that step "
                    f"ran inside seq {outer.seq} ({outer.kind} {outer.key!r}), and replay serves seq {outer.seq} "
                    f"whole without running it. Override seq {outer.seq} instead."
                )
            head = enclosing_call(head)


def _named(key: int | str, call_id: str) -> str:
    return f"seq {key} ({call_id})" if isinstance(key, int) else call_id


def exception_from_text(text: str) -> BaseException:
    """``TimeoutError:message`` or ``mypkg.errors.CarrierTimeout:message`` as an exception instance."""
    name, _, message = text.partition(":")
    name = name.strip()
    cls: Any
    if "." in name:
        module_name, _, attr = name.rpartition(".")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ConfigurationError(f"module {module_name} cannot be imported ({exc}).") from None
        cls = getattr(module, attr, None)
    else:
        cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise ConfigurationError(
            f"{name or '(nothing)'} is not an exception type; write a builtin such as TimeoutError or a dotted "
            "name such as mypkg.errors.CarrierTimeout, then ':' and the message."
        )
    try:
        made: BaseException = cls(message) if message else cls()
    except Exception as exc:
        raise ConfigurationError(
            f"{cls.__qualname__} cannot be built from a message alone ({exc}); raise it from Python with "
            "spanreplay.replay(..., overrides={step: instance})."
        ) from None
    return made


def overrides_from_file(path: str | Path) -> dict[int | str, Any]:
    """The overrides a file holds: ``{"set": {step: value}, "raise": {step: "Type:message"}}``.

    How ``spanreplay fork ... -- COMMAND`` hands its ``--set`` and ``--raise`` to the
    program it starts (``SPANREPLAY_OVERRIDES``). A step is a seq (as text) or a call id.
    """
    try:
        data = orjson.loads(Path(path).read_bytes())
        if not isinstance(data, dict) or not set(data) <= {"set", "raise"}:
            raise ValueError('not an object with "set" and "raise"')
        sets, raises = data.get("set", {}), data.get("raise", {})
        if not isinstance(sets, dict) or not isinstance(raises, dict):
            raise ValueError('"set" and "raise" are not objects')
    except (OSError, ValueError) as exc:
        raise ConfigurationError(
            f"The overrides file {path} (SPANREPLAY_OVERRIDES) cannot be read: {exc}. It holds "
            '{"set": {"6": value}, "raise": {"6": "TimeoutError:message"}}.'
        ) from None

    def step(text: str) -> int | str:
        return int(text) if text.isdecimal() and len(text) < 19 else text

    overrides: dict[int | str, Any] = {step(key): value for key, value in sets.items()}
    for key, spec in raises.items():
        overrides[step(key)] = exception_from_text(str(spec))
    return overrides

"""``Run.begin()``: a boundary whose work ends later than the function that starts it."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from spanreplay import semconv as sc
from spanreplay.model.events import Event
from spanreplay.model.payloads import encode_output, payload_attributes

from .base import Run, Scope, current_scope_var

logger = logging.getLogger("spanreplay")

T = TypeVar("T")

__all__ = ["Call", "Recorder"]


class Recorder(Protocol):
    """What records a call begun in record mode: the recording run, handed to the call that it begins."""

    def finish_boundary(
        self,
        span: trace.Span | None,
        kind: str,
        key: str,
        result: Any,
        exc: BaseException | None,
        *,
        awaited: bool = False,
    ) -> None: ...

    def mask(self, kind: str, key: str, part: str, value: Any) -> tuple[Any, str | None]: ...

    def mask_content(self, kind: str, key: str, attributes: dict[str, Any]) -> None: ...

    def internal_failure(self, what: str) -> None: ...


class Call:
    """A boundary started with ``Run.begin()``: open until ``finish()`` or ``fail()``.

    Record mode: the span carries the input from the start; ``finish(output)``
    or ``fail(exc)`` writes the outcome and ends it. The first of them wins and
    later ones do nothing, so every exit path of a stream may call them. A call
    still open when its run ends is ended then, through ``on_abandon`` when set.

    Replay mode: ``recorded`` is the recorded Event; ``finish`` and ``fail`` do
    nothing. ``activate()`` makes boundaries started inside the call nest under
    it in both modes.
    """

    __slots__ = (
        "_lock",
        "_recorder",
        "_span",
        "call_id",
        "ended",
        "key",
        "kind",
        "on_abandon",
        "recorded",
        "run",
        "scope",
        "seq",
    )

    def __init__(
        self,
        kind: str,
        key: str,
        seq: int,
        scope: Scope,
        *,
        span: trace.Span | None = None,
        recorded: Event | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        """``scope`` is the call's own: its run and call id are the call's."""
        self.run: Run = scope.run
        self.kind = kind
        self.key = key
        self.call_id = scope.call_id
        self.seq = seq
        self.scope = scope
        self.recorded = recorded
        self.ended = recorded is not None
        self.on_abandon: Callable[[], None] | None = None
        self._span = span
        # The recording run that began the call (record mode); None on replay, where a call records nothing.
        self._recorder = recorder
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Call {self.call_id} seq={self.seq} ended={self.ended}>"

    @property
    def replaying(self) -> bool:
        return self.recorded is not None

    @contextmanager
    def activate(self) -> Iterator[None]:
        """Run a block as this call's work: nested boundaries get call ids under it."""
        scope_token = current_scope_var.set(self.scope)
        otel_token = otel_context.attach(self.scope.context) if self.scope.context is not None else None
        try:
            yield
        finally:
            if otel_token is not None:
                otel_context.detach(otel_token)
            current_scope_var.reset(scope_token)

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        """Add span attributes (token counts, response ids) while the call is open."""
        span = self._span
        if span is None or self.ended or not attributes:
            return
        try:
            span.set_attributes(self._masked_content(attributes))
        except Exception:
            self._failure("set attributes on")

    def rename(self, name: str) -> None:
        """Give the call's span another name than its boundary's (record mode)."""
        if self._span is not None:
            self._span.update_name(name)

    def finish(self, output: Any, *, attributes: dict[str, Any] | None = None) -> None:
        """Record ``output`` and end the span (record mode; the first end wins)."""
        recorder = self._recorder
        if recorder is None or not self._claim():
            return
        self.set_attributes_unchecked(attributes)
        recorder.finish_boundary(self._span, self.kind, self.key, output, None)

    def fail(self, exc: BaseException, *, output: Any = None, attributes: dict[str, Any] | None = None) -> None:
        """Record ``exc`` (and ``output`` too, when the failed work produced some) and end the span."""
        recorder = self._recorder
        if recorder is None or not self._claim():
            return
        self.set_attributes_unchecked(attributes)
        span = self._span
        if span is not None and output is not None:
            try:
                output, masked = recorder.mask(self.kind, self.key, "output", output)
                recorded = payload_attributes(sc.OUTPUT, encode_output(output))
                if masked:
                    recorded[sc.OUTPUT + sc.MASKED_SUFFIX] = masked
                span.set_attributes(recorded)
            except Exception:
                self._failure("record the output of")
        recorder.finish_boundary(span, self.kind, self.key, None, exc)

    def abandon(self) -> None:
        """End a call left open when its run ends (``on_abandon`` decides how)."""
        hook = self.on_abandon
        if hook is not None and not self.ended:
            try:
                hook()
            except Exception:
                self._failure("end the abandoned")
        self.finish(None)

    def set_attributes_unchecked(self, attributes: dict[str, Any] | None) -> None:
        if self._span is None or not attributes:
            return
        try:
            self._span.set_attributes(self._masked_content(attributes))
        except Exception:
            self._failure("set attributes on")

    def _masked_content(self, attributes: dict[str, Any]) -> dict[str, Any]:
        recorder = self._recorder
        if recorder is not None and any(name in attributes for name, _ in sc.CONTENT_ATTRIBUTES):
            attributes = dict(attributes)
            recorder.mask_content(self.kind, self.key, attributes)
        return attributes

    def _claim(self) -> bool:
        with self._lock:
            if self.ended:
                return False
            self.ended = True
        self.run.pending_calls.pop(id(self), None)
        return True

    def _failure(self, what: str) -> None:
        recorder = self._recorder
        if recorder is not None:
            recorder.internal_failure(f"{what} call {self.call_id}")

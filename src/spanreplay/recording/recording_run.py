"""Record mode: the real work runs, and each boundary becomes a span with its input and outcome."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, Final, TypeVar

import orjson
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from spanreplay import semconv as sc
from spanreplay.errors import ConfigurationError
from spanreplay.masking import MaskingSession
from spanreplay.masking._names import NameMasker
from spanreplay.model import typed_values as _typed
from spanreplay.model.error_records import error_record
from spanreplay.model.escaped_names import BOUNDARY_NAMES, escape_names
from spanreplay.model.input_refs import InputHistory
from spanreplay.model.payloads import add_payload, encode_error_record, encode_input
from spanreplay.model.run_ids import is_run_id, new_run_id
from spanreplay.run.base import BoundaryCall, Mode, Run, Scope, current_scope_var, inside_itself
from spanreplay.run.calls import Call

from .alerts import run_failed, trace_location
from .boundary_spans import BoundarySpan, BoundarySpans, checked
from .concurrent_siblings import concurrent_siblings
from .configuration import Settings, masker, settings
from .content_attributes import mask_content_attributes
from .input_checks import InputChecks
from .keep import EndedRun, settle_run
from .others_masking import OthersMasking
from .output_payloads import output_payload

logger = logging.getLogger("spanreplay")

T = TypeVar("T")

__all__ = ["RecordingRun"]


# Results that cannot be awaitable: skips the slower isawaitable() check for most tools.
_PLAIN_RESULTS = frozenset({dict, list, str, int, float, bool, type(None), tuple, bytes})

# What a payload that could not be masked is recorded as: what could not be masked
# is not recorded at all.
_WITHHELD: Final = "<unmasked value withheld>"
# Boundaries whose outputs the machine generates (a clock reading, a random draw, a
# uuid): they hold no one's data, and a detector that fires by chance in one (a uuid's
# digit groups read as a phone number) would leave replay a value it cannot decode.
_GENERATED: Final = frozenset({sc.KIND_CLOCK, sc.KIND_RANDOM, sc.KIND_UUID})
_MASKING_FAILED: Final = '[{"path":"$","rule":"masking_failed"}]'


class RecordingRun(Run):
    """A run in record mode: real work runs, each boundary becomes a span."""

    records = True

    mode = Mode.RECORD

    def __init__(
        self, agent: str, run_id: str | None = None, *, forked_from: str | None = None, parent: str | None = None
    ) -> None:
        if run_id is not None and not is_run_id(run_id):
            raise ConfigurationError(
                f"Run id {run_id!r} cannot name a trace file; use letters, digits, '_', '.' and '-' "
                "(or leave run_id out to get run_YYYYMMDD_HHMMSS_xxxxxxxx)."
            )
        # Names outside the payloads (the agent, tool keys, exception classes) are masked
        # where a detector fires; a run id is not: it names the trace file and every row
        # of the run, and replay is asked for it by name. One that holds personal data or
        # a secret is refused, without repeating it.
        self._names = NameMasker(masker())
        if run_id is not None:
            fired = self._names.fires(run_id)
            if fired:
                raise ConfigurationError(
                    f"The run id given holds what masking masks ({', '.join(fired)}): it would be written "
                    "unmasked to the trace file name, every span and every row of the run. Give an id "
                    "without personal data or secrets, or leave run_id out to get run_YYYYMMDD_HHMMSS_xxxxxxxx."
                )
        super().__init__(run_id or new_run_id(), self._names(agent))
        self.forked_from = forked_from
        self.parent_run_id = parent  # a sub-agent's run: the id of the run that opened it
        self._span: trace.Span | None = None
        self._raise_internal_errors = False
        self._failed = False  # an internal failure was logged: log later ones quietly
        self._tracer: trace.Tracer = trace.NoOpTracer()
        # Boundary spans without the SDK's per-attribute checks, where the tracer allows it.
        self._spans: BoundarySpans | None = None
        self._config: Settings | None = None
        # Masking runs on every payload before the codec sees it; one session per run
        # remembers what it masked.
        self._masking: MaskingSession | None = None
        # Masked without a key: the run's salt and the checks of masked inputs (_masked_checks).
        self._checks: InputChecks | None = None
        # A model call's input repeats the conversation so far: written as a reference to the last one.
        self._inputs = InputHistory()
        # Masks what others write on this run's spans; None while masking is off.
        self._others: OthersMasking | None = None
        # (kind, key) -> what each of its spans starts with (see _boundary).
        self._boundaries: dict[tuple[str, str], tuple[str, SpanKind, dict[str, Any]]] = {}

    def __enter__(self) -> RecordingRun:
        ctx: otel_context.Context | None = None
        try:
            config = self._config = settings()
            self._raise_internal_errors = config.raise_internal_errors
            self._tracer = config.tracer
            self._spans = BoundarySpans.for_tracer(self._tracer)
            if config.masker is not None and config.masker.enabled:
                self._masking = config.masker.session()
                self._checks = InputChecks.start(
                    config.masker, config.trace_dir, self.run_id, raise_internal_errors=config.raise_internal_errors
                )
                self._others = OthersMasking(config.masker)
                if self._spans is not None:
                    self._spans.others = self._others
            attributes: dict[str, Any] = {
                sc.RUN_ID: self.run_id,
                sc.RUN_STATUS: sc.RUN_STATUS_RUNNING,
                sc.SCHEMA: sc.SCHEMA_VERSION,
                sc.GEN_AI_OPERATION_NAME: sc.OPERATION_INVOKE_AGENT,
                sc.GEN_AI_AGENT_NAME: self.agent,
                sc.RUN_MASKING: config.masker.fingerprint if config.masker is not None else "off",
            }
            if self.forked_from:
                attributes[sc.RUN_FORKED_FROM] = self.forked_from
            if self.parent_run_id:
                attributes[sc.RUN_PARENT] = self.parent_run_id
            escape_names(attributes, sc.GEN_AI_AGENT_NAME)  # a name UTF-8 cannot hold would lose the span
            name = sc.run_span_name(attributes[sc.GEN_AI_AGENT_NAME])
            self._span = self._tracer.start_span(name, kind=SpanKind.INTERNAL, attributes=attributes)
            if self._others is not None:
                self._others.remember(self._span, attributes, name)
            ctx = trace.set_span_in_context(self._span)
        except Exception:
            # Without a tracer the boundaries still run their real work, unrecorded.
            self._tracer = trace.NoOpTracer()
            self._spans = None
            self.internal_failure("start the run span")
        self.root.context = ctx
        self._activate(ctx)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._end_pending_calls()
        span = self._span
        steps = 0
        try:
            if span is not None:
                steps = next(self._seq) - 1
                attributes: dict[str, Any] = {sc.RUN_STEPS: steps}
                if exc is None:
                    attributes[sc.RUN_STATUS] = sc.RUN_STATUS_OK
                    span.set_status(Status(StatusCode.OK))
                else:
                    attributes[sc.RUN_STATUS] = sc.RUN_STATUS_ERROR
                    error_type = self._names(type(exc).__qualname__)
                    attributes[sc.ERROR_TYPE] = error_type
                    record, masked = self.mask("run", self.agent, "error", error_record(exc))
                    add_payload(attributes, sc.RUN_ERROR, encode_error_record(record))
                    if masked:
                        attributes[sc.RUN_ERROR + sc.MASKED_SUFFIX] = masked
                    span.set_status(Status(StatusCode.ERROR, error_type))
                if self._others is not None:
                    self._others.mask_started(span, "run", self.agent)
                span.set_attributes(attributes)
                span.end()
        except Exception:
            self.internal_failure("end the run span")
        finally:
            self._deactivate()
        if span is not None and self._config is not None:
            # The settings the run recorded through, even if the agent called reset() since:
            # settings() here would configure anew, after the run, for nothing.
            try:  # after span.end(): the run span is in its file and its row is queued
                status = sc.RUN_STATUS_OK if exc is None else sc.RUN_STATUS_ERROR
                error = None if exc is None else self._names(type(exc).__qualname__)
                ended = EndedRun(self.run_id, self.agent, status, error, steps, span)
                settle_run(self._config, ended, forked=bool(self.forked_from or self.parent_run_id))
            except Exception:
                self.internal_failure("apply the keep policy")
        if span is not None and isinstance(exc, Exception):  # not for Ctrl-C or sys.exit()
            try:
                run_failed(self.run_id, self.agent, exc, tb, error_type=self._names(type(exc).__qualname__))
            except Exception:
                self.internal_failure("log the failure alert")

    def internal_failure(self, what: str) -> None:
        """Report a failure of spanreplay's own: raised if ``raise_internal_errors``, else logged once per run."""
        if self._raise_internal_errors:
            raise
        if self._failed:
            logger.debug("spanreplay could not %s for run %s", what, self.run_id, exc_info=True)
            return
        self._failed = True
        logger.exception(
            "spanreplay could not %s for run %s; the agent continues with less telemetry (further "
            "failures of this run are logged at DEBUG level)",
            what,
            self.run_id,
        )

    def end_note(self, raised: BaseException | None) -> str | None:
        # Nothing else names an ok run to the person who started the program; a failed one's
        # alert (the spanreplay.alerts logger) carries the replay command.
        if raised is None:
            ended = "ended ok"
        elif isinstance(raised, Exception):
            ended = f"failed with {type(raised).__qualname__}"
        else:
            ended = f"was stopped by {type(raised).__qualname__}"
        return f"spanreplay: run {self.run_id} {ended}; {trace_location(self.run_id)}"

    def call(self, call: BoundaryCall) -> Any:
        if inside_itself(self, call.kind, call.key):
            return call.function()
        scope, key, call_id, seq = self._next_call(call.kind, call.key)
        return self.record_call(scope, call_id, seq, key, call)

    def call_async(self, call: BoundaryCall) -> Awaitable[Any]:
        if inside_itself(self, call.kind, call.key):
            awaitable: Awaitable[Any] = call.function()
            return awaitable
        scope, key, call_id, seq = self._next_call(call.kind, call.key)
        return self.record_call_async(scope, call_id, seq, key, call)

    def record_call(self, scope: Scope, call_id: str, seq: int, key: str, call: BoundaryCall) -> Any:
        """``call()`` once the call has its id, seq and masked key: run the sync function and record it."""
        kind = call.kind
        span, child = self._start(scope, call_id, seq, kind, key, call.input, call.attributes)
        if scope.busy is not None:
            concurrent_siblings(self, self._span, scope.busy, child)
        scope.busy = child
        scope_token = current_scope_var.set(child)
        otel_token = otel_context.attach(child.context) if child.context is not None else None
        try:
            result = call.function()
        except BaseException as exc:
            self.finish_boundary(span, kind, key, None, exc)
            raise
        finally:
            if scope.busy is child:
                scope.busy = None
            if otel_token is not None:
                otel_context.detach(otel_token)
            current_scope_var.reset(scope_token)
        if type(result) not in _PLAIN_RESULTS and inspect.isawaitable(result):
            # The function was a plain callable that returned a coroutine (``lambda: client.get(url)``):
            # the work runs when the caller awaits, so record what the await gives.
            return self._record_awaited(span, kind, key, child, result)
        self.finish_boundary(span, kind, key, result, None)
        return result

    def record_call_async(self, scope: Scope, call_id: str, seq: int, key: str, call: BoundaryCall) -> Awaitable[Any]:
        """``call_async()`` once the call has its id, seq and masked key."""
        return self._record_async(scope, call_id, seq, key, call)

    async def _record_async(self, scope: Scope, call_id: str, seq: int, key: str, call: BoundaryCall) -> Any:
        span, child = self._start(scope, call_id, seq, call.kind, key, call.input, call.attributes)
        return await self._record_awaited(span, call.kind, key, child, call.function())

    async def _record_awaited(
        self, span: trace.Span | None, kind: str, key: str, child: Scope, awaitable: Awaitable[Any]
    ) -> Any:
        scope_token = current_scope_var.set(child)
        otel_token = otel_context.attach(child.context) if child.context is not None else None
        try:
            result = await awaitable
        except BaseException as exc:
            self.finish_boundary(span, kind, key, None, exc, awaited=True)
            raise
        finally:
            if otel_token is not None:
                otel_context.detach(otel_token)
            current_scope_var.reset(scope_token)
        self.finish_boundary(span, kind, key, result, None, awaited=True)
        return result

    def _start(
        self,
        scope: Scope,
        call_id: str,
        seq: int,
        kind: str,
        key: str,
        input: Any,
        extra: dict[str, Any] | None,
    ) -> tuple[trace.Span | None, Scope]:
        try:
            boundary = self._boundaries.get((kind, key))
            if boundary is None:
                boundary = self._boundary(kind, key)
            name, span_kind, constant = boundary
            # Extra attributes go first: past its count limit the SDK evicts the oldest,
            # and losing a GenAI attribute is better than losing the replay payload.
            # Copying the boundary's attributes keeps their order; the seq and call id
            # then fill the slots held for them.
            spans = self._spans
            if extra and spans is not None:
                extra = checked(extra)  # then the whole dict is values the SDK would keep as they are
            attributes: dict[str, Any] = {**extra, **constant} if extra else constant.copy()
            attributes[sc.SEQ] = seq
            attributes[sc.CALL_ID] = call_id
            if not call_id.isascii():  # a key or a task name may hold text UTF-8 cannot
                escape_names(attributes, sc.CALL_ID)
            unmasked = input
            input, data, masked = self._masked_payload(kind, key, "input", input, encode_input)
            self._inputs.add_input(attributes, kind, key, seq, input, data)
            if masked:
                attributes[sc.INPUT + sc.MASKED_SUFFIX] = masked
                if self._checks is not None and not self._checks.add_to(
                    attributes, kind, key, call_id, unmasked, masked, failed=self.internal_failure
                ):
                    self._checks = None  # the salt could not be written: replay compares by kind
            if extra:  # the only way message content gets here
                self.mask_content(kind, key, attributes)
            if spans is not None:
                span = spans.start(name, scope.context, span_kind, attributes)
            else:
                span = self._tracer.start_span(name, context=scope.context, kind=span_kind, attributes=attributes)
                if self._others is not None:
                    self._others.remember(span, attributes, name)
            return span, Scope(self, call_id, trace.set_span_in_context(span))
        except Exception:
            self.internal_failure(f"start the span of {kind} {key!r}")
            return None, Scope(self, call_id, scope.context)

    def _boundary(self, kind: str, key: str) -> tuple[str, SpanKind, dict[str, Any]]:
        """A boundary's span name, span kind and the attributes every call of it starts with.

        The same for each call of one kind and key in a run: made once, copied per call.
        The seq and call id are held in their place (filled in per call) so the
        attributes keep the order the trace file has always written them in.
        """
        constant: dict[str, Any] = {
            sc.RUN_ID: self.run_id,
            sc.SEQ: 0,
            sc.CALL_ID: "",
            sc.KIND: kind,
            sc.KEY: key,
            sc.SCHEMA: sc.SCHEMA_VERSION,
        }
        if self.parent_run_id:  # a sub-agent's spans say which agent made them
            constant[sc.GEN_AI_AGENT_NAME] = self.agent
        if kind == sc.KIND_TOOL:
            constant[sc.GEN_AI_OPERATION_NAME] = sc.OPERATION_EXECUTE_TOOL
            constant[sc.GEN_AI_TOOL_NAME] = key
        escape_names(constant, *BOUNDARY_NAMES, sc.GEN_AI_AGENT_NAME)
        boundary = (
            sc.boundary_span_name(constant[sc.KIND], constant[sc.KEY]),
            SpanKind.CLIENT if kind == sc.KIND_MODEL else SpanKind.INTERNAL,
            constant,
        )
        if len(self._boundaries) < 1024:  # a run with ever new keys does not grow it without end
            self._boundaries[(kind, key)] = boundary
        return boundary

    def finish_boundary(
        self,
        span: trace.Span | None,
        kind: str,
        key: str,
        result: Any,
        exc: BaseException | None,
        *,
        awaited: bool = False,
    ) -> None:
        if span is None:
            return
        try:
            attributes: dict[str, Any] = {sc.AWAITED: True} if awaited else {}
            types = None
            if exc is None:
                name = sc.OUTPUT
                data, masked, types = output_payload(
                    kind,
                    key,
                    result,
                    masked_payload=self._masked_payload,
                    names=self._names if self._masking is not None else None,
                    report=self._report_unencodable,
                    mask_bytes=self._mask_bytes if self._others is not None and kind not in _GENERATED else None,
                )
            else:
                name = sc.ERROR
                _, data, masked = self._masked_payload(kind, key, "error", error_record(exc), encode_error_record)
            add_payload(attributes, name, data)
            if masked:
                attributes[name + sc.MASKED_SUFFIX] = masked
            if types is not None:
                add_payload(attributes, sc.OUTPUT_TYPES, types.encode())
            if exc is not None:
                attributes[sc.ERROR_TYPE] = self._names(type(exc).__qualname__)
            if type(span) is BoundarySpan:
                span.set_own(attributes)
            else:
                if self._others is not None:
                    self._others.mask_started(span, kind, key)
                span.set_attributes(attributes)
            if exc is not None:
                span.set_status(Status(StatusCode.ERROR, attributes[sc.ERROR_TYPE]))
            span.end()
        except Exception:
            self.internal_failure("finish a boundary span")

    def _report_unencodable(self, kind: str, key: str, found: list[tuple[str, str]]) -> None:
        _typed.report_unencodable(self, self.run_id, kind, key, found)

    def _mask_bytes(self, data: Any) -> Any:
        """Bytes in an output, masked as the text they hold and kept bytes (see ``masking._bytes``)."""
        assert self._others is not None
        try:
            return self._others.masker.mask_bytes(data)[0]
        except Exception:
            self.internal_failure("mask the bytes in an output")
            return type(data)(_WITHHELD.encode())  # what could not be masked is not recorded

    def mask(self, kind: str, key: str, part: str, value: Any) -> tuple[Any, str | None]:
        """``value`` masked, and the JSON list of the paths masked (None when none were)."""
        session = self._masking
        if session is None:
            return value, None
        try:
            result = session.mask(kind, key, value, part=part)
        except Exception:
            self.internal_failure(f"mask the {part} of {kind} {key!r}")
            # What could not be masked is not recorded at all.
            return _WITHHELD, _MASKING_FAILED
        if not result.fired:
            return result.value, None
        return result.value, orjson.dumps(result.fired_records()).decode()

    def _masked_payload(
        self, kind: str, key: str, part: str, value: Any, encode: Callable[[Any], bytes]
    ) -> tuple[Any, bytes, str | None]:
        """``value`` masked, its JSON written by ``encode``, and the JSON list of the paths
        masked (None when none were).

        The payload is encoded first and masking reads those bytes: a payload in which
        nothing can be masked (most) is settled by one scan of them, and its JSON is
        written once.
        """
        try:
            data = encode(value)
        except Exception:
            # Not JSON as it is: masking goes first, as it may replace what could not be
            # encoded (or withhold it); the encoding then raises if it still cannot.
            value, masked = self.mask(kind, key, part, value)
            return value, encode(value), masked
        session = self._masking
        if session is None or (part == "output" and kind in _GENERATED):
            return value, data, None
        try:
            result = session.mask_encoded(kind, key, value, data, part=part)
        except Exception:
            self.internal_failure(f"mask the {part} of {kind} {key!r}")
            return _WITHHELD, encode(_WITHHELD), _MASKING_FAILED
        if result is None:
            return value, data, None
        return result.value, encode(result.value), orjson.dumps(result.fired_records()).decode()

    def mask_content(self, kind: str, key: str, attributes: dict[str, Any]) -> None:
        """Mask the opt-in GenAI message-content attributes and the stop sequences in place."""
        if self._masking is not None:
            mask_content_attributes(self.mask, kind, key, attributes)

    def begin(
        self,
        kind: str,
        key: str,
        input: Any,
        *,
        attributes: dict[str, Any] | None = None,
        span_name: str | None = None,
        input_json: bytes | None = None,
    ) -> Call:
        scope, key, call_id, seq = self._next_call(kind, key)
        call = self.begin_call(scope, call_id, seq, kind, key, input, attributes)
        if span_name is not None:
            call.rename(span_name)
        return call

    def begin_call(
        self, scope: Scope, call_id: str, seq: int, kind: str, key: str, input: Any, attributes: dict[str, Any] | None
    ) -> Call:
        """``begin()`` once the call has its id and seq."""
        span, child = self._start(scope, call_id, seq, kind, key, input, attributes)
        call = Call(kind, key, seq, child, span=span, recorder=self)
        self.pending_calls[id(call)] = call
        return call

"""Spans -> events: the boundary and run spans of a trace, decoded and verified.

Readers hand the codec ``SpanRecord``s, whatever format they came from; it
checks the schema version, reads every payload through ``_payloads`` (length and
sha256 verified) and gives the ``Event`` or ``RunInfo`` replay works from. It
knows no exporter, no reader and no run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spanreplay import semconv as sc
from spanreplay.errors import PayloadIntegrityError, SchemaVersionError, TraceFormatError

from .error_records import decode_error
from .escaped_names import plain_name
from .events import Event, RunInfo
from .input_refs import INPUT_REF_ATTRIBUTES
from .payloads import COUNT_LIMIT_FIX, int_attribute, read_payload
from .spans import SpanRecord


def schema_version(span: SpanRecord) -> int:
    version = int_attribute(span.attributes, sc.SCHEMA, span.origin)
    if version > sc.SCHEMA_VERSION_READ:
        raise SchemaVersionError(
            f"Span {span.span_id} ({span.origin}) was written with spanreplay schema version "
            f"{version}, and this release reads versions 1 to {sc.SCHEMA_VERSION_READ}; upgrade spanreplay "
            "(pip install -U spanreplay) to read it.",
            source=span.origin,
        )
    if version < 1:
        raise SchemaVersionError(
            f"Span {span.span_id} ({span.origin}) has schema version {version}, which no "
            "spanreplay release wrote; the file was edited or is not a spanreplay trace.",
            source=span.origin,
        )
    return version


def is_boundary_span(span: SpanRecord) -> bool:
    return sc.CALL_ID in span.attributes and sc.RUN_ID in span.attributes


def is_run_span(span: SpanRecord) -> bool:
    return sc.RUN_STATUS in span.attributes and sc.RUN_ID in span.attributes


def span_to_event(span: SpanRecord) -> Event:
    """Decode one boundary span, verifying every payload."""
    attrs = span.attributes
    version = schema_version(span)
    where = span.origin or f"span {span.span_id}"
    run_id = _text_attribute(attrs, sc.RUN_ID, where)
    seq = int_attribute(attrs, sc.SEQ, span.origin)
    call_id = _text_attribute(attrs, sc.CALL_ID, where)
    input_json = read_payload(attrs, sc.INPUT, run_id=run_id, seq=seq, origin=where)
    output_json = read_payload(attrs, sc.OUTPUT, run_id=run_id, seq=seq, origin=where)
    error_json = read_payload(attrs, sc.ERROR, run_id=run_id, seq=seq, origin=where)
    output_types = read_payload(attrs, sc.OUTPUT_TYPES, run_id=run_id, seq=seq, origin=where) if output_json else None
    effect = attrs.get(sc.EFFECT) is True
    # A side effect's intent: its span written when it started, before its work ran, and
    # never ended (a copy that ended replaces it). It has no outcome, and says so.
    intent = effect and not span.ended
    if input_json is None or (output_json is None and error_json is None and not intent):
        # Every boundary records an input and then an output or an error: a span without
        # them lost its attributes (the SDK evicts the oldest past its count limit), and
        # replaying it would serve a made-up null.
        missing = sc.INPUT if input_json is None else f"neither {sc.OUTPUT} nor {sc.ERROR}"
        raise PayloadIntegrityError(
            f"Run {run_id} seq {seq}: the boundary span has {missing} ({where}): the span lost attributes "
            f"on the way. Nothing was replayed from it. {COUNT_LIMIT_FIX}",
            run_id=run_id,
            seq=seq,
            attribute=sc.INPUT if input_json is None else sc.OUTPUT,
            expected_size=-1,
            found_size=0,
            source=span.origin,
        )
    # What masking changed (spanreplay.input.masked, ...), the input's checks and a fork's
    # served_from stay beside the span's own attributes.
    extra = {
        k: v
        for k, v in attrs.items()
        if not k.startswith("spanreplay.")
        or k.endswith(sc.MASKED_SUFFIX)
        or k in INPUT_REF_ATTRIBUTES
        or k == sc.SERVED_FROM
        or k == sc.INPUT_CHECKS
    }
    return Event(
        run_id=run_id,
        seq=seq,
        call_id=call_id,
        kind=_text_attribute(attrs, sc.KIND, where, required=False),
        key=_text_attribute(attrs, sc.KEY, where, required=False),
        input_json=input_json,
        output_json=output_json,
        error=decode_error(error_json, origin=where) if error_json is not None else None,
        schema_version=version,
        awaited=attrs.get(sc.AWAITED) is True,
        trace_id=span.trace_id,
        span_id=span.span_id,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        attributes=extra,
        output_types=output_types,
        effect=effect,
    )


def _text_attribute(attrs: Mapping[str, Any], name: str, where: str, *, required: bool = True) -> str:
    """A text attribute spanreplay writes; absent is "" when not ``required``.

    ``str()`` of whatever is there would turn an empty OTLP value (None) into the
    call id ``'None'``, one that the recording never had.
    """
    value = attrs.get(name)
    if isinstance(value, str) and (value or not required):
        return plain_name(attrs, name, value, where)
    if value is None and not required and name not in attrs:
        return ""
    found = "an empty string" if value == "" else "no value" if value is None else f"{value!r}"
    raise TraceFormatError(
        f"Attribute {name} holds {found}, not the text spanreplay writes ({where}); the span was not "
        "written by spanreplay or was edited.",
        source=where,
    )


def span_to_run(span: SpanRecord) -> RunInfo:
    """Decode a run root span. A root span that never ended means the run crashed."""
    attrs = span.attributes
    run_id = str(attrs[sc.RUN_ID])
    status = str(attrs.get(sc.RUN_STATUS, sc.RUN_STATUS_CRASHED))
    if not span.ended or status == sc.RUN_STATUS_RUNNING:
        status = sc.RUN_STATUS_CRASHED
    error_json = read_payload(attrs, sc.RUN_ERROR, run_id=run_id, seq=0, origin=span.origin)
    steps = attrs.get(sc.RUN_STEPS)
    return RunInfo(
        run_id=run_id,
        agent=plain_name(
            attrs, sc.GEN_AI_AGENT_NAME, str(attrs.get(sc.GEN_AI_AGENT_NAME, "")), span.origin or f"span {span.span_id}"
        ),
        status=status,
        error=decode_error(error_json, origin=span.origin) if error_json is not None else None,
        trace_id=span.trace_id,
        span_id=span.span_id,
        start_ns=span.start_ns,
        end_ns=span.end_ns,
        service_name=str(span.resource.get(sc.SERVICE_NAME, "")),
        steps=_small_int(steps),
        forked_from=attrs.get(sc.RUN_FORKED_FROM),
        masking=str(attrs[sc.RUN_MASKING]) if sc.RUN_MASKING in attrs else None,
        forked_at=_small_int(attrs.get(sc.RUN_FORKED_AT)),
        origin=span.origin,
        gaps=concurrent_siblings_gap(attrs.get(sc.RUN_CONCURRENT_SIBLINGS)),
    )


def concurrent_siblings_gap(value: object) -> tuple[str, ...]:
    """What a run that made two boundaries at once from one scope cannot promise (see
    ``spanreplay.recording.concurrent_siblings``): () for a run that did not."""
    if not isinstance(value, (list, tuple)) or not value:
        return ()
    ids = " and ".join(str(item) for item in value[:2])
    return (
        f"the recording made {ids} at the same time from one scope, with no branch between them, "
        "so their call ids depend on timing and the replay may diverge there (start such work as "
        "tasks or threads spanreplay sees, or with an executor that copies the context)",
    )


def _small_int(value: object) -> int | None:
    # isdecimal, not isdigit: int() refuses superscripts; 18 digits keep int() in range.
    text = str(value)
    return int(text) if isinstance(value, (int, str)) and text.isdecimal() and len(text) < 19 else None

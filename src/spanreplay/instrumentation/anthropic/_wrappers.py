"""The wrappers around the SDK's client: one model boundary per Messages call.

Every Messages method (``create``, ``stream``, ``parse``, ``count_tokens``, their
``beta`` twins, ``with_raw_response`` and ``with_streaming_response``, the beta
tool runner) ends in the client's ``request()``, so that is where a call becomes
a boundary. Below it, ``_attempt_request()`` sends one HTTP attempt: record mode
notes what came back; replay mode answers from the recording instead of sending.
``_sleep_for_retry()`` does not wait on replay.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial
from typing import Any

import httpx2
import orjson
from anthropic import APIConnectionError, APIError

from spanreplay import semconv as sc
from spanreplay.errors import DifferentCallError, InputChangedError
from spanreplay.recording.configuration import settings
from spanreplay.run.base import BoundaryCall, Run, run_for_boundary
from spanreplay.run.calls import Call
from spanreplay.sources.foreign import as_recorded
from spanreplay.sources.foreign import attempts as foreign_attempts

from . import _direct
from ._attributes import request_attributes
from ._errors import with_recorded_message
from ._exchange import CallRecorder, CallReplayer

logger = logging.getLogger("spanreplay")

_recording: ContextVar[CallRecorder | None] = ContextVar("spanreplay_anthropic_recording", default=None)
_replaying: ContextVar[CallReplayer | None] = ContextVar("spanreplay_anthropic_replaying", default=None)
# A replayed call post() began and the SDK serves: handed to the request() that post() calls.
_begun: ContextVar[Call | None] = ContextVar("spanreplay_anthropic_begun", default=None)

# Set by the instrumentor: keep the SDK's own span inside spanreplay's (record mode only).
options: dict[str, bool] = {"sdk_spans": False}

_ENDPOINTS = {"/v1/messages": "messages", "/v1/messages/count_tokens": "count_tokens"}


def _bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, bool, Any]:
    """``request(cast_to, options, *, stream=False, stream_cls=None)``'s arguments."""
    cast_to = args[0] if args else kwargs["cast_to"]
    request_options = args[1] if len(args) > 1 else kwargs["options"]
    return cast_to, request_options, bool(kwargs.get("stream", False)), kwargs.get("stream_cls")


def _endpoint(request_options: Any) -> str | None:
    if str(getattr(request_options, "method", "")).lower() != "post":
        return None
    url = str(getattr(request_options, "url", ""))
    return _ENDPOINTS.get(url.split("?", 1)[0])


def call_input(request_options: Any, endpoint: str, body: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """The boundary's input (the request, without headers) and its key (the model).

    ``body`` is the prepared request body when the caller has it another way than
    from prepared options (the direct replay path).
    """
    if body is None:
        body = request_options.json_data if isinstance(request_options.json_data, dict) else {}
    headers = request_options.headers if isinstance(request_options.headers, dict) else {}
    betas = headers.get("anthropic-beta")
    qualifiers = getattr(request_options, "qualifiers", None) or {}
    value: dict[str, Any] = {"endpoint": endpoint, "body": body}
    if qualifiers.get("beta") == "true":
        value["beta"] = True
    if isinstance(betas, str) and betas:
        # The one request header that changes what the model does; it holds no credential.
        value["betas"] = [b.strip() for b in betas.split(",") if b.strip()]
    if request_options.params:
        value["query"] = dict(request_options.params)
    model = body.get("model")
    return value, model if isinstance(model, str) and model else "unknown"


def _begin(run: Run, instance: Any, request_options: Any, endpoint: str) -> tuple[Call, str]:
    value, model = call_input(request_options, endpoint)
    value = as_recorded(run.replayed_log, value)
    attributes: dict[str, Any] = {}
    try:
        if run.records:  # replay emits no span to put them on
            url = instance.base_url
            attributes = request_attributes(value["body"], url.host, url.port, count_tokens=endpoint == "count_tokens")
    except Exception:
        if settings().raise_internal_errors:
            raise
        logger.exception("spanreplay could not read the request attributes of a call to %s", model)
    span_name = f"{sc.OPERATION_COUNT_TOKENS} {model}" if endpoint == "count_tokens" else None
    try:
        return run.begin(sc.KIND_MODEL, model, value, attributes=attributes, span_name=span_name), model
    except DifferentCallError as exc:
        raise _model_changed(run, exc, value) or exc from None


def _served_directly(
    run: Run, instance: Any, cast_to: Any, request_options: Any, endpoint: str, *, stream: bool
) -> tuple[Call | None, Any]:
    """The one decision of how a replayed call is served, made before the SDK prepares the request.

    ``(call, object)``: the call is begun and ``object`` is what the SDK would have
    returned for its recording (the ``direct`` accelerator). ``(call, DECLINED)``:
    the call is begun, and the SDK serves its recording (retries, an error, a
    stream). ``(None, DECLINED)``: not begun; the SDK prepares the request, then the
    call is begun from that (recording, the accelerator off, or a request the
    SDK's preparation would change).
    """
    log = run.replayed_log
    if not _direct.DIRECT.on or log is None:
        return None, _direct.DECLINED
    body = _direct.plain_body(instance, cast_to, request_options, stream=stream)
    if body is None:
        return None, _direct.DECLINED
    value, model = call_input(request_options, endpoint, body)
    value = as_recorded(log, value)
    input_json = _direct.encoded(value)
    if input_json is None:
        return None, _direct.DECLINED
    try:
        call = run.begin(sc.KIND_MODEL, model, value, input_json=input_json)
    except DifferentCallError as exc:
        raise _model_changed(run, exc, value) or exc from None
    return call, _direct.serve(call, cast_to)


def _model_changed(run: Run, exc: DifferentCallError, attempted: dict[str, Any]) -> InputChangedError | None:
    """A model call where the recording has a model call to another model: the same call, changed.

    The key is the model, so the engine sees a different call; for a person it is
    the request that changed, and the request diff says how.
    """
    log = run.replayed_log
    if log is None or exc.seq is None:
        return None
    recorded = log.by_seq(exc.seq)
    if recorded is None or recorded.kind != sc.KIND_MODEL:
        return None

    def lines(value: Any) -> list[str]:
        return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode().splitlines()

    diff = "\n".join(
        difflib.unified_diff(lines(recorded.input), lines(attempted), "recorded", "attempted", lineterm="", n=2)
    )
    return InputChangedError(
        f"Replay of run {run.run_id} diverged at seq {recorded.seq} (call id {recorded.call_id}): the code made "
        f"the recorded Anthropic call with a different request (model {recorded.key!r} recorded, "
        f"{attempted['body'].get('model')!r} attempted).\n"
        f"Request diff (- recorded, + attempted):\n{diff}\n"
        "Fix the code so it sends the recorded request, or record the run again.",
        diff=diff,
        run_id=run.run_id,
        seq=recorded.seq,
        call_id=exc.call_id,
        recorded=recorded.describe(),
        attempted=exc.attempted,
    )


def _attempts(call: Call, *, stream: bool) -> list[dict[str, Any]]:
    event = call.recorded
    assert event is not None
    foreign = foreign_attempts(event, stream=stream)
    if foreign is not None:
        return foreign
    output = orjson.loads(event.output_json) if event.output_json is not None else None
    if isinstance(output, dict) and isinstance(output.get("attempts"), list):
        attempts: list[dict[str, Any]] = output["attempts"]
        return attempts
    # A recording without the exchange (an error recorded before any attempt): replay its error.
    return (
        [
            {
                "raised": {
                    "type": event.error.type_name,
                    "module": event.error.module,
                    "message": event.error.message,
                    "args": list(event.error.args),
                    "fields": dict(event.error.fields),
                }
            }
        ]
        if event.error
        else []
    )


@contextmanager
def _serving(call: Call, *, stream: bool = False) -> Iterator[None]:
    token = _replaying.set(CallReplayer(call, _attempts(call, stream=stream)))
    try:
        with call.activate():
            yield
    except APIError as exc:
        # The SDK built it from the recorded response, worded as the installed release words it.
        with_recorded_message(exc, call.recorded.error if call.recorded is not None else None)
        raise
    finally:
        _replaying.reset(token)


def _guard(what: str, fn: Callable[[], None]) -> None:
    """Telemetry never breaks the agent: log spanreplay's own failures.

    With ``raise_internal_errors`` set they are raised instead.
    """
    try:
        fn()
    except Exception:
        if settings().raise_internal_errors:
            raise
        logger.exception("spanreplay could not %s; the agent continues with less telemetry", what)


# --- request(): the call ---------------------------------------------------------------


def request_sync(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    run = run_for_boundary("an Anthropic Messages API call")
    if run is None:
        return wrapped(*args, **kwargs)
    cast_to, request_options, stream, stream_cls = _bind(args, kwargs)
    endpoint = _endpoint(request_options)
    if endpoint is None:
        return wrapped(*args, **kwargs)
    call, served = _decided(run, instance, cast_to, request_options, endpoint, stream=stream)
    if served is not _direct.DECLINED:
        return served
    request_options = instance._copy_and_prepare(request_options)
    model = None
    if call is None:
        call, model = _begin(run, instance, request_options, endpoint)
    if call.replaying:
        with _serving(call, stream=stream):
            return instance._request(cast_to, request_options, stream=stream, stream_cls=stream_cls)
    recorder = CallRecorder(call, model=model, stream=stream)
    token = _recording.set(recorder)
    try:
        with call.activate():
            if options["sdk_spans"]:
                result = wrapped(cast_to, request_options, stream=stream, stream_cls=stream_cls)
            else:
                result = instance._request(cast_to, request_options, stream=stream, stream_cls=stream_cls)
    except BaseException as exc:
        _guard("record a failed model call", partial(recorder.failed, exc))
        raise
    finally:
        _recording.reset(token)
    _guard("record a model call", recorder.returned)
    return result


async def request_async(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    run = run_for_boundary("an Anthropic Messages API call")
    if run is None:
        return await wrapped(*args, **kwargs)
    cast_to, request_options, stream, stream_cls = _bind(args, kwargs)
    endpoint = _endpoint(request_options)
    if endpoint is None:
        return await wrapped(*args, **kwargs)
    call, served = _decided(run, instance, cast_to, request_options, endpoint, stream=stream)
    if served is not _direct.DECLINED:
        return served
    request_options = await instance._copy_and_prepare(request_options)
    model = None
    if call is None:
        call, model = _begin(run, instance, request_options, endpoint)
    if call.replaying:
        with _serving(call, stream=stream):
            return await instance._request(cast_to, request_options, stream=stream, stream_cls=stream_cls)
    recorder = CallRecorder(call, model=model, stream=stream)
    token = _recording.set(recorder)
    try:
        with call.activate():
            if options["sdk_spans"]:
                result = await wrapped(cast_to, request_options, stream=stream, stream_cls=stream_cls)
            else:
                result = await instance._request(cast_to, request_options, stream=stream, stream_cls=stream_cls)
    except BaseException as exc:
        _guard("record a failed model call", partial(recorder.failed, exc))
        raise
    finally:
        _recording.reset(token)
    _guard("record a model call", recorder.returned)
    return result


def _decided(
    run: Run, instance: Any, cast_to: Any, request_options: Any, endpoint: str, *, stream: bool
) -> tuple[Call | None, Any]:
    """``_served_directly`` for this call, unless ``post()`` asked it already and began the call."""
    begun = _begun.get()
    if begun is not None:
        _begun.set(None)  # this call's alone: a call the SDK makes while serving it begins its own
        return begun, _direct.DECLINED
    return _served_directly(run, instance, cast_to, request_options, endpoint, stream=stream)


# --- post(): the decision made before the SDK builds its request options ---------------------


def _from_post(run: Run, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Call | None, Any]:
    """``_served_directly`` asked from ``post()``'s arguments, or ``(None, DECLINED)`` when it cannot be.

    Building the request options costs more than the rest of a replayed call, so
    the decision is made here when it can be: ``post(path, *, cast_to, body=None,
    content=None, options={}, files=None, stream=False, stream_cls=None)``. A client
    whose resources were made before instrumenting reaches ``request()`` alone,
    which asks the same function.
    """
    if not _direct.DIRECT.on or run.replayed_log is None or len(args) > 1 or "cast_to" not in kwargs:
        return None, _direct.DECLINED
    path = args[0] if args else kwargs.get("path")
    endpoint = _ENDPOINTS.get(path.split("?", 1)[0]) if isinstance(path, str) else None
    if endpoint is None or not isinstance(path, str):
        return None, _direct.DECLINED
    view = _direct.PostOptions(
        path, kwargs.get("body"), kwargs.get("options") or {}, kwargs.get("files"), kwargs.get("content")
    )
    stream = bool(kwargs.get("stream", False))
    return _served_directly(run, instance, kwargs["cast_to"], view, endpoint, stream=stream)


def post_sync(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    run = run_for_boundary("an Anthropic Messages API call")
    if run is None:
        return wrapped(*args, **kwargs)
    call, served = _from_post(run, instance, args, kwargs)
    if served is not _direct.DECLINED:
        return served
    token = _begun.set(call)
    try:
        return wrapped(*args, **kwargs)
    finally:
        _begun.reset(token)


async def post_async(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    run = run_for_boundary("an Anthropic Messages API call")
    if run is None:
        return await wrapped(*args, **kwargs)
    call, served = _from_post(run, instance, args, kwargs)
    if served is not _direct.DECLINED:
        return served
    token = _begun.set(call)
    try:
        return await wrapped(*args, **kwargs)
    finally:
        _begun.reset(token)


# --- _attempt_request(): one HTTP attempt -------------------------------------------------


def _offline_request(instance: Any, request_options: Any) -> httpx2.Request:
    """The request the SDK would have sent, built without credentials or network.

    The SDK reads its headers (the raw-response mode) and errors carry it.
    """
    headers = request_options.headers if isinstance(request_options.headers, dict) else {}
    plain = {name: value for name, value in headers.items() if isinstance(value, str)}
    key = (str(instance.base_url), request_options.url)
    url = _urls.get(key)
    if url is None:
        # Parsing the URL is a tenth of a replayed call; clients and endpoints are few.
        url = _urls[key] = instance._prepare_url(request_options.url)
        if len(_urls) > 256:
            _urls.clear()
    return httpx2.Request(str(request_options.method).upper(), url, headers=plain)


_urls: dict[tuple[str, str], Any] = {}


def _note(recorder: CallRecorder, what: str, fn: Callable[[], None]) -> None:
    _guard(f"record {what} of model call {recorder.call.call_id}", fn)


def attempt_sync(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    replayer = _replaying.get()
    if replayer is not None:
        request_options = args[0] if args else kwargs["options"]
        return replayer.respond(_offline_request(instance, request_options)), request_options
    recorder = _recording.get()
    if recorder is None:
        return wrapped(*args, **kwargs)
    # One attempt only: a middleware that calls the client again starts its own call.
    token = _recording.set(None)
    try:
        response, prepared = wrapped(*args, **kwargs)
    except APIConnectionError as exc:
        _note(recorder, "a connection error", partial(recorder.connection_error, exc))
        raise
    except Exception as exc:
        _note(recorder, "an attempt's error", partial(recorder.raised, exc))
        raise
    finally:
        _recording.reset(token)
    _note(recorder, "a response", partial(recorder.response, response, instance))
    return response, prepared


async def attempt_async(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    replayer = _replaying.get()
    if replayer is not None:
        request_options = args[0] if args else kwargs["options"]
        return replayer.respond(_offline_request(instance, request_options)), request_options
    recorder = _recording.get()
    if recorder is None:
        return await wrapped(*args, **kwargs)
    token = _recording.set(None)
    try:
        response, prepared = await wrapped(*args, **kwargs)
    except APIConnectionError as exc:
        _note(recorder, "a connection error", partial(recorder.connection_error, exc))
        raise
    except Exception as exc:
        _note(recorder, "an attempt's error", partial(recorder.raised, exc))
        raise
    finally:
        _recording.reset(token)
    _note(recorder, "a response", partial(recorder.response, response, instance))
    return response, prepared


# --- _sleep_for_retry(): no waiting on replay ------------------------------------------------


def sleep_sync(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if _replaying.get() is not None:
        return None
    return wrapped(*args, **kwargs)


async def sleep_async(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if _replaying.get() is not None:
        return None
    return await wrapped(*args, **kwargs)


# --- the beta tool runner's tools ------------------------------------------------------------


def _tool_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return args[-1] if args else kwargs["tool_use"]


def run_tool_sync(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    run = run_for_boundary("an Anthropic tool runner call")
    if run is None:
        return wrapped(*args, **kwargs)
    return run.call(_tool_boundary(_tool_call(args, kwargs), partial(wrapped, *args, **kwargs)))


async def run_tool_async(
    wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    run = run_for_boundary("an Anthropic tool runner call")
    if run is None:
        return await wrapped(*args, **kwargs)

    async def work() -> Any:
        return await wrapped(*args, **kwargs)

    return await run.call_async(_tool_boundary(_tool_call(args, kwargs), work))


def _tool_boundary(tool_use: Any, work: Callable[[], Any]) -> BoundaryCall:
    """The boundary call of the tool runner's execution of ``tool_use``."""
    return BoundaryCall(
        kind=sc.KIND_TOOL,
        key=str(tool_use.name),
        input=tool_use.input,
        function=work,
        attributes={sc.GEN_AI_TOOL_CALL_ID: str(tool_use.id)},
    )

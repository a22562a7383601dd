"""Record the SDK's exceptions fully, and rebuild them from a recorded error payload.

Replay normally re-raises API errors by handing the SDK the recorded HTTP
response, so the SDK builds the exception itself. This module covers the cases
where the SDK does not: a run's recorded error, an error recorded without its
exchange, and a connection error or timeout of one attempt. Each is rebuilt
through the SDK's public constructors from what was recorded (status, headers,
body, message, request), and carries the recorded message on every release in
the supported range: 2.0 fixes the timeout's message, later releases take one.

``error_fields`` keeps what the plain fields miss at record time: the body as
JSON, the response's headers and the request's method and URL. Recordings made
before it have only the message, whose body ``_error_body`` reads back in
linear time.

A recorded type name is data: it is looked up in the ``__dict__`` of an
``anthropic`` module that is already imported, and only ``anthropic.APIError``
subclasses are built here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

import httpx2
import orjson

from spanreplay.model.error_records import recorded_class
from spanreplay.model.events import ErrorInfo

from ._error_body import body_from_message

__all__ = ["connection_error", "error_fields", "rebuild_anthropic_error"]

_PLACEHOLDER_URL: Final = "https://api.anthropic.com/v1/messages"
# As the exchange records them: headers about the transfer say nothing about the error.
_SKIP_HEADERS: Final = frozenset(
    {"content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive", "set-cookie"}
)
# Attributes the SDK derives from the response's headers and body; a recording made
# before the body was kept restores them from its plain fields.
_DERIVED: Final = ("request_id", "workspace_id", "api_message", "type", "error_code")


def _sdk(name: str) -> Any:
    """An SDK class by its public name, or None; typed loosely, as releases differ in constructors."""
    module = sys.modules.get("anthropic")
    found = module.__dict__.get(name) if module is not None else None
    return found if isinstance(found, type) else None


def error_fields(exc: BaseException) -> dict[str, Any] | None:
    """The body, headers and request of an SDK ``APIError``, as JSON values (None for other errors)."""
    api_error = _sdk("APIError")
    if api_error is None or not isinstance(exc, api_error):
        return None
    fields: dict[str, Any] = {}
    request = vars(exc).get("request")
    if isinstance(request, httpx2.Request):
        fields["request_method"] = request.method
        # Without userinfo: a password in a proxy URL is not the error's to record.
        fields["request_url"] = str(request.url.copy_with(username=None, password=None))
    response = vars(exc).get("response")
    if isinstance(response, httpx2.Response):
        headers: dict[str, str] = {}
        for name, value in response.headers.multi_items():
            name = name.lower()
            if name not in _SKIP_HEADERS:
                headers[name] = f"{headers[name]}, {value}" if name in headers else value
        fields["response_headers"] = headers
    body = vars(exc).get("body")
    try:
        orjson.dumps(body)
    except TypeError:  # not what json.loads gives (an integer beyond 64 bits): left to the message
        return fields
    fields["body"] = body
    return fields


def _request(fields: Mapping[str, Any]) -> httpx2.Request:
    method, url = fields.get("request_method"), fields.get("request_url")
    if isinstance(method, str) and isinstance(url, str):
        try:
            return httpx2.Request(method, url)
        except (httpx2.InvalidURL, ValueError, TypeError):
            pass  # a trace's URL that httpx2 refuses: the placeholder stands for it
    return httpx2.Request("POST", _PLACEHOLDER_URL)


def _headers(fields: Mapping[str, Any]) -> list[tuple[str, str]]:
    recorded = fields.get("response_headers")
    if isinstance(recorded, dict):
        return [(str(name), str(value)) for name, value in recorded.items() if isinstance(value, str)]
    headers = []
    for field, header in (("request_id", "request-id"), ("workspace_id", "anthropic-workspace-id")):
        value = fields.get(field)
        if isinstance(value, str):
            headers.append((header, value))
    return headers


def timeout_error(cls: type[Any], request: httpx2.Request, message: str) -> Any:
    """``cls(request)`` (an ``APITimeoutError``) that says ``message``, on every supported release."""
    try:
        exc = cls(request, message=message)  # releases after 2.0 take the message
    except TypeError:
        exc = cls(request)
    if str(exc) != message:
        # 2.0's constructor fixes the message; it is set as the SDK's own __init__ sets it.
        exc.message = message
        exc.args = (message,)
    return exc


def with_recorded_message(exc: BaseException, info: ErrorInfo | None) -> None:
    """Give an API error the SDK built from a recorded response the message recorded with it.

    The SDK words a status error itself, and the wording changed within 2.x (``Error
    code: 429 - {...}`` in 2.0, ``429 ... (request_id: ...)`` later): a trace recorded
    under one release and replayed under another would otherwise hand the agent another
    text than it saw. Only the same class with the same status is given it.
    """
    if info is None or type(exc).__name__ != info.type_name or str(exc) == info.message:
        return
    if getattr(exc, "status_code", None) != info.fields.get("status_code"):
        return
    exc.message = info.message  # type: ignore[attr-defined]  # as the SDK's own __init__ sets it
    exc.args = (info.message,)


def connection_error(recorded: Mapping[str, Any], request: httpx2.Request) -> Exception:
    """The ``APITimeoutError`` or ``APIConnectionError`` an attempt recorded, with its recorded message."""
    message = recorded.get("message")
    cls = _sdk("APITimeoutError") if recorded.get("type") == "timeout" else _sdk("APIConnectionError")
    assert cls is not None, "the anthropic instrumentation replays only with anthropic imported"
    exc: Exception
    if recorded.get("type") != "timeout":
        exc = cls(message=str(message or "Connection error."), request=request)
    elif isinstance(message, str) and message:
        exc = timeout_error(cls, request, message)
    else:
        exc = cls(request)
    return exc


def _body(info: ErrorInfo, status: int) -> Any:
    if "body" in info.fields:
        return info.fields["body"]
    return body_from_message(info.message, status)


def _build(cls: Any, info: ErrorInfo, *, api_error: type) -> Any:
    status_error, validation = _sdk("APIStatusError"), _sdk("APIResponseValidationError")
    timeout, connection = _sdk("APITimeoutError"), _sdk("APIConnectionError")
    fields = info.fields
    request = _request(fields)
    status = fields.get("status_code")
    exc: Any
    if timeout is not None and issubclass(cls, timeout):
        exc = timeout_error(cls, request, info.message)
    elif connection is not None and issubclass(cls, connection):
        exc = cls(message=info.message, request=request)
    elif isinstance(status, int) and status_error is not None and issubclass(cls, status_error):
        response = httpx2.Response(status, headers=_headers(fields), request=request)
        exc = cls(info.message, response=response, body=_body(info, status))
        for name in _DERIVED:
            value = fields.get(name)
            if isinstance(value, str) and vars(exc).get(name, value) is None:
                setattr(exc, name, value)
    elif isinstance(status, int) and validation is not None and issubclass(cls, validation):
        response = httpx2.Response(status, headers=_headers(fields), request=request)
        exc = cls(response, _body(info, status), message=info.message)
    else:
        return None
    return exc


def rebuild_anthropic_error(info: ErrorInfo) -> BaseException | None:
    """The recorded ``anthropic`` exception, or None when it is not one this knows."""
    if info.module != "anthropic" and not info.module.startswith("anthropic."):
        return None
    api_error = _sdk("APIError")
    cls = recorded_class(info.module, info.type_name) or recorded_class("anthropic", info.type_name)
    if api_error is None or cls is None or not issubclass(cls, api_error):
        return None
    try:
        exc = _build(cls, info, api_error=api_error)
    except Exception:  # a trace's values the constructors refuse (a header httpx2 cannot send)
        return None
    if exc is None:
        return None
    rebuilt: BaseException = exc
    return rebuilt if str(rebuilt) == info.message else None

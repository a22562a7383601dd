"""Rebuild the SDK's exceptions from a recorded error payload.

Replay normally re-raises API errors by handing the SDK the recorded HTTP
response, so the SDK builds the exception itself. This rebuilder covers the
payload-only cases (a run's recorded error, an error recorded without its
exchange): the same class, status code, request id and body.
"""

from __future__ import annotations

import ast
from typing import Any

import httpx2

from ..._events import ErrorInfo

__all__ = ["rebuild_anthropic_error"]

_PLACEHOLDER_URL = "https://api.anthropic.com/v1/messages"


def _body(message: str, status: int) -> Any:
    # The SDK words status errors as "Error code: {status} - {body!r}".
    prefix = f"Error code: {status} - "
    if not message.startswith(prefix):
        return None
    try:
        return ast.literal_eval(message[len(prefix) :])
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return message[len(prefix) :]


def rebuild_anthropic_error(info: ErrorInfo) -> BaseException | None:
    """The recorded ``anthropic`` exception, or None when it is not one this knows."""
    if info.module != "anthropic" and not info.module.startswith("anthropic."):
        return None
    import anthropic

    cls = getattr(anthropic, info.type_name, None)
    if not isinstance(cls, type) or not issubclass(cls, anthropic.APIError):
        return None
    request = httpx2.Request("POST", _PLACEHOLDER_URL)
    exc: BaseException
    if issubclass(cls, anthropic.APITimeoutError):
        exc = cls(request=request)
    elif issubclass(cls, anthropic.APIConnectionError):
        exc = cls(message=info.message, request=request)
    elif issubclass(cls, anthropic.APIStatusError):
        status = info.fields.get("status_code")
        if not isinstance(status, int):
            return None
        headers = {}
        request_id = info.fields.get("request_id")
        if isinstance(request_id, str):
            headers["request-id"] = request_id
        response = httpx2.Response(status, headers=headers, request=request)
        exc = cls(info.message, response=response, body=_body(info.message, status))
    else:
        return None
    return exc if str(exc) == info.message else None

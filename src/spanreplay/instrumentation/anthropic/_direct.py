"""Replay of a plain Messages call without the SDK's request pipeline.

On replay the SDK still prepares the request (a deep copy of the whole
conversation), builds an HTTP response from the recording and parses it into
its types, and the preparation and the parsing cost far more than serving the
recording. For the common call (no stream, no raw response, no middleware, a
body of plain JSON data, one recorded attempt that succeeded with a JSON body)
neither changes anything, so this path skips both:

- the request body is the call's own, without its omitted parameters: for plain
  JSON data (what ``plain_body`` checks) that is exactly what the SDK's
  preparation gives, so the boundary's input, and its comparison with the
  recording, are the same as on the SDK's path;
- the response is built with the SDK's own model class, validated strictly (no
  coercion), and given the response ids the SDK adds; a body that strict
  validation refuses is built by the SDK's own ``construct_type``, as the SDK's
  path does. Tests hold the objects of both paths equal, field by field.

Every other call takes the SDK's path, unchanged.

This is the ``direct`` accelerator (``_accelerators``): it reads the SDK's
private model helpers (``anthropic._models``, ``_utils``, ``_compat``), two
private fields of its client and pydantic's model metadata. Off (by
``configure(accelerate=False)``, or by its preflight, ``_check``, when those
names are missing or build another object than the SDK's ``construct_type``),
every call takes the SDK's path.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, Final, get_args, get_origin

import anthropic
import orjson
import pydantic

from spanreplay._accelerators import register
from spanreplay.run.calls import Call

try:  # private SDK helpers: without them every call takes the SDK's path
    from anthropic._compat import field_get_default
    from anthropic._constants import OVERRIDE_CAST_TO_HEADER, RAW_RESPONSE_HEADER
    from anthropic._models import _build_discriminated_union_meta, add_response_ids, construct_type
    from anthropic._types import ModelBuilderProtocol
    from anthropic._utils import extract_type_arg, is_annotated_type, is_literal_type, is_type_alias_type
    from anthropic._utils._compat import is_union
except ImportError:  # pragma: no cover - another SDK layout
    ENABLED = False
else:
    ENABLED = True

__all__ = ["DECLINED", "DIRECT", "PostOptions", "build", "encoded", "plain_body", "serve"]

DECLINED: Final = object()
"""What ``serve`` returns when the recorded call needs the SDK's path."""

# Only plain JSON data passes: without a ``default`` orjson refuses what the SDK's
# preparation would change (pydantic models, iterators, sets, files, NotGiven and
# Omit inside the body) and, with the passthrough option, dates, which the SDK
# formats its own way. Sorted keys: these are the input's canonical bytes.
_PLAIN: Final = orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME
_SENTINELS: Final = frozenset({anthropic.NotGiven, anthropic.Omit})


class PostOptions:
    """The request options ``post()`` was given, read the way ``FinalRequestOptions`` offers them.

    ``post()`` builds ``FinalRequestOptions`` from these; the direct path reads
    them as they are, and skips building it.
    """

    __slots__ = (
        "content",
        "extra_json",
        "files",
        "headers",
        "json_data",
        "method",
        "params",
        "post_parser",
        "qualifiers",
        "url",
    )

    def __init__(self, path: str, body: Any, options: Mapping[str, Any], files: Any, content: Any) -> None:
        self.method = "post"
        self.url = path
        self.json_data = body
        self.files = files
        self.content = content
        self.headers = options.get("headers", _NOT_GIVEN)
        self.params = options.get("params", {})
        self.extra_json = options.get("extra_json")
        self.post_parser = options.get("post_parser", _NOT_GIVEN)
        self.qualifiers = options.get("qualifiers")


_NOT_GIVEN: Final = anthropic.NotGiven()


def plain_body(instance: Any, cast_to: Any, options: Any, *, stream: bool) -> dict[str, Any] | None:
    """The request body without its omitted parameters, if the call may skip the SDK's pipeline.

    None when anything the pipeline acts on is there: a stream, a raw or
    streaming response, a cast override, a post-parser, middleware, strict
    response validation, files, content, query parameters or an extra body.
    The body is the SDK's prepared one only if it is plain JSON data, which
    ``encoded`` checks.
    """
    if not ENABLED or stream or getattr(instance, "_middleware", None):
        return None
    if getattr(instance, "_strict_response_validation", True):
        return None
    if not _buildable(cast_to):
        return None
    if not isinstance(options.post_parser, anthropic.NotGiven):
        return None
    if options.files is not None or options.content is not None or options.params or options.extra_json:
        return None
    headers = options.headers
    if isinstance(headers, dict) and any(
        isinstance(name, str) and name.lower() in _PIPELINE_HEADERS for name in headers
    ):
        return None
    data = options.json_data
    if type(data) is not dict:
        return None
    # The SDK's preparation drops NotGiven and Omit entries; the method puts every
    # parameter left out in the body as one of them. What is left is checked by ``encoded``.
    # By exact type: an instance of a subclass stays, and fails ``encoded`` (the SDK's path takes it).
    return {key: value for key, value in data.items() if type(value) not in _SENTINELS}


def encoded(value: Any) -> bytes | None:
    """``_payloads.encode_input(value)`` when ``value`` is plain JSON data, else None.

    Plain JSON data is what the SDK's preparation copies unchanged, so these are
    the bytes the SDK's path would compare with the recording.
    """
    try:
        return orjson.dumps(value, option=_PLAIN)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return None


def _buildable(cast_to: Any) -> bool:
    """Whether the SDK builds ``cast_to`` from a JSON body with ``construct_type`` (an SDK model)."""
    known = _BUILDABLE.get(cast_to)
    if known is None:
        known = (
            inspect.isclass(cast_to)
            and issubclass(cast_to, anthropic.BaseModel)
            and not issubclass(cast_to, ModelBuilderProtocol)
        )
        if len(_BUILDABLE) < 256:  # the response types are few; anything else is checked each time
            _BUILDABLE[cast_to] = known
    return known


_BUILDABLE: dict[Any, bool] = {}

_PIPELINE_HEADERS: Final = (
    frozenset({RAW_RESPONSE_HEADER.lower(), OVERRIDE_CAST_TO_HEADER.lower()}) if ENABLED else frozenset()
)


def serve(call: Call, cast_to: Any) -> Any:
    """The object the SDK would return for the recorded call, or DECLINED.

    Declined (the SDK's path then serves the call) unless the recording holds
    exactly one attempt, answered with a 2xx status and a JSON object body.
    """
    event = call.recorded
    if event is None or event.error is not None or event.output_json is None:
        return DECLINED
    output = orjson.loads(event.output_json)
    attempts = output.get("attempts") if isinstance(output, dict) else None
    if not isinstance(attempts, list) or len(attempts) != 1 or not isinstance(attempts[0], dict):
        return DECLINED
    attempt = attempts[0]
    status = attempt.get("status")
    headers = attempt.get("headers")
    if (
        type(status) is not int
        or not 200 <= status < 300
        or not isinstance(headers, dict)
        or attempt.get("streamed")
        or "body" not in attempt
        or "stream_error" in attempt
    ):
        return DECLINED
    content_type = str(headers.get("content-type", "*")).split(";", 1)[0].strip().lower()
    if not content_type.endswith("json"):
        return DECLINED
    # The SDK parses the bytes it was served: the recorded ones when they differ from the
    # body's JSON. Bytes orjson refuses (NaN, integers past 64 bits, lone surrogates),
    # which the SDK's json.loads reads, are left to the SDK.
    try:
        data = orjson.loads(str(attempt["raw"])) if "raw" in attempt else attempt["body"]
    except orjson.JSONDecodeError:
        return DECLINED
    if type(data) is not dict:
        return DECLINED
    parsed = build(cast_to, data)
    add_response_ids(parsed, request_id=headers.get("request-id"), workspace_id=headers.get("anthropic-workspace-id"))
    return parsed


def build(cast_to: Any, data: dict[str, Any]) -> Any:
    """``cast_to`` built from a response body exactly as the SDK's ``construct_type`` builds it, faster.

    ``construct_type`` constructs a model without validation, field by field, but
    validates a field whose type is a union (the content blocks, every optional
    field). Strict validation of the whole body coerces nothing (it refuses
    instead), so where it succeeds it holds the same values; what remains is put
    right on the models ``construct_type`` would have constructed: their unknown
    keys are not set fields. A body strict validation refuses, or one whose
    construction this does not mirror (a null for a field with another default,
    an integer a float field cannot hold), is built by ``construct_type`` itself.
    """
    plan = _PLANS[cast_to] if cast_to in _PLANS else _plan(cast_to)
    try:
        model = cast_to.model_validate(_with_blocks(data, plan), strict=True)
    except Exception:  # a body this SDK's types do not describe: the SDK's own way
        return construct_type(type_=cast_to, value=data)
    if not _as_constructed(model, data):
        return construct_type(type_=cast_to, value=data)
    return model


def _with_blocks(data: dict[str, Any], plan: _Plan | None) -> dict[str, Any]:
    """``data`` with its lists of union members (the content blocks) built by their discriminator.

    Validating a union tries its members one by one, and a Message's content
    union has a dozen: each block costs several times its own validation. The
    discriminator names the one member that can match (as it does for
    ``construct_type``), so each block is validated as that member; the model's
    validation then takes the built blocks as they are. Where a block has no
    member for its discriminator, or does not validate as it, ``data`` is
    returned unchanged for the model's validation to judge.
    """
    if plan is None or not plan.blocks:
        return data
    built_data: dict[str, Any] | None = None
    for name, key, members in plan.blocks:
        items = data.get(name)
        if type(items) is not list:
            continue
        built: list[Any] = []
        for item in items:
            member = members.get(item.get(key)) if type(item) is dict else None
            if member is None:
                return data
            try:
                built.append(member.model_validate(item, strict=True))
            except Exception:
                return data
        if built_data is None:
            built_data = dict(data)
        built_data[name] = built
    return data if built_data is None else built_data


# How construct_type builds each field of a model: None (the value as validation
# gives it: a scalar, or a union, which construct_type validates too), _FLOAT, or
# ("model" | "list" | "dict", the inner step).
_Step = tuple[str, Any] | object | None
_FLOAT: Final = object()
_UNSUPPORTED: Final = object()


class _Plan:
    """One model class: the fields whose built value can differ, those whose default is not
    None, and its lists of discriminated union members (name, discriminator key, members)."""

    __slots__ = ("blocks", "not_none_defaults", "steps")

    def __init__(
        self,
        steps: tuple[tuple[str, _Step], ...],
        not_none_defaults: tuple[str, ...],
        blocks: tuple[tuple[str, str, dict[Any, Any]], ...],
    ) -> None:
        self.steps = steps
        self.not_none_defaults = not_none_defaults
        self.blocks = blocks


_PLANS: dict[type, _Plan | None] = {}


def _as_constructed(model: anthropic.BaseModel, data: dict[str, Any]) -> bool:
    """Make a strictly validated ``model`` what ``construct`` gives for ``data``; False where it cannot."""
    plan = _PLANS[type(model)] if type(model) in _PLANS else _plan(type(model))
    if plan is None:
        return False
    for name in plan.not_none_defaults:
        if name in data and data[name] is None:  # construct gives the field's default for a null
            return False
    extra = model.__pydantic_extra__
    if extra:
        object.__setattr__(model, "__pydantic_fields_set__", model.__pydantic_fields_set__ - extra.keys())
    values = model.__dict__
    for name, step in plan.steps:
        raw = data.get(name)
        if raw is not None and not _fix(values[name], raw, step):
            return False
    return True


def _fix(value: Any, raw: Any, step: _Step) -> bool:
    if step is _FLOAT:
        # construct keeps an integer that a float cannot hold exactly; validation rounds it.
        return not (type(raw) is int and float(raw) != raw)
    assert isinstance(step, tuple)
    kind, inner = step
    if kind == "model":
        return isinstance(value, anthropic.BaseModel) and type(raw) is dict and _as_constructed(value, raw)
    if kind == "list":
        return type(raw) is list and all(_fix(v, r, inner) for v, r in zip(value, raw, strict=True))
    return type(raw) is dict and all(_fix(value[k], r, inner) for k, r in raw.items())


def _plan(cls: type) -> _Plan | None:
    plan: _Plan | None = None
    decorators = cls.__pydantic_decorators__  # type: ignore[attr-defined]
    fields = cls.model_fields  # type: ignore[attr-defined]
    # Validators would run on validation and not on construction; aliases change the keys.
    if not (decorators.validators or decorators.field_validators or decorators.model_validators) and not any(
        f.alias or f.validation_alias for f in fields.values()
    ):
        steps = [(name, _step(f.annotation)) for name, f in fields.items()]
        if not any(step is _UNSUPPORTED for _, step in steps):
            plan = _Plan(
                tuple((name, step) for name, step in steps if step is not None),
                tuple(name for name, f in fields.items() if field_get_default(f) is not None),
                tuple(block for block in (_blocks(name, f.annotation) for name, f in fields.items()) if block),
            )
    if len(_PLANS) < 4096:
        _PLANS[cls] = plan
    return plan


def _blocks(name: str, annotation: Any) -> tuple[str, str, dict[Any, Any]] | None:
    """``(name, discriminator key, {value: member})`` for a field typed as a list of a discriminated union."""
    if get_origin(annotation) is not list:
        return None
    (item,) = get_args(annotation)
    if not is_annotated_type(item):
        return None
    union = extract_type_arg(item, 0)
    if not is_union(get_origin(union)):
        return None
    meta = _build_discriminated_union_meta(union=union, meta_annotations=get_args(item)[1:])
    if meta is None:
        return None
    members = {value: member for value, member in meta.mapping.items() if inspect.isclass(member)}
    return name, meta.field_alias_from or meta.field_name, members


def _step(annotation: Any) -> _Step:
    """Mirrors construct_type's order of cases for one field's type."""
    if is_type_alias_type(annotation):
        annotation = annotation.__value__
    if is_annotated_type(annotation):
        annotation = extract_type_arg(annotation, 0)
    origin = get_origin(annotation) or annotation
    if is_union(origin):
        return None
    if origin is dict:
        inner = _step(get_args(annotation)[1])
        return None if inner is None else inner if inner is _UNSUPPORTED else ("dict", inner)
    if not is_literal_type(annotation) and inspect.isclass(origin) and issubclass(origin, pydantic.BaseModel):
        return ("model", None) if issubclass(origin, anthropic.BaseModel) else _UNSUPPORTED
    if origin is list:
        inner = _step(get_args(annotation)[0])
        return None if inner is None else inner if inner is _UNSUPPORTED else ("list", inner)
    if origin is float:
        return _FLOAT
    return None


# A body of the shapes the direct path builds: blocks of two union members, usage with
# a nested model, and fields the SDK's types do not know (kept as extras).
_SAMPLE: Final[dict[str, Any]] = {
    "id": "msg_preflight",
    "type": "message",
    "role": "assistant",
    "model": "claude-preflight",
    "content": [
        {"type": "text", "text": "Shipped.", "citations": None},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"order": "A-17", "n": [1, 2.5]}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 3, "output_tokens": 2, "a_later_count": 1},
    "a_later_field": {"x": 1},
}


def _seen(value: Any) -> Any:
    """What an agent can read of a built model: its fields, extras and set fields, all the way down."""
    if isinstance(value, pydantic.BaseModel):
        return (
            type(value),
            {name: _seen(v) for name, v in value.__dict__.items()},
            value.__pydantic_extra__,
            sorted(value.model_fields_set),
        )
    if isinstance(value, list):
        return [_seen(v) for v in value]
    return value


def _check() -> str | None:
    """Why the direct path cannot be trusted with the installed SDK, or None when it can."""
    import importlib.metadata

    where = f"anthropic {importlib.metadata.version('anthropic')}"
    if not ENABLED:
        return f"{where} lacks the private model helpers the direct replay path builds with"
    names: dict[Callable[..., Any], tuple[str, ...]] = {
        construct_type: ("type_", "value"),
        add_response_ids: ("obj", "request_id", "workspace_id"),
    }
    for function, expected in names.items():
        parameters = inspect.signature(function).parameters
        if any(name not in parameters for name in expected):
            return f"{where}'s {function.__name__} takes {', '.join(parameters)}, not {', '.join(expected)}"
    client = anthropic.Anthropic(api_key="spanreplay-preflight", base_url="http://127.0.0.1:9", max_retries=0)
    try:
        fields = vars(client)
        for name in ("_middleware", "_strict_response_validation"):
            if name not in fields:
                return f"{where}'s client keeps no {name}"
    finally:
        client.close()
    from anthropic.types import Message

    if not hasattr(Message, "__pydantic_decorators__"):
        return f"pydantic {pydantic.VERSION} keeps no __pydantic_decorators__ on models"
    fast = build(Message, orjson.loads(orjson.dumps(_SAMPLE)))
    slow = construct_type(type_=Message, value=orjson.loads(orjson.dumps(_SAMPLE)))
    if _seen(fast) != _seen(slow):
        return f"the direct path builds another Message than {where}'s construct_type does"
    return None


DIRECT: Final = register(
    "direct",
    reads="anthropic's private model helpers (anthropic._models.construct_type, add_response_ids, "
    "_build_discriminated_union_meta, anthropic._utils, anthropic._compat, anthropic._constants), the client's "
    "_middleware and _strict_response_validation, and pydantic's __pydantic_decorators__, __pydantic_extra__ "
    "and __pydantic_fields_set__",
    replaced_by="the SDK's own request preparation and response parsing",
    check=_check,
)

"""``--set SEQ=JSON`` and ``--raise SEQ=Type:message``: what-if edits from the command line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click
import orjson

from spanreplay.errors import ConfigurationError
from spanreplay.replaying.overrides import exception_from_text

from ._common import BadInput

__all__ = ["override_options", "parse_overrides"]

F = TypeVar("F", bound=Callable[..., Any])


def override_options(command: F) -> F:
    """The ``--set`` and ``--raise`` options of ``replay`` and ``fork``."""
    command = click.option(
        "--raise",
        "raises",
        multiple=True,
        metavar="SEQ=TYPE:MESSAGE",
        help="Make step SEQ (a seq or a call id) raise TYPE(MESSAGE) instead of its recorded outcome: "
        "a builtin such as TimeoutError, or module.Class; repeatable.",
    )(command)
    command = click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="SEQ=JSON",
        help="Serve JSON in place of the recorded output of step SEQ (a seq, or a call id such as "
        "tool:search#0, which may name a call the recording lacks); SEQ=@file.json reads the JSON from a "
        "file. A model call's JSON is the Messages API response. Repeatable.",
    )(command)
    return command


def parse_overrides(sets: Sequence[str], raises: Sequence[str]) -> dict[int | str, Any]:
    """The ``overrides=`` mapping that ``--set`` and ``--raise`` ask for."""
    overrides: dict[int | str, Any] = {}
    for option, specs, parse in (("--set", sets, _value), ("--raise", raises, _exception)):
        for spec in specs:
            step, sep, text = spec.partition("=")
            if not sep or not step.strip():
                raise BadInput(
                    f"{option} {spec!r} names no step: write it as {option} SEQ=..., with SEQ a seq (6) or a call id "
                    "(tool:search#0)."
                )
            key = _step(step.strip())
            if key in overrides:
                raise BadInput(f"{option} {spec!r}: step {key} is edited twice; give one --set or --raise for it.")
            overrides[key] = parse(option, spec, text)
    return overrides


def _step(text: str) -> int | str:
    return int(text) if text.isdecimal() and len(text) < 19 else text


def _value(option: str, spec: str, text: str) -> Any:
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise BadInput(f"{option} {spec!r}: cannot read {path}: {exc.strerror or exc}.") from None
        where = str(path)
    else:
        data = text.encode()
        where = "the value"
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        hint = "" if text.startswith("@") else " (a string is written with its quotes: --set 3='\"text\"')"
        raise BadInput(f"{option} {spec!r}: {where} is not JSON: {exc}{hint}.") from None


def _exception(option: str, spec: str, text: str) -> BaseException:
    try:
        return exception_from_text(text)
    except ConfigurationError as exc:
        raise BadInput(f"{option} {spec!r}: {exc}") from None

"""Exact checks of masked input values, for runs masked without a key.

Without a project key every email masks to ``<email>``, so a replay whose code
now sends another customer's address would match its recording. A run recorded
without a key gets a random salt of its own instead (kept in a file beside the
run's trace file, never on a span), and each masked place of a boundary's input
carries a short keyed check of the values found there:

    {"to": ["5c0a91d2e7b4"], "messages[1].content": ["0f3e...", "9a1c..."]}

The values are found by masking the input a second time with the masker's
salted twin (``Masker.salted``): the same rules and detectors, writing tokens
keyed by the salt where the recording writes ``<email>``. Each token found at a
place gives one check, in the order found: HMAC-SHA256 under the salt of the
call id, the place's path and the token, cut to ``CHECK_HEX`` hex digits.

- The call id and the path are in the check, so one value at two places (or in
  two steps) gives two unrelated checks: the trace tells no more about which
  masked values were equal than ``<email>`` does.
- Only what a key would pseudonymize gets a check (detectors' findings, ``mask()``,
  ``FieldNames(pseudonymize=True)``); credentials stay plain placeholders, key or
  not, and are compared by kind.
- A masked number's check is made from the number (where a masked object key on
  its path does not hide it: then from its salted pseudonym, which has the
  number's shape, so that a change between two numbers of few digits can pass
  unseen, one chance in about 10**(digits/2)).
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

import orjson

from ._pipeline import Masker, MaskingSession

__all__ = ["CHECK_HEX", "Places", "changed_place", "checks_of", "path_segments", "places"]

# 48 bits: a check is compared with the checks recorded at its own place of its own
# step, never with all others, so no birthday bound applies: a changed value passes
# unseen with a chance of 2**-48 (one in 280 trillion). Truncation hides nothing from
# whoever holds the salt (a guess at a phone number is confirmed by 30 bits already),
# and without the salt the full hash would tell no more.
CHECK_HEX: Final = 12

# The tokens the salted twin writes: a placeholder with a keyed hash in it.
_KEYED: Final = re.compile(r"<([a-z][a-z0-9_]{0,40}):[0-9a-f]{16}>", re.ASCII)
_SEGMENT: Final = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]')

# Per place (its path as the recording writes it), the salted tokens found there, in order.
Places = dict[str, list[str]]


def places(
    session: MaskingSession, kind: str, key: str, value: Any, fired: Sequence[tuple[str, str]] | None = None
) -> Places:
    """The salted tokens of each masked place of ``value``, masked by a salted twin's session.

    A place whose value is already a placeholder (a masked output served on replay
    and handed on) holds no finding, and so is not among them. ``fired``: what masking
    ``value`` without the salt fired, when the caller has it; where only detectors
    fired, in strings found by their paths, just those strings are scanned again
    (the same tokens as masking the whole payload again, for less).
    """
    if fired is not None:
        found = _rescanned(session.masker, value, fired)
        if found is not None:
            return found
    result = session.mask(kind, key, value, part="input")
    found = {}
    for path in dict.fromkeys(path for path, _ in result.fired):
        at = _lookup(result.value, path)
        if type(at) is str:
            tokens = [m.group(0) for m in _KEYED.finditer(at)]
        elif isinstance(at, (int, float)) and not isinstance(at, bool):
            original = _lookup(value, path)
            if type(original) in (int, float) and original == 0:
                # 0 (0.0) is what masking without a key makes of a number: a masked output
                # handed on holds no value (the twin would pseudonymize it anew).
                continue
            # The number itself where the path finds it (the check is keyed, so it is no
            # more exposed than a token); else its salted pseudonym, which has its shape.
            tokens = [f"#{original!r}" if type(original) in (int, float) else f"~{at!r}"]
        else:
            continue
        if tokens:
            # A masked object key is in the path: written as the recording writes it.
            found.setdefault(_KEYED.sub(r"<\1>", path), []).extend(tokens)
    return found


def _rescanned(twin: Masker, value: Any, fired: Sequence[tuple[str, str]]) -> Places | None:
    """The places of ``value`` from the strings ``fired`` names, scanned by ``twin``; None
    when a rule other than a detector fired, or a place cannot be found in ``value``
    as a string (a masked key on its path, a float, an object), and the whole payload
    must be masked again."""
    names = twin.detector_names
    if any(rule not in names for _, rule in fired):
        return None
    paths = list(dict.fromkeys(path for path, _ in fired))
    texts: list[str] = []
    for path in paths:
        if "<" in path:
            return None
        at = _lookup(value, path)
        if not isinstance(at, str):
            return None
        texts.append(str.__str__(at))
    found: Places = {}
    for path, masked in zip(paths, twin.scan_texts(texts), strict=True):
        tokens = [m.group(0) for m in _KEYED.finditer(masked)]
        if tokens:
            found[path] = tokens
    return found


def checks_of(salt: bytes, call_id: str, found: Places) -> dict[str, list[str]]:
    """The check of each token at each place, as a span records them."""
    return {path: [_check(salt, call_id, path, token) for token in tokens] for path, tokens in found.items()}


def changed_place(salt: bytes, call_id: str, recorded: Mapping[str, Any], found: Places) -> tuple[str, str] | None:
    """The first place whose current values are not among those recorded there, and the
    label of the value that differs; None when every place matches.

    The current values at a place must be recorded there in the same order, though
    not all of them: a recorded value may since have become a placeholder (handed on
    from a served output), which is no finding.
    """
    for path, tokens in found.items():
        expected = recorded.get(path)
        expected = expected if isinstance(expected, list) else []
        position = 0
        for token in tokens:
            check = _check(salt, call_id, path, token)
            try:
                position = expected.index(check, position) + 1
            except ValueError:
                return path, _label(token)
    return None


def _check(salt: bytes, call_id: str, path: str, token: str) -> str:
    message = orjson.dumps([call_id, path, token])
    return hmac.new(salt, message, hashlib.sha256).hexdigest()[:CHECK_HEX]


def _label(token: str) -> str:
    match = _KEYED.fullmatch(token)
    return match.group(1) if match else "number"


def path_segments(path: str) -> tuple[str | int, ...]:
    """``orders[0].customer["e-mail"]`` -> ``("orders", 0, "customer", "e-mail")``; ``$`` -> ``()``.

    Raises:
        ValueError: ``path`` is not one ``format_path`` writes.
    """
    if path == "$":
        return ()
    segments: list[str | int] = []
    position = 0
    while position < len(path):
        match = _SEGMENT.match(path, position)
        if match is None:
            raise ValueError(f"not a masked path: {path!r}")
        name, index, quoted = match.groups()
        if index is not None:
            segments.append(int(index))
        else:
            segments.append(name if name is not None else orjson.loads(quoted))
        position = match.end()
    return tuple(segments)


def _lookup(value: Any, path: str) -> Any:
    """The value at ``path`` (as ``format_path`` writes it) in ``value``; None when absent."""
    try:
        segments = path_segments(path)
    except ValueError:
        return None
    for segment in segments:
        if type(segment) is int:
            if not isinstance(value, list) or segment >= len(value):
                return None
        elif not isinstance(value, dict) or segment not in value:
            return None
        value = value[segment]
    return value

"""A plain reference for masking one string and one payload, and busy text to hold the scanner to it.

``reference`` masks a text the plain way, one string at a time: each detector
asked about the string itself, the findings sorted by (start, detector, end),
the rules applied in a loop, the string masked again while a token touches its
neighbour. ``reference_walk`` masks a payload with it, recursively, every
detector asked about every string and every field-name rule about every key.
The scanner does all of a payload's strings in one pass, behind a gate that
picks the detectors worth asking; the tests in tests/masking/ hold it to these.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st

from helpers.masking_engines import FAST, PYTHON
from helpers.masking_samples import FILLER, KINDS
from spanreplay.masking import FieldNames, Masker, format_path
from spanreplay.masking._pseudonyms import PLACEHOLDER, Pseudonyms, label_of
from spanreplay.masking._scanner import WITHHELD

MASKERS = [PYTHON, FAST] if FAST is not PYTHON else [PYTHON]


def reference(masker: Masker, text: str) -> tuple[str, tuple[str, ...]]:
    """``text`` masked the plain way: what ``Masker.scan_text`` is documented to do."""
    if len(text) < masker.min_length:
        return text, ()
    masked, names, glued = _reference_pass(masker, text)
    rescans = 0
    while glued:
        again, more, glued = _reference_pass(masker, masked)
        if not more:
            break
        names += [name for name in more if name not in names]
        masked = again
        rescans += 1
        if glued and rescans == 3:
            return WITHHELD, tuple(names)
    return masked, tuple(names)


def _reference_pass(masker: Masker, text: str) -> tuple[str, list[str], bool]:
    found = sorted((start, i, end) for i, detector in enumerate(masker.detectors) for start, end in detector(text))
    placeholders = [m.span() for m in PLACEHOLDER.finditer(text)]
    found = [(s, i, e) for s, i, e in found if not any(a < e and s < b for a, b in placeholders)]
    pieces: list[str] = []
    names: list[str] = []
    glued = False
    pos = 0
    for start, i, end in found:
        if start < pos:
            continue
        detector = masker.detectors[i]
        canonical = detector.normalize(text[start:end])
        token = Pseudonyms(masker.config.resolved_key()).token(
            detector.name, canonical, pseudonymize=detector.pseudonymize
        )
        pieces += [text[pos:start], token]
        if detector.name not in names:
            names.append(detector.name)
        touches_before = start > 0 and not text[start - 1].isspace()
        touches_after = end < len(text) and not text[end].isspace()
        glued = glued or touches_before or touches_after
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces), names, glued


SECRETS = st.one_of(*KINDS.values())
# What goes between secrets: nothing (they touch, and may overlap: a card's digits
# run into a phone number's), spaces, punctuation, NUL, placeholders, and pieces
# the detectors of one's own in test_masking_rewrite.py find.
BETWEEN = st.sampled_from(
    ["", "", " ", "  ", ",", ".", ":", "-", "\n", "\x00", "<email>", "<phone:0123abcd>", "<", ">", "x", "7", "|",
     "||", "ab@corp", " 7123 ", "\u00a0", "é", "😀"]
)  # fmt: skip


@st.composite
def busy_text(draw: st.DrawFn) -> str:
    parts: list[str] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            parts.append(draw(SECRETS))
        elif kind == 1:
            parts.append(draw(FILLER))
        parts.append(draw(BETWEEN))
    return "".join(parts)


def reference_walk(masker: Masker, payload: Any) -> tuple[Any, tuple[tuple[str, str], ...]]:
    """``payload`` masked the plain way, recursively, and what fired where, in document
    order, each (place, rule) once: what ``Masker.mask`` is documented to do without
    path rules."""
    # The field-name rules as the config states them: its own, then field_names.
    fields = [rule for rule in masker.config.rules if isinstance(rule, FieldNames)]
    if masker.config.field_names:
        fields.append(FieldNames(masker.config.field_names))
    pseudonyms = Pseudonyms(masker.config.resolved_key())

    def field_rule(key: str) -> tuple[FieldNames, str] | None:
        for rule in fields:
            name = rule.match(key)
            if name is not None:
                return rule, name
        return None

    fired: list[tuple[int, tuple[Any, ...], str]] = []  # place, path, rule
    places = itertools.count()

    def walk(value: Any, path: tuple[Any, ...], place: int) -> Any:
        if type(value) is str:
            masked, names = reference(masker, value)
            fired.extend((place, path, name) for name in names)
            return masked
        if type(value) is list:
            return [walk(item, (*path, index), next(places)) for index, item in enumerate(value)]
        if type(value) is dict:
            out: dict[Any, Any] = {}
            for key, item in value.items():
                new_key, place = key, next(places)
                if type(key) is str:
                    masked_key, names = reference(masker, key)
                    if names:
                        new_key = masked_key
                        n = 2
                        while new_key in out:
                            new_key = f"{masked_key}#{n}"
                            n += 1
                        fired.extend((place, (*path, new_key), name) for name in names)
                    matched = field_rule(key)
                    if matched is not None:
                        new = matched[0](item, matched[1], pseudonyms)
                        if new is not item and new != item:
                            fired.append((place, (*path, new_key), f"field:{matched[1]}"))
                        out[new_key] = new
                        continue
                out[new_key] = walk(item, (*path, new_key), place)
            return out
        if type(value) is float and value.is_integer() and 1e11 <= abs(value) < 1e16:
            # A whole float of card length is read as its digits; where a detector fires
            # it is masked as a number (a card number a spreadsheet turned into a float).
            names = reference(masker, str(int(value)))[1]
            if names:
                fired.append((place, path, names[0]))
                detector = next(d for d in masker.detectors if d.name == names[0])
                return float(pseudonyms.number(label_of(names[0]), value, pseudonymize=detector.pseudonymize))
        return value  # other numbers, bools and null: the detectors read strings only

    masked = walk(payload, (), next(places))
    once = dict.fromkeys((place, format_path(path), rule) for place, path, rule in fired)
    return masked, tuple((path, rule) for _, path, rule in once)

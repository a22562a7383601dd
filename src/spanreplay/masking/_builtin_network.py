"""Built-in detectors for network addresses: IPv4 and IPv6 (``MaskingConfig(ip_addresses=False)``
leaves both out)."""

from __future__ import annotations

import socket
from typing import Final

from . import _checks
from ._detector import Detector, Span
from ._hinted import hinted, hinted_detector
from ._hints import after, before

__all__ = ["ip_detectors"]


# An address is a whole run of hex digits, ":" and "." that starts with at most four
# hex digits and a ":", then at most four more and a second ":" (every address has
# two colons at most five characters apart, and its first group before them), with no
# letter, digit or "_" either side of the run. The expression starts at that first
# ":" (a literal the engine finds fast; starting at a hex digit would stop at every
# "a" to "f" in prose), and looks behind it for the first group: exactly k hex digits
# after a character that cannot precede an address. The refine steps back over them.
_IPV6: Final = (
    # No address goes on from a ":" or "." before this one: one test settles a run of colons.
    r":(?<![:.]:)(?:(?<![0-9A-Za-z_]:)"
    + "".join(rf"|(?<=[0-9A-Fa-f]{{{k}}}:)(?<![0-9A-Za-z_:.][0-9A-Fa-f]{{{k}}}:)" for k in range(1, 5))
    + r")[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:.]*+(?![0-9A-Za-z_])"
)
_HEX: Final = "0123456789ABCDEFabcdef"
_IPV6_MAX: Final = 45  # ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255


def _ipv6_refine(text: str, colon: int, stop: int) -> Span | None:
    # Back over the (at most four) hex digits of the first group: those that rstrip
    # takes off the four characters before the colon.
    head = text[colon - 4 if colon > 4 else 0 : colon]
    start = colon - len(head) + len(head.rstrip(_HEX))
    # No address is longer than 45 characters, and at most the two characters of a
    # trailing "." or ":" (a sentence's end) are not its own: nothing here grows with the run.
    if stop - start > _IPV6_MAX + 2:
        return None
    if _checks.ipv6_ok(text[start:stop]):
        return start, stop
    end = stop
    for _ in (1, 2):
        if end <= start or text[end - 1] not in ".:":
            return None
        end -= 1
        if _checks.ipv6_ok(text[start:end]):
            return start, end
    return None


def _ipv6_normalize(found: str) -> str:
    packed = _checks.ipv6_packed(found)
    return found.lower() if packed is None else socket.inet_ntop(socket.AF_INET6, packed)


def ip_detectors() -> list[Detector]:
    """The IPv4 and IPv6 detectors, in priority order."""
    return [
        hinted_detector(
            "ipv4",
            hinted(
                r"[0-9](?<![0-9A-Za-z_.][0-9])[0-9]{0,2}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(?![0-9]|\.[0-9])",
                prefilter=after("0-9A-Za-z_.") + r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}" + before("0-9"),
                reach=8,
                literals=(".",),
                check=_checks.ipv4_ok,
            ),
            min_length=7,
        ),
        hinted_detector(
            "ipv6",
            hinted(
                _IPV6,
                prefilter=r"::[0-9A-Fa-f]|[0-9A-Fa-f]::|(?:[0-9A-Fa-f]{1,4}:){3}[0-9A-Fa-f]",
                # A whole address, at most 47 characters with a trailing "." or ":",
                # holds a prefilter match: "::" beside a hex digit, or three groups.
                reach=48,
                literals=(":",),
                refine=_ipv6_refine,
                # The refine reads back only over the hex digits the lookbehind took,
                # and no further forward than the span: a NUL reads like a text's end.
                separable=True,
            ),
            min_length=6,
            normalize=_ipv6_normalize,
        ),
    ]

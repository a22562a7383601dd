"""Built-in detectors for credentials: private keys, JWTs, API keys and tokens.

Each becomes a plain placeholder (``<jwt>``), never a keyed pseudonym: a hash of
a secret is still about the secret. Every expression runs in linear time with
Python's ``re``: it begins with a literal so the engine can skip ahead, takes
its left boundary with a fixed-width lookbehind placed after that literal (a
leading lookbehind would be tried at every position), and uses possessive or
bounded repeats.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

from ._detector import Detector, Span
from ._hinted import hinted, hinted_detector
from ._hints import DetectorHints

__all__ = ["PrivateKeyDetector", "secret_detectors"]

_TOKEN: Final = "A-Za-z0-9_\\-"
_BEARER_TOKEN: Final = "A-Za-z0-9._~+/=\\-"
# Zero-width characters (U+200B to U+200D, U+2060, U+FEFF) inside a key: pasted from a
# document or a chat, a key may hold one, and it must not end the key there.
_ZW: Final = "\u200b-\u200d\u2060\ufeff"
# The key's characters with them, for the expressions; for the prefilters, a non-ASCII
# character is "?" to the locating scan and UTF-8 bytes to the payload scan.
_KEY: Final = _TOKEN + _ZW
_KEY_BYTES: Final = _TOKEN + "?\\x80-\\xff"


_PEM_BEGIN: Final = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", re.ASCII)
_PEM_END: Final = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", re.ASCII)


class PrivateKeyDetector:
    """PEM private keys (PKCS#1, PKCS#8, OpenSSH, PGP) from the BEGIN line to the END line.

    A key whose END line is missing (a cut log line) is masked to the end of the
    text: half a private key is still a secret.
    """

    name: str = "private_key"
    pseudonymize: bool = False
    hints: DetectorHints = DetectorHints(
        min_length=27,  # -----BEGIN PRIVATE KEY-----
        literals=("-----BEGIN",),
        prefilter=r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY",
        # A key without its END line runs to the end of its own text.
        separable=False,
    )

    def __call__(self, text: str) -> Iterator[Span]:
        pos = 0
        while True:
            begin = _PEM_BEGIN.search(text, pos)
            if begin is None:
                return
            end = _PEM_END.search(text, begin.end())
            stop = end.end() if end is not None else len(text)
            yield begin.start(), stop
            pos = stop

    def normalize(self, found: str) -> str:
        return found


def secret_detectors() -> list[Detector]:
    """The credential detectors, in priority order."""
    return [
        PrivateKeyDetector(),
        hinted_detector(
            "jwt",
            hinted(
                rf"eyJ(?<![{_TOKEN}]eyJ)[{_KEY}]{{4,}}+\.[{_KEY}]{{4,}}+\.[{_KEY}]*+",
                literals=("eyJ",),
                prefilter=rf"eyJ[{_KEY_BYTES}]{{4}}",
            ),
            pseudonymize=False,
            min_length=13,  # eyJ, 4, ".", 4, "."
        ),
        hinted_detector(
            "anthropic_api_key",
            hinted(
                rf"sk-ant-(?<![{_TOKEN}]sk-ant-)[{_KEY}]{{20,}}+",
                literals=("sk-ant-",),
                prefilter=rf"sk-ant-[{_KEY_BYTES}]{{20}}",
            ),
            pseudonymize=False,
            min_length=27,
        ),
        hinted_detector(
            "openai_api_key",
            hinted(
                rf"sk-(?<![{_TOKEN}]sk-)(?!ant-)(?:proj-|svcacct-|admin-)?[{_KEY}]{{20,}}+",
                literals=("sk-",),
                # Twenty key characters that do not begin with "ant-": an Anthropic key
                # does not wake this detector up too.
                prefilter=(
                    rf"sk-(?:[A-Zb-z0-9_\-?\x80-\xff][{_KEY_BYTES}]{{19}}|a(?:[A-Za-mo-z0-9_\-?\x80-\xff][{_KEY_BYTES}]{{18}}"
                    rf"|n(?:[A-Za-su-z0-9_\-?\x80-\xff][{_KEY_BYTES}]{{17}}|t[A-Za-z0-9_?\x80-\xff][{_KEY_BYTES}]{{16}})))"
                ),
            ),
            pseudonymize=False,
            min_length=23,
        ),
        hinted_detector(
            "aws_access_key_id",
            hinted(
                r"A(?<![A-Za-z0-9_]A)(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}(?![A-Za-z0-9_])",
                literals=("AKIA", "ASIA", "ABIA", "ACCA"),
                prefilter=r"A(?:KIA|SIA|BIA|CCA)[A-Z0-9]{16}",
            ),
            pseudonymize=False,
            min_length=20,
        ),
        hinted_detector(
            "github_token",
            [
                hinted(
                    rf"gh(?<![A-Za-z0-9_]gh)[pousr]_[A-Za-z0-9{_ZW}]{{36,}}+",
                    prefilter=r"gh[pousr]_[A-Za-z0-9?\x80-\xff]{36}",
                    literals=("gh",),
                ),
                hinted(
                    rf"github_pat_(?<![A-Za-z0-9_]github_pat_)[A-Za-z0-9_{_ZW}]{{22,}}+",
                    prefilter=r"github_pat_[A-Za-z0-9_?\x80-\xff]{22}",
                    literals=("github_pat_",),
                ),
            ],
            pseudonymize=False,
            min_length=33,
        ),
        hinted_detector(
            "slack_token",
            hinted(
                rf"xox(?<![A-Za-z0-9_]xox)[bpaers]-[A-Za-z0-9\-{_ZW}]{{10,}}+",
                literals=("xox",),
                prefilter=r"xox[bpaers]-[A-Za-z0-9\-?\x80-\xff]{10}",
            ),
            pseudonymize=False,
            min_length=15,
        ),
        hinted_detector(
            "bearer_token",
            [
                # Two literal-first expressions ("earer", "EARER") scan far faster than
                # one that starts with the class [Bb].
                hinted(
                    rf"earer(?<=[Bb]earer)(?<![A-Za-z0-9_][Bb]earer)[ \t]++([{_BEARER_TOKEN}]{{12,}}+)",
                    prefilter=r"[Bb]earer",
                    literals=("earer",),
                    group=1,
                    check=_token_like,
                ),
                hinted(
                    rf"EARER(?<=BEARER)(?<![A-Za-z0-9_]BEARER)[ \t]++([{_BEARER_TOKEN}]{{12,}}+)",
                    prefilter=r"BEARER",
                    literals=("EARER",),
                    group=1,
                    check=_token_like,
                ),
            ],
            pseudonymize=False,
            min_length=19,
        ),
    ]


# Characters of a token that no word of prose after "Bearer" holds.
_TOKEN_MARKS: Final = frozenset("0123456789_~+/=")


def _token_like(text: str) -> bool:
    """A token, not a word ("Bearer authentication"): it holds a digit or one of
    ``_~+/=``, mixes cases after its first letter, or is 20 characters or longer."""
    if not _TOKEN_MARKS.isdisjoint(text) or len(text) >= 20:
        return True
    rest = text[1:]
    return rest != rest.lower() and rest != rest.upper()

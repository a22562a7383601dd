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

from ._detector import Detector, Pattern, Span
from ._hinted import hinted, hinted_detector
from ._hints import DetectorHints

__all__ = ["PrivateKeyDetector", "secret_detectors"]

_TOKEN: Final = "A-Za-z0-9_\\-"
_BEARER_TOKEN: Final = "A-Za-z0-9._~+/=\\-"
# What a URL's userinfo may hold (RFC 3986): unreserved, percent-encoded, sub-delims.
_USERINFO: Final = "A-Za-z0-9\\-._~%!$&'()*+,;="
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
            "aws_secret_access_key",
            [
                # Forty base64 characters under a credential's name: aws_secret_access_key,
                # SecretAccessKey, secret, password (as written in a config file, an
                # environment dump, a JSON text inside a string).
                _named_aws_secret(
                    "ecret(?<=[Ss]ecret)(?:_?[Aa]ccess_?[Kk]ey)?", "[Ss]ecret(?:_?[Aa]ccess_?[Kk]ey)?", "ecret"
                ),
                _named_aws_secret("ECRET(?<=SECRET)(?:_?ACCESS_?KEY)?", "SECRET(?:_?ACCESS_?KEY)?", "ECRET"),
                _named_aws_secret("assword(?<=[Pp]assword)", "[Pp]assword", "assword"),
                _named_aws_secret("ASSWORD(?<=PASSWORD)", "PASSWORD", "ASSWORD"),
                # Right after an access key id (AKIA.../ASIA...), as a CSV or a colon pair writes it.
                hinted(
                    rf"A(?<![A-Za-z0-9_]A)(?:KIA|SIA)[A-Z0-9]{{16}}{_AWS_BETWEEN}{_AWS_SECRET}",
                    literals=("AKIA", "ASIA"),
                    prefilter=rf"A(?:KIA|SIA)[A-Z0-9]{{16}}{_AWS_BETWEEN_ESCAPED}[A-Za-z0-9/+]{{40}}",
                    reach=8,
                    group=1,
                    check=_secret_like,
                ),
            ],
            pseudonymize=False,
            min_length=42,
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
            [
                hinted(
                    rf"xox(?<![A-Za-z0-9_]xox)[bpaers]-[A-Za-z0-9\-{_ZW}]{{10,}}+",
                    literals=("xox",),
                    prefilter=r"xox[bpaers]-[A-Za-z0-9\-?\x80-\xff]{10}",
                ),
                # App-level tokens: xapp-1-A0123456789-1234567890123-abc...
                hinted(
                    rf"xapp(?<![A-Za-z0-9_]xapp)-[A-Za-z0-9\-{_ZW}]{{10,}}+",
                    literals=("xapp-",),
                    prefilter=r"xapp-[A-Za-z0-9\-?\x80-\xff]{10}",
                ),
            ],
            pseudonymize=False,
            min_length=15,
        ),
        hinted_detector(
            "url_password",
            # scheme://user:password@host: the password only (the user and host stay
            # readable). Both parts are possessive runs of the characters RFC 3986 allows
            # in userinfo, so each attempt starts at "://" and reads its run once. Both are
            # bounded (a user of 64 characters, a password of 256), as the prefilter is.
            hinted(
                rf"://(?<=[A-Za-z0-9+.\-]://)[{_USERINFO}]{{0,64}}+:([{_USERINFO}:]{{1,256}}+)@",
                literals=("://",),
                prefilter=rf"://[{_USERINFO}]{{0,64}}:[{_USERINFO}:]{{1,256}}@",
                reach=8,
                group=1,
            ),
            pseudonymize=False,
            min_length=6,
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


# An AWS secret access key: forty base64 characters, no more.
_AWS_SECRET: Final = "([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
# Between an access key id and its secret: a separator or two, no word.
_AWS_BETWEEN: Final = "[ \\t\\r\\n,:;|=\"']{1,8}+"
# The same in JSON-escaped text, where a quote is \" and a newline \n.
_AWS_BETWEEN_ESCAPED: Final = r"(?:[ \t\r\n,:;|='\\\"]|\\[tnr]){1,16}"
# Between a credential's name and its value: a quote, "=" or ":", spaces.
_AWS_NAMED: Final = "[\"']?[ \\t]{0,4}[:=][ \\t]{0,4}[\"']?"
_AWS_NAMED_ESCAPED: Final = r"(?:[^A-Za-z0-9/+]|\\t){1,24}"


def _named_aws_secret(name: str, prefilter: str, literal: str) -> Pattern:
    """Forty base64 characters after ``name`` (an expression that starts with ``literal``)."""
    return hinted(
        name + _AWS_NAMED + _AWS_SECRET,
        prefilter=prefilter + _AWS_NAMED_ESCAPED + "[A-Za-z0-9/+]{40}",
        literals=(literal,),
        reach=8,
        group=1,
        check=_secret_like,
    )


def _secret_like(text: str) -> bool:
    """Random base64, not a word or a hex digest: both cases, and a digit, "/" or "+"."""
    return text != text.lower() and text != text.upper() and not _AWS_PLAIN.isdisjoint(text)


_AWS_PLAIN: Final = frozenset("0123456789/+")


# Characters of a token that no word of prose after "Bearer" holds.
_TOKEN_MARKS: Final = frozenset("0123456789_~+/=")


def _token_like(text: str) -> bool:
    """A token, not a word ("Bearer authentication"): it holds a digit or one of
    ``_~+/=``, mixes cases after its first letter, or is 20 characters or longer."""
    if not _TOKEN_MARKS.isdisjoint(text) or len(text) >= 20:
        return True
    rest = text[1:]
    return rest != rest.lower() and rest != rest.upper()

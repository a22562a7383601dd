"""The rules: which calls make a replay diverge, their ids, messages and one-to-one replacements.

Ids group by what the call reads: SR1xx the clock, SR2xx randomness, SR3xx the
network. A rule id is matched by prefix in ``select`` and ``ignore`` (``SR1``
selects every clock rule), as in ruff and flake8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

__all__ = ["PARSE_ERROR", "RULES", "Rule", "Target", "is_rule_selector", "target_for"]


@dataclass(frozen=True)
class Rule:
    """One rule: its id, what it finds, and what to write instead.

    Attributes:
        code: the id shown in findings and named in ``# noqa:`` and in the config.
        summary: one line for the rule table (``docs/testing.md``, ``--help``).
        problem: how a finding says what the call does (after ``{call}``).
        advice: how a finding says what to use instead.
    """

    code: str
    summary: str
    problem: str
    advice: str


@dataclass(frozen=True)
class Target:
    """A call the lint reports: the rule, how to name the call, and its replacement if one-to-one.

    Attributes:
        rule: the rule that reports it.
        shown: the call as a finding names it (``datetime.now``), whatever alias the code used.
        replacement: the spanreplay function that replaces the call one for one, or None.
    """

    rule: Rule
    shown: str
    replacement: str | None = None


# Not a rule: a file the lint cannot read. It cannot be selected, ignored or noqa'd.
PARSE_ERROR: Final = Rule("SR001", "a file that cannot be parsed", "", "")

SR101: Final = Rule(
    "SR101",
    "datetime.now(), datetime.utcnow(), datetime.today(), date.today()",
    "reads the clock directly",
    "use spanreplay.now()",
)
SR102: Final = Rule("SR102", "time.time(), time.time_ns()", "reads the clock directly", "use spanreplay.time()")
SR103: Final = Rule(
    "SR103",
    "time.monotonic(), time.perf_counter() (and _ns) used as a value, not only to measure",
    "decides on a clock read",
    "use spanreplay.time(), or keep the read to measuring (start = ...; elapsed = ... - start)",
)
SR201: Final = Rule(
    "SR201",
    "the random module's functions (random.random(), random.choice(), ...)",
    "draws from the random module",
    "use spanreplay.random(), or a random.Random(seed) made from a recorded seed",
)
SR202: Final = Rule("SR202", "uuid.uuid1(), uuid.uuid4()", "makes a fresh id", "use spanreplay.uuid4()")
SR203: Final = Rule(
    "SR203",
    "os.urandom(), os.getrandom(), the secrets module",
    "reads the system's randomness",
    "move it into a @spanreplay.tool function or a spanreplay.boundary()",
)
SR301: Final = Rule(
    "SR301",
    "HTTP clients: httpx, requests, urllib.request, aiohttp",
    "talks to the network",
    "move it into a @spanreplay.tool function or a spanreplay.boundary()",
)
SR302: Final = Rule(
    "SR302",
    "sockets: socket.socket(), socket.create_connection(), name lookups",
    "talks to the network",
    "move it into a @spanreplay.tool function or a spanreplay.boundary()",
)

RULES: Final = {rule.code: rule for rule in (SR101, SR102, SR103, SR201, SR202, SR203, SR301, SR302)}

_HTTP_VERBS: Final = ("get", "post", "put", "patch", "delete", "head", "options", "request", "stream")

# Qualified name (after the import table) -> what the lint reports.
_EXACT: dict[str, Target] = {
    "datetime.datetime.now": Target(SR101, "datetime.now", "now"),
    "datetime.datetime.utcnow": Target(SR101, "datetime.utcnow"),
    "datetime.datetime.today": Target(SR101, "datetime.today"),
    "datetime.date.today": Target(SR101, "date.today"),
    "time.time": Target(SR102, "time.time", "time"),
    "time.time_ns": Target(SR102, "time.time_ns"),
    "time.monotonic": Target(SR103, "time.monotonic"),
    "time.monotonic_ns": Target(SR103, "time.monotonic_ns"),
    "time.perf_counter": Target(SR103, "time.perf_counter"),
    "time.perf_counter_ns": Target(SR103, "time.perf_counter_ns"),
    "random.random": Target(SR201, "random.random", "random"),
    "uuid.uuid1": Target(SR202, "uuid.uuid1"),
    "uuid.uuid4": Target(SR202, "uuid.uuid4", "uuid4"),
    "os.urandom": Target(SR203, "os.urandom"),
    "os.getrandom": Target(SR203, "os.getrandom"),
    "urllib.request.urlopen": Target(SR301, "urllib.request.urlopen"),
    "urllib.request.urlretrieve": Target(SR301, "urllib.request.urlretrieve"),
    "urllib.request.build_opener": Target(SR301, "urllib.request.build_opener"),
    "aiohttp.ClientSession": Target(SR301, "aiohttp.ClientSession"),
    "aiohttp.request": Target(SR301, "aiohttp.request"),
    "requests.Session": Target(SR301, "requests.Session"),
    "requests.session": Target(SR301, "requests.session"),
    "httpx.Client": Target(SR301, "httpx.Client"),
    "httpx.AsyncClient": Target(SR301, "httpx.AsyncClient"),
    "socket.socket": Target(SR302, "socket.socket"),
    "socket.create_connection": Target(SR302, "socket.create_connection"),
    "socket.getaddrinfo": Target(SR302, "socket.getaddrinfo"),
    "socket.gethostbyname": Target(SR302, "socket.gethostbyname"),
    "socket.gethostbyname_ex": Target(SR302, "socket.gethostbyname_ex"),
}
for _verb in _HTTP_VERBS:
    for _client in ("httpx", "requests"):
        if (_client, _verb) != ("requests", "stream"):
            _EXACT[f"{_client}.{_verb}"] = Target(SR301, f"{_client}.{_verb}")

# random.Random(seed) and random.seed(seed) make draws reproducible; the state
# functions move no draw. Everything else in the module draws.
_RANDOM_SEEDED: Final = frozenset({"Random", "seed"})
_RANDOM_HARMLESS: Final = frozenset({"getstate", "setstate"})
# Comparing two secrets reads no randomness.
_SECRETS_HARMLESS: Final = frozenset({"compare_digest"})


def target_for(qualified: str, positional: int, keywords: int) -> Target | None:
    """The target a call of ``qualified`` (a dotted name) hits, or None.

    ``positional`` and ``keywords`` count the call's arguments: ``random.Random(42)``
    is a seeded generator, ``random.Random()`` is not.
    """
    found = _EXACT.get(qualified)
    if found is not None:
        return found
    module, _, name = qualified.rpartition(".")
    if module == "random" and name and not name.startswith("_"):
        if name in _RANDOM_HARMLESS or (name in _RANDOM_SEEDED and positional + keywords > 0):
            return None
        return Target(SR201, qualified)
    if module == "secrets" and name and not name.startswith("_") and name not in _SECRETS_HARMLESS:
        return Target(SR203, qualified)
    return None


_SELECTOR: Final = re.compile(r"^SR\d{0,3}$")


def is_rule_selector(text: str) -> bool:
    """``SR``, ``SR1``, ``SR10`` or ``SR101``: a prefix that names at least one rule."""
    return bool(_SELECTOR.match(text)) and any(code.startswith(text) for code in RULES)

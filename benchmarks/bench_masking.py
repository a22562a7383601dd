"""Masking throughput on 40 KB payloads, clean and PII-dense, against plain ``re``.

The subject is ``spanreplay.masking.Masker.mask`` on one payload (no session
cache, so every repeat masks from scratch), with each engine: hyperscan (when
installed) and the pure-Python gate. The baseline is a plain ``re``
implementation of the same detectors: one alternation of the usual patterns
(textbook email, card, IBAN, SSN, phone, IP, key and token patterns), applied
with ``re.sub`` to every string of the payload, cards and IBANs checked in the
callback. Both produce masked copies of the same payload.

    python benchmarks/bench_masking.py [--quick] [--json]

Payloads (seeded, the same bytes every run):

- clean: a 40 KB conversation (40 messages) whose text holds order ids,
  timestamps, prices, version strings, UUIDs and short numbers, and no PII;
- dense: the same conversation with an email, phone number, card number, IBAN,
  SSN, IP address or API key about every 120 bytes;
- records: a 40 KB tool output of 250 customer records, PII in most fields.

Adversarial inputs (one 40 KB string each: an unbroken hex run, a digit run,
"@." repeated, "a@" repeated, spaced digits) are timed for the masker; the
baseline's time on the hex run shows the quadratic backtracking they guard
against. Also: masking a 60-turn conversation turn by turn, with a session
(each message masked once) and without one.

Goals: 200 MB/s on clean payloads and 50 MB/s on dense ones, where plain ``re``
runs the combined detector set at 10 MB/s: read, as every goal here, as ratios
to the baseline measured beside it (at least 20x and 5x). The last row times the
issue's anchor for its machine's speed (a textbook email pattern over the 40 KB
hex run, 885 ms there), to show how this machine compares.
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from _common import Case, Figure, emit, interleaved, median, noise, parse_args

from spanreplay.masking import Masker, MaskingConfig, hyperscan_available
from spanreplay.masking._checks import card_ok, iban_ok

NAME = "masking"
SIZE = 40_000
# The goals, as the issue states them: 200 MB/s on clean payloads and 50 MB/s on
# PII-dense ones, where plain ``re`` runs its combined detector set at 10 MB/s.
# Absolute speed is the machine's; the ratio to the baseline run beside it is what
# is compared (20x and 5x).
GOAL_CLEAN_MBS = 200.0
GOAL_DENSE_MBS = 50.0
GOAL_BASELINE_MBS = 10.0
# The anchor for its machine's speed: a textbook email pattern, 885 ms with
# plain ``re`` on a 40 KB unbroken hex run (it backtracks quadratically there).
TEXTBOOK_EMAIL = r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,}"
TEXTBOOK_EMAIL_MS = 885.0

_PROSE = (
    "the customer asked about their order status and we replied with tracking details please wait "
    "while i check the system for updates regarding the refund policy shipment warehouse invoice "
    "account subscription renewal discount delivery address changed yesterday morning"
)
WORDS = tuple(_PROSE.split())


def _filler(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.04:
        return f"ORD-{rng.randint(10000, 99999)}"
    if roll < 0.06:
        return f"${rng.randint(1, 999)}.{rng.randint(0, 99):02d}"
    if roll < 0.08:
        day = f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        return f"{day}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"
    if roll < 0.09:
        return f"v{rng.randint(0, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}"
    if roll < 0.10:
        return "%08x-%04x-%04x-%04x-%012x" % (  # noqa: UP031 - a UUID's fixed-width hex groups
            rng.getrandbits(32),
            rng.getrandbits(16),
            rng.getrandbits(16),
            rng.getrandbits(16),
            rng.getrandbits(48),
        )
    if roll < 0.13:
        return str(rng.randint(1, 500))
    return rng.choice(WORDS)


def _luhn_complete(prefix: str, rng: random.Random, length: int) -> str:
    digits = prefix + "".join(str(rng.randint(0, 9)) for _ in range(length - len(prefix) - 1))
    for last in "0123456789":
        if card_ok(digits + last):
            return digits + last
    raise AssertionError("no Luhn digit")


def _iban(rng: random.Random) -> str:
    bban = "".join(str(rng.randint(0, 9)) for _ in range(18))
    for check in range(100):
        candidate = f"DE{check:02d}{bban}"
        if iban_ok(candidate):
            return " ".join(candidate[i : i + 4] for i in range(0, len(candidate), 4))
    raise AssertionError("no IBAN check digits")


def _pii(rng: random.Random) -> str:
    kind = rng.randrange(9)
    name = rng.choice(["jane.doe", "j.smith", "li.wei", "m.garcia", "o.okafor"])
    if kind == 0:
        return f"{name}{rng.randint(1, 99)}@example.com"
    if kind == 1:
        return f"+1 415 555 {rng.randint(1000, 9999)}"
    if kind == 2:
        card = _luhn_complete("4", rng, 16)
        return " ".join(card[i : i + 4] for i in range(0, 16, 4))
    if kind == 3:
        return _iban(rng)
    if kind == 4:
        return f"{rng.randint(100, 665)}-{rng.randint(10, 99)}-{rng.randint(1000, 9999)}"
    if kind == 5:
        return f"203.0.{rng.randint(0, 255)}.{rng.randint(1, 254)}"
    if kind == 6:
        return f"({rng.randint(200, 999)}) 555-{rng.randint(1000, 9999)}"
    if kind == 7:
        return "sk-ant-api03-" + "".join(rng.choices("abcdefghijklmnopqrstuvwxyzABCDEF0123456789", k=40))
    return f"2001:db8:{rng.randint(1, 0xFFFF):x}::{rng.randint(1, 0xFFFF):x}"


def conversation(seed: int, *, dense: bool, size: int = SIZE, turns: int = 40) -> dict[str, Any]:
    """A model-call input of about ``size`` bytes of JSON: ``turns`` messages of text."""
    rng = random.Random(seed)
    per_message = size // turns
    messages = []
    for turn in range(turns):
        words: list[str] = []
        length = 0
        since_pii = 0
        while length < per_message - 40:
            # A number is followed by a word, as in prose: "566 192 2024" would read as a phone number.
            word = _pii(rng) if dense and since_pii >= 110 else _filler(rng) if len(words) % 2 else rng.choice(WORDS)
            since_pii = 0 if dense and since_pii >= 110 else since_pii + len(word) + 1
            words.append(word)
            length += len(word) + 1
        role = "user" if turn % 2 == 0 else "assistant"
        messages.append({"role": role, "content": [{"type": "text", "text": " ".join(words)}]})
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": messages}


def records(seed: int, size: int = SIZE) -> list[dict[str, Any]]:
    """A tool output of customer records, about ``size`` bytes of JSON."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    while len(orjson.dumps(out)) < size:
        n = len(out)
        out.append(
            {
                "id": f"cus_{n:06d}",
                "email": f"customer{n}@example.com",
                "phone": f"+44 20 7946 {rng.randint(1000, 9999)}",
                "card": " ".join(
                    c[i : i + 4]
                    for c in [_luhn_complete("5" + str(rng.randint(1, 5)), rng, 16)]
                    for i in range(0, 16, 4)
                ),
                "status": rng.choice(["active", "churned", "trial"]),
                "note": f"{_filler(rng)} {_filler(rng)} {_filler(rng)}",
            }
        )
    return out


ADVERSARIAL: dict[str, str] = {
    "hex run": "".join(random.Random(7).choices("0123456789abcdef", k=SIZE)),
    "digit run": "".join(random.Random(8).choices("0123456789", k=SIZE)),
    "'@.' repeated": "@." * (SIZE // 2),
    "'a@' repeated": "a@" * (SIZE // 2),
    "'a.' repeated": "a." * (SIZE // 2),
    "spaced digits": " ".join(random.Random(9).choices("0123456789", k=SIZE // 2)),
    "'::' repeated": "::" * (SIZE // 2),
    "'eyJa.' repeated": "eyJa." * (SIZE // 5),
    "'4111 ' repeated": "4111 " * (SIZE // 5),
    "'+1 ' repeated": "+1 " * (SIZE // 3),
}


# --- the baseline: plain re, the usual patterns --------------------------------------------

_BASELINE = re.compile(
    "|".join(
        [
            r"(?P<private_key>-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----)",
            r"(?P<jwt>eyJ[\w-]+\.[\w-]+\.[\w-]*)",
            r"(?P<api_key>sk-ant-[\w-]{20,}|sk-[\w-]{20,}|AKIA[A-Z0-9]{16}|gh[pousr]_\w{36,}|github_pat_\w{22,}"
            r"|xox[bpars]-[\w-]{10,})",
            r"(?P<bearer_token>Bearer\s+[\w.~+/=-]{12,})",
            r"(?P<email>[\w.+-]+@[\w-]+\.[\w.-]+)",
            r"(?P<payment_card>\b(?:\d[ -]?){12,18}\d\b)",
            r"(?P<iban>\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b)",
            r"(?P<us_ssn>\b\d{3}-\d{2}-\d{4}\b)",
            r"(?P<phone>\+?\(?\d[\d ().-]{7,}\d)",
            r"(?P<ipv4>\b(?:\d{1,3}\.){3}\d{1,3}\b)",
            r"(?P<ipv6>\b(?:[0-9A-Fa-f]{1,4}:){2,7}:?[0-9A-Fa-f]{0,4}\b)",
        ]
    )
)


def _baseline_replace(match: re.Match[str]) -> str:
    kind = match.lastgroup or "value"
    text = match.group()
    if kind == "payment_card" and not card_ok(re.sub(r"\D", "", text)):
        return text
    if kind == "iban" and not iban_ok(text.replace(" ", "")):
        return text
    return f"<{kind}>"


def baseline_mask(value: Any) -> Any:
    if isinstance(value, str):
        return _BASELINE.sub(_baseline_replace, value)
    if isinstance(value, dict):
        return {k: baseline_mask(v) for k, v in value.items()}
    if isinstance(value, list):
        return [baseline_mask(v) for v in value]
    return value


# --- measuring ----------------------------------------------------------------------------------


def _timed(fn: Callable[[], object], loops: int) -> Case:
    def case() -> int:
        start = time.perf_counter_ns()
        for _ in range(loops):
            fn()
        return (time.perf_counter_ns() - start) // loops

    return case


def _mbs(size: int, ns: Sequence[int]) -> list[float]:
    return [size / (n / 1e9) / 1e6 for n in ns]


def _spread(ns: Sequence[int]) -> str:
    """The fastest repeat (microseconds per payload) and the spread of the times."""
    return f"{noise([n / 1000 for n in ns])} us per payload"


def measure(*, loops: int, repeats: int, quick: bool = False) -> list[Figure]:
    engines = {"python": Masker(MaskingConfig(engine="python", key="bench-key"))}
    if hyperscan_available():
        engines["hyperscan"] = Masker(MaskingConfig(engine="hyperscan", key="bench-key"))
    best = "hyperscan" if "hyperscan" in engines else "python"  # what engine="auto" takes
    payloads: dict[str, Any] = {
        "clean": conversation(1, dense=False),
        "dense": conversation(2, dense=True),
        "records": records(3),
    }
    figures: list[Figure] = []
    for label, payload in payloads.items():
        size = len(orjson.dumps(payload))
        results = {name: m.mask("model", "bench", payload) for name, m in engines.items()}
        assert len({orjson.dumps(r.value) for r in results.values()}) == 1, "the engines disagree"
        findings = len(re.findall(r"<[a-z_0-9]+(?::[0-9a-f]{8,16})?>", orjson.dumps(results["python"].value).decode()))
        cases: dict[str, Case] = {"re": _timed(lambda p=payload: baseline_mask(p), loops)}
        for name, masker in engines.items():
            cases[name] = _timed(lambda m=masker, p=payload: m.mask("model", "bench", p), loops)
        if findings:
            cases["first sight"] = _timed(lambda m=engines[best], p=payload: _first_sight(m, p), loops)
        samples = interleaved(cases, repeats=repeats)
        rates = {name: _mbs(size, ns) for name, ns in samples.items()}
        goal = (GOAL_CLEAN_MBS if label == "clean" else GOAL_DENSE_MBS) / GOAL_BASELINE_MBS
        for name in engines:
            ratio = median([a / b for a, b in zip(rates[name], rates["re"], strict=True)])
            # The goal is the default engine's (hyperscan where it installs); the
            # pure-Python one is the fallback that gives the same results.
            judged = label != "records" and name == best
            figures.append(
                Figure(
                    NAME,
                    f"{label} {size // 1000} KB, {name} engine",
                    median(rates[name]),
                    "MB/s",
                    goal=f">= {goal:g}x plain re" if judged else "",
                    met=ratio >= goal if judged else None,
                    note=f"{ratio:.1f}x plain re; {findings} findings; " + _spread(samples[name]),
                )
            )
        if findings:
            figures.extend(_per_finding(label, size, best, findings, samples, rates))
        figures.append(
            Figure(
                NAME,
                f"{label} {size // 1000} KB, plain re",
                median(rates["re"]),
                "MB/s",
                note="baseline; " + _spread(samples["re"]),
            )
        )

    for label, text in ADVERSARIAL.items():
        payload = {"text": text}
        cases = {name: _timed(lambda m=m, p=payload: m.mask("tool", "bench", p), 3) for name, m in engines.items()}
        samples = interleaved(cases, repeats=max(3, repeats // 4))
        for name in engines:
            ms = [n / 1e6 for n in samples[name]]
            figures.append(
                Figure(
                    NAME, f"adversarial 40 KB {label}, {name} engine", median(ms), "ms", goal="linear", note=noise(ms)
                )
            )
    # The baseline backtracks quadratically on some of these: one run on a 10 KB
    # slice (a 40 KB run takes about 16 times as long).
    for label in ("hex run", "'a.' repeated", "digit run"):
        start = time.perf_counter_ns()
        baseline_mask({"text": ADVERSARIAL[label][: SIZE // 4]})
        figures.append(
            Figure(
                NAME,
                f"adversarial 10 KB {label}, plain re",
                (time.perf_counter_ns() - start) / 1e6,
                "ms",
                note="baseline, one run",
            )
        )

    figures.extend(_turns(engines[best], turns=60))
    if not quick:
        figures.append(_machine_speed())
    return figures


def _machine_speed() -> Figure:
    """This machine's speed against the one the goals were written on, by the issue's
    own anchor: one run of the textbook email pattern over the 40 KB hex run."""
    start = time.perf_counter_ns()
    re.findall(TEXTBOOK_EMAIL, ADVERSARIAL["hex run"])
    ms = (time.perf_counter_ns() - start) / 1e6
    return Figure(
        NAME,
        "machine: textbook email pattern, 40 KB hex run, plain re",
        ms,
        "ms",
        note=f"{ms / TEXTBOOK_EMAIL_MS:.1f}x the {TEXTBOOK_EMAIL_MS:g} ms of the machine the goals' MB/s were set on",
    )


def _first_sight(masker: Masker, payload: Any) -> None:
    """Mask ``payload`` as if each of its values were new: a masker remembers the token
    of every value it has masked, so repeats of one payload otherwise find them all."""
    masker.forget()
    masker.mask("model", "bench", payload)


def _per_finding(
    label: str, size: int, engine: str, findings: int, samples: dict[str, list[int]], rates: dict[str, list[float]]
) -> list[Figure]:
    """What one finding costs: the payload's time over its findings, with tokens remembered
    (as the rows above) and with every value seen for the first time."""
    cold = median(rates["first sight"])
    ratios = [a / b for a, b in zip(rates["first sight"], rates["re"], strict=True)]
    return [
        Figure(
            NAME,
            f"{label} {size // 1000} KB, {engine} engine, first sight of every value",
            cold,
            "MB/s",
            note=f"{median(ratios):.1f}x plain re; no token remembered from an earlier payload; "
            + _spread(samples["first sight"]),
        ),
        Figure(
            NAME,
            f"{label} {size // 1000} KB, {engine} engine, per finding",
            median(samples[engine]) / findings / 1000,
            "us",
            note=f"the whole payload's time over its {findings} findings; "
            f"{median(samples['first sight']) / findings / 1000:.1f} us at first sight",
        ),
    ]


def _turns(masker: Masker, *, turns: int) -> list[Figure]:
    """Mask a growing conversation turn by turn, as a run masks each model call's input."""
    full = conversation(4, dense=True, size=turns * 1500, turns=turns)["messages"]

    def run(session: bool) -> int:
        masking = masker.session() if session else masker
        start = time.perf_counter_ns()
        for turn in range(1, turns + 1):
            masking.mask("model", "bench", {"messages": full[:turn]})
        return time.perf_counter_ns() - start

    samples = interleaved({"session": lambda: run(True), "none": lambda: run(False)}, repeats=3)
    with_session, without = median(samples["session"]) / 1e6, median(samples["none"]) / 1e6
    return [
        Figure(
            NAME,
            f"{turns}-turn conversation, session",
            with_session,
            "ms",
            note=f"{without / with_session:.1f}x faster than without one",
        ),
        Figure(NAME, f"{turns}-turn conversation, no session", without, "ms", note="every message masked every turn"),
    ]


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(__doc__.splitlines()[0], argv)
    loops, repeats = (2, 3) if args.quick else (10, 15)
    emit(measure(loops=loops, repeats=repeats, quick=args.quick), as_json=args.json)


if __name__ == "__main__":
    main()

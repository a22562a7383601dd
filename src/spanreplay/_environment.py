"""Every ``SPANREPLAY_*`` environment variable: read here, and nowhere else.

``environment()`` reads them all, each time it is called (tests and long-running
processes may change them), into one ``Environment``. The modules that act on a
variable take its parsed value from there; the README's table is made from
``VARIABLES`` and a test keeps the two in step.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from spanreplay.errors import ConfigurationError

__all__ = ["VARIABLES", "Environment", "byte_size", "environment"]

VARIABLES: Final[Mapping[str, str]] = {
    "SPANREPLAY_MODE": "Zero-code mode under `opentelemetry-instrument`: `record`, `replay` or `fork` (unset: run "
    "live).",
    "SPANREPLAY_RUN_SCOPE": "Zero-code: `process` (the default: the process is one run) or `trace` (a run a trace).",
    "SPANREPLAY_RUN_ID": "Zero-code: the run id to record under (process scope) or to replay.",
    "SPANREPLAY_SOURCE": "Zero-code replay: the trace file, directory or URL to replay from.",
    "SPANREPLAY_FORK_AT": "Zero-code fork: the seq of the first step to run live (unset: where the code stops "
    "matching the recording).",
    "SPANREPLAY_OVERRIDES": "Zero-code replay or fork: a JSON file of what-if edits, "
    '`{"set": {"6": value}, "raise": {"6": "TimeoutError:message"}}`.',
    "SPANREPLAY_ALLOW_EFFECTS": "Zero-code fork: `1` or `true` to go live even at a step that changes the world.",
    "SPANREPLAY_AGENT": "Zero-code: the agent name of the run (else `OTEL_SERVICE_NAME`).",
    "SPANREPLAY_TRACE_DIR": "Where trace files go when `configure()` names no `trace_dir` (default `traces`).",
    "SPANREPLAY_STRICT": "`1` or `true`: raise spanreplay's own internal failures (`raise_internal_errors`).",
    "SPANREPLAY_MASK_KEY": "The key for keyed pseudonyms in masking (else plain placeholders).",
    "SPANREPLAY_INPUT_REFS": "`0`, `false`, `no` or `off`: write every model input whole, not as a reference.",
    "SPANREPLAY_POSTGRES_DSN": "Also write every step to Postgres (`postgresql://...`).",
    "SPANREPLAY_POSTGRES_MODE": "`batch`: commit Postgres rows in batches rather than per step.",
    "SPANREPLAY_POSTGRES_WAIT": "Most seconds a boundary waits for its Postgres row, or for a batched writer that "
    "fell behind (default `0.2`; `0`: never).",
    "SPANREPLAY_KEEP_OK": "The share of successful runs kept once they end, 0 to 1, picked by a hash of the run "
    "id (`configure(keep_ok=)`); the others' trace files and Postgres rows are removed. Failed and crashed runs are "
    "always kept (default: every run).",
    "SPANREPLAY_POSTGRES_COMMIT": "`async`: Postgres commits do not wait for the server's WAL flush "
    "(`synchronous_commit=off`); default `sync`.",
    "SPANREPLAY_PRICES": "A price file (JSON or YAML) on top of the built-in model prices.",
    "SPANREPLAY_ANTHROPIC_SDK_SPANS": "`1` or `true`: keep the Anthropic SDK's own spans beside spanreplay's.",
    "SPANREPLAY_ACCELERATE": "`0`, `false`, `no` or `off`: turn off every speed shortcut that reads another "
    "library's private names (`configure(accelerate=)`); the public paths serve the same results, slower.",
    "SPANREPLAY_JAEGER_TOKEN": "A bearer token for `jaeger+http(s)://` sources.",
    "SPANREPLAY_JAEGER_HEADERS": "Headers for `jaeger+http(s)://` sources: `name=value,name2=value2`.",
    "SPANREPLAY_TEMPO_TOKEN": "A bearer token for `tempo+http(s)://` sources.",
    "SPANREPLAY_TEMPO_HEADERS": "Headers for `tempo+http(s)://` sources: `name=value,name2=value2`.",
    "SPANREPLAY_MAX_LINE_BYTES": "The most bytes one line of a trace file (or a file that is one JSON document) "
    "may hold once decompressed: bytes or `512M`, `2G`; `0` for no limit (default `256M`).",
    "SPANREPLAY_MAX_FILE_BYTES": "The most bytes read from one trace file once decompressed, in the same units "
    "(default `0`: no limit).",
    "SPANREPLAY_MAX_INFLATED_BYTES": "The most bytes one gzip or zstd trace file may inflate to, in the same units; "
    "`0` for no limit (default `4G`).",
    "SPANREPLAY_MAX_INFLATE_RATIO": "The most plain bytes per compressed byte a gzip or zstd trace file may inflate "
    "to, checked once it has inflated past 16 MiB: a whole number, `0` for no limit (default `200`).",
}

_TRUE: Final = frozenset(("1", "true", "yes", "on"))
_OFF: Final = frozenset(("0", "false", "no", "off"))


@dataclass(frozen=True, slots=True)
class Environment:
    """The ``SPANREPLAY_*`` variables, parsed. Text fields are None when unset or empty."""

    mode: str
    run_scope: str
    run_id: str | None
    source: str | None
    # As written: the fork parses it, so that a bad value fails the fork alone.
    fork_at: str
    overrides: str | None
    allow_effects: bool
    agent: str | None
    trace_dir: str | None
    raise_internal_errors: bool
    mask_key: str | None
    input_refs: bool
    postgres_dsn: str | None
    postgres_batch: bool
    postgres_wait: float | None
    keep_ok: str | None
    # As written: the Postgres exporter checks it, naming the variable in its error.
    postgres_commit: str
    prices: str
    anthropic_sdk_spans: bool
    accelerate: bool
    jaeger_token: str
    jaeger_headers: str
    tempo_token: str
    tempo_headers: str
    # As written: byte_size() parses them where they are used, so that a bad value
    # fails what reads trace files, not every call that reads the environment.
    max_line_bytes: str
    max_file_bytes: str
    max_inflated_bytes: str
    max_inflate_ratio: str

    def backend(self, kind: str) -> tuple[str, str, str]:
        """A backend's (token, headers, name of its headers variable): kind is ``jaeger`` or ``tempo``."""
        if kind == "jaeger":
            return self.jaeger_token, self.jaeger_headers, "SPANREPLAY_JAEGER_HEADERS"
        return self.tempo_token, self.tempo_headers, "SPANREPLAY_TEMPO_HEADERS"


def environment(environ: Mapping[str, str] | None = None) -> Environment:
    """The ``SPANREPLAY_*`` variables as they are now (or as ``environ`` holds them)."""
    env = os.environ if environ is None else environ

    def text(name: str) -> str | None:
        return env.get(name) or None

    def flag(name: str) -> bool:
        return env.get(name, "").strip().lower() in _TRUE

    return Environment(
        mode=env.get("SPANREPLAY_MODE", "").strip().lower(),
        run_scope=env.get("SPANREPLAY_RUN_SCOPE", "").strip().lower() or "process",
        run_id=text("SPANREPLAY_RUN_ID"),
        source=text("SPANREPLAY_SOURCE"),
        fork_at=env.get("SPANREPLAY_FORK_AT", "").strip(),
        overrides=text("SPANREPLAY_OVERRIDES"),
        allow_effects=flag("SPANREPLAY_ALLOW_EFFECTS"),
        agent=text("SPANREPLAY_AGENT"),
        trace_dir=text("SPANREPLAY_TRACE_DIR"),
        raise_internal_errors=env.get("SPANREPLAY_STRICT", "").lower() in ("1", "true"),
        mask_key=text("SPANREPLAY_MASK_KEY"),
        input_refs=env.get("SPANREPLAY_INPUT_REFS", "1").strip().lower() not in _OFF,
        postgres_dsn=text("SPANREPLAY_POSTGRES_DSN"),
        postgres_batch=env.get("SPANREPLAY_POSTGRES_MODE", "").lower() in ("batch", "batched"),
        postgres_wait=_seconds(env.get("SPANREPLAY_POSTGRES_WAIT", "")),
        keep_ok=env.get("SPANREPLAY_KEEP_OK", "").strip() or None,
        postgres_commit=env.get("SPANREPLAY_POSTGRES_COMMIT", "").strip(),
        prices=env.get("SPANREPLAY_PRICES", "").strip(),
        anthropic_sdk_spans=flag("SPANREPLAY_ANTHROPIC_SDK_SPANS"),
        accelerate=env.get("SPANREPLAY_ACCELERATE", "1").strip().lower() not in _OFF,
        jaeger_token=env.get("SPANREPLAY_JAEGER_TOKEN", "").strip(),
        jaeger_headers=env.get("SPANREPLAY_JAEGER_HEADERS", ""),
        tempo_token=env.get("SPANREPLAY_TEMPO_TOKEN", "").strip(),
        tempo_headers=env.get("SPANREPLAY_TEMPO_HEADERS", ""),
        max_line_bytes=env.get("SPANREPLAY_MAX_LINE_BYTES", "").strip(),
        max_file_bytes=env.get("SPANREPLAY_MAX_FILE_BYTES", "").strip(),
        max_inflated_bytes=env.get("SPANREPLAY_MAX_INFLATED_BYTES", "").strip(),
        max_inflate_ratio=env.get("SPANREPLAY_MAX_INFLATE_RATIO", "").strip(),
    )


_SIZE: Final = re.compile(r"([0-9]{1,19})\s*([kmgt]?)(?:i?b)?", re.IGNORECASE)
_UNITS: Final = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def byte_size(text: str, name: str, default: int) -> int:
    """A size such as ``1048576``, ``512M`` or ``2GiB`` (powers of 1024); ``default`` when empty.

    Raises:
        ConfigurationError: the text is not a size; the message names the variable.
    """
    if not text:
        return default
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ConfigurationError(
            f"{name} is {text!r}, not a size; write a number of bytes or one such as 512M or 2G, or 0 for no limit."
        )
    return int(match[1]) * _UNITS[match[2].lower()]


def _seconds(text: str) -> float | None:
    """A number of seconds, 0 or more; None when unset or not one (the default applies)."""
    try:
        value = float(text.strip().removesuffix("s"))
    except ValueError:
        return None
    return value if value >= 0 else None

"""Jaeger and Tempo as sources: ``jaeger+http://host:16686`` and ``tempo+http://host:3200``.

A backend source fetches traces from the backend's HTTP query API, by trace id
or by searching for an attribute value (the loader searches for the run id),
and hands each response to the same document readers a downloaded file goes
through: Jaeger's ``/api/traces`` answer is Jaeger JSON, Tempo's
``/api/v2/traces`` answer is OTLP/JSON in an envelope whose PARTIAL status is
refused.

Settings ride on the URL's query string (``?service=support&lookback=7d&limit=50``);
credentials come from the environment, never from the command line:

- ``SPANREPLAY_JAEGER_HEADERS`` / ``SPANREPLAY_TEMPO_HEADERS``: extra request
  headers as ``name=value,name2=value2`` (values percent-encoded, the format of
  ``OTEL_EXPORTER_OTLP_HEADERS``), e.g. ``X-Scope-OrgID=tenant1``;
- ``SPANREPLAY_JAEGER_TOKEN`` / ``SPANREPLAY_TEMPO_TOKEN``: a bearer token;
- ``user:password@`` in the URL: HTTP basic auth (Grafana Cloud's user id and token).
"""

from __future__ import annotations

import base64
import http.client
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from spanreplay import semconv as sc
from spanreplay._environment import environment
from spanreplay.errors import RunNotFoundError, TraceFormatError
from spanreplay.model.events import EventLog, RunSummary
from spanreplay.model.spans import SpanRecord
from spanreplay.readers import Incomplete, MalformedTrace, document_spans

from .foreign import foreign_log
from .log_builder import build_log
from .runlog import SpanTap, only_run, summaries

_NAMES: Final = {"jaeger": "Jaeger", "tempo": "Tempo"}
_PORTS: Final = {"jaeger": 16686, "tempo": 3200}
_LOOKBACK_UNITS: Final = {"m": 60, "h": 3600, "d": 86400}
DEFAULT_LOOKBACK: Final = "7d"
DEFAULT_LIMIT: Final = 20
DEFAULT_TIMEOUT_S: Final = 30.0
_TRACE_ID = re.compile(r"[0-9a-fA-F]{16}|[0-9a-fA-F]{32}")
_SETTINGS: Final = ("service", "lookback", "limit", "timeout")


def is_trace_id(text: str) -> bool:
    return _TRACE_ID.fullmatch(text) is not None


@dataclass(frozen=True)
class Backend:
    """A parsed backend source."""

    kind: str  # "jaeger" or "tempo"
    base: str  # http(s)://host:port[/prefix], no credentials
    shown: str  # the source as messages show it: no credentials
    services: tuple[str, ...] = ()
    lookback: str = DEFAULT_LOOKBACK  # as written: 30m, 12h, 7d
    lookback_s: int = 7 * 86400
    limit: int = DEFAULT_LIMIT
    timeout_s: float = DEFAULT_TIMEOUT_S
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return _NAMES[self.kind]

    @property
    def env(self) -> str:
        return f"SPANREPLAY_{self.kind.upper()}"


def parse(source: str) -> Backend:
    """The backend a ``jaeger+http(s)://`` or ``tempo+http(s)://`` source names."""
    kind, _, rest = source.partition("+")
    try:
        parts = urllib.parse.urlsplit(rest)
    except ValueError as exc:  # an unbalanced [ of an IPv6 host
        raise TraceFormatError(f"{source!r} is not a URL ({exc}); write {kind}+http://HOST:PORT.") from None
    if not parts.hostname:
        raise TraceFormatError(
            f"{source!r} names no host; write {kind}+http://HOST:{_PORTS.get(kind, 80)}.", source=source
        )
    try:
        port = parts.port
    except ValueError:
        raise TraceFormatError(f"{source!r} has a port that is not a number; write {kind}+http://HOST:PORT.") from None
    netloc = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    if port is not None:
        netloc += f":{port}"
    base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    query = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(_SETTINGS))
    if unknown:
        raise TraceFormatError(
            f"{source!r} has the unknown setting {unknown[0]!r}; a {_NAMES[kind]} source takes "
            f"{', '.join(_SETTINGS)} (e.g. ?service=support&lookback=7d).",
            source=base,
        )
    headers = _headers(kind)
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
        headers["Authorization"] = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
    return Backend(
        kind=kind,
        base=base,
        shown=f"{kind}+{base}",
        services=tuple(s for value in query.get("service", []) for s in value.split(",") if s),
        lookback=query.get("lookback", [DEFAULT_LOOKBACK])[-1],
        lookback_s=_lookback(query.get("lookback", [DEFAULT_LOOKBACK])[-1], source),
        limit=_positive(query.get("limit", [str(DEFAULT_LIMIT)])[-1], "limit", source),
        timeout_s=float(_positive(query.get("timeout", [str(int(DEFAULT_TIMEOUT_S))])[-1], "timeout", source)),
        headers=headers,
    )


def _lookback(text: str, source: str) -> int:
    match = re.fullmatch(r"(\d+)([mhd])", text)
    if match is None or int(match[1]) == 0:
        raise TraceFormatError(
            f"lookback={text!r} in {source!r} is not a duration; write minutes, hours or days, as 30m, 12h or 7d.",
            source=source,
        )
    return int(match[1]) * _LOOKBACK_UNITS[match[2]]


def _positive(text: str, what: str, source: str) -> int:
    if not text.isdecimal() or int(text) == 0 or len(text) > 6:
        raise TraceFormatError(f"{what}={text!r} in {source!r} is not a positive whole number.", source=source)
    return int(text)


def _headers(kind: str) -> dict[str, str]:
    token, raw, variable = environment().backend(kind)
    headers: dict[str, str] = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    for item in raw.split(","):
        if not item.strip():
            continue
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            # The value may be a secret: name the variable and the shape, never the text.
            raise TraceFormatError(
                f"{variable} holds an entry that is not name=value; write it as "
                "name=value,name2=value2 (values percent-encoded)."
            )
        headers[name.strip()] = urllib.parse.unquote(value.strip())
    return headers


# --- fetching -------------------------------------------------------------------------------------


def trace(backend: Backend, trace_id: str) -> Any | None:
    """The backend's document for one trace, or None when it does not have the trace."""
    trace_id = trace_id.lower()
    if backend.kind == "jaeger":
        return _get(backend, f"/api/traces/{trace_id}", not_found_ok=True)
    # api/v2 says whether the trace is complete; Tempo before 2.5 only has api/traces.
    doc = _get(backend, f"/api/v2/traces/{trace_id}", not_found_ok=True)
    if doc is None:
        doc = _get(backend, f"/api/traces/{trace_id}", not_found_ok=True)
    return doc


def search(backend: Backend, attribute: str, values: tuple[str, ...]) -> Iterator[str]:
    """The ids of traces holding a span whose ``attribute`` is one of ``values``, newest first."""
    end = int(time.time())
    start = end - backend.lookback_s
    seen: set[str] = set()
    if backend.kind == "tempo":
        condition = " || ".join(f"span.{attribute} = {_traceql_string(v)}" for v in values)
        params = {"q": "{ " + condition + " }", "limit": str(backend.limit), "start": str(start), "end": str(end)}
        for found in _listed(backend, "/api/search", params, "traces"):
            trace_id = found.get("traceID") if isinstance(found, Mapping) else None
            if isinstance(trace_id, str) and trace_id not in seen:
                seen.add(trace_id)
                yield trace_id
        return
    services = backend.services or tuple(_jaeger_services(backend))
    for service in services:
        for value in values:
            params = {
                "service": service,
                "tags": orjson.dumps({attribute: value}).decode(),
                "limit": str(backend.limit),
                "start": str(start * 1_000_000),
                "end": str(end * 1_000_000),
            }
            for found in _listed(backend, "/api/traces", params, "data"):
                trace_id = found.get("traceID") if isinstance(found, Mapping) else None
                if isinstance(trace_id, str) and trace_id not in seen:
                    seen.add(trace_id)
                    yield trace_id


def _jaeger_services(backend: Backend) -> list[str]:
    return [s for s in _listed(backend, "/api/services", None, "data") if isinstance(s, str)]


def _listed(backend: Backend, path: str, params: Mapping[str, str] | None, key: str) -> list[Any]:
    """The array under ``key`` in the backend's answer to a listing request."""
    doc = _get(backend, path, params)
    found = doc.get(key) if isinstance(doc, Mapping) else None
    if found is None and isinstance(doc, Mapping):
        return []  # Jaeger writes "data": null for nothing found
    if not isinstance(found, list):
        raise TraceFormatError(
            f"{backend.name} answered {backend.shown}{path} without the {key!r} array its API returns; check "
            f"that {backend.shown} is the {backend.name} query API.",
            source=backend.shown,
        )
    return found


def _traceql_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _get(backend: Backend, path: str, params: Mapping[str, str] | None = None, *, not_found_ok: bool = False) -> Any:
    url = backend.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    shown = backend.shown + path
    request = urllib.request.Request(url, headers={"Accept": "application/json", **backend.headers})
    try:
        with urllib.request.urlopen(request, timeout=backend.timeout_s) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404 and not_found_ok:
            return None
        raise _http_error(backend, shown, exc) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", exc)
        raise TraceFormatError(
            f"Cannot reach {backend.name} at {backend.shown} ({reason}); check the host and port (the "
            f"{backend.name} query API listens on {_PORTS[backend.kind]} by default) and that it is running.",
            source=backend.shown,
        ) from None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        raise TraceFormatError(
            f"{backend.name} answered {shown} with something that is not JSON ({body[:60]!r}); check that "
            f"{backend.shown} is the {backend.name} query API and not another service.",
            source=backend.shown,
        ) from None


def _http_error(backend: Backend, shown: str, exc: urllib.error.HTTPError) -> TraceFormatError:
    try:
        said = exc.read()[:200].decode("utf-8", "replace").strip()
    except OSError:
        said = ""
    detail = f": {said}" if said else ""
    if exc.code in (401, 403):
        fix = (
            f"set {backend.env}_TOKEN to a bearer token, or {backend.env}_HEADERS to the headers it wants "
            "(name=value,name2=value2), or put user:password@ in the URL"
        )
    else:
        fix = f"check that {backend.shown} is the {backend.name} query API and that its version supports {shown}"
    return TraceFormatError(
        f"{backend.name} refused {shown} with HTTP {exc.code} {exc.reason}{detail}; {fix}.", source=backend.shown
    )


def trace_spans(backend: Backend, trace_id: str) -> list[SpanRecord] | None:
    """The spans of one trace, or None when the backend does not have it."""
    doc = trace(backend, trace_id)
    if doc is None:
        return None
    return list(_spans(backend, doc, f"{backend.shown} trace {trace_id.lower()}"))


def search_spans(backend: Backend, attribute: str, values: tuple[str, ...]) -> Iterator[SpanRecord]:
    """The spans of every trace that holds a span whose ``attribute`` is one of ``values``."""
    for trace_id in search(backend, attribute, values):
        found = trace_spans(backend, trace_id)
        if found is not None:  # gone between the search and the fetch (retention)
            yield from found


def _spans(backend: Backend, doc: Any, origin: str) -> Iterator[SpanRecord]:
    """The spans of one fetched document, read by the same code as a downloaded file."""
    try:
        yield from document_spans(doc, origin)
    except Incomplete as exc:
        raise TraceFormatError(f"{origin}: {exc}.", source=backend.shown) from None
    except MalformedTrace as exc:
        raise TraceFormatError(
            f"{origin}: {backend.name} answered with a trace spanreplay cannot read ({exc}); check that "
            f"{backend.shown} is the {backend.name} query API.",
            source=backend.shown,
        ) from None


class BackendSource:
    """Jaeger or Tempo: searched, not streamed, for the traces that hold a run."""

    def __init__(self, source: str) -> None:
        self.source = source  # messages that named the source as given keep doing so
        self.backend = parse(source)
        self.name = self.backend.shown

    def spans(self) -> Iterator[SpanRecord]:
        """The spans of the traces that hold a run that ended (model spans and all)."""
        return search_spans(self.backend, sc.RUN_STATUS, (sc.RUN_STATUS_OK, sc.RUN_STATUS_ERROR))

    def runs(self, tap: SpanTap | None = None) -> list[RunSummary]:
        return summaries(self.spans(), tap)

    def load(self, run_id: str | None = None) -> EventLog:
        backend = self.backend
        if run_id is None:
            run_id = only_run(self.runs(), backend.shown)
        if is_trace_id(run_id):
            spans = trace_spans(backend, run_id)
            if spans is None:
                raise RunNotFoundError(
                    f"{backend.name} at {backend.shown} has no trace {run_id.lower()}; check the id, or that the "
                    "trace is still within the backend's retention.",
                    run_id=run_id,
                )
            in_trace = sorted({s.attributes[sc.RUN_ID] for s in spans if isinstance(s.attributes.get(sc.RUN_ID), str)})
            foreign = foreign_log(spans[0].trace_id, spans) if spans and not in_trace else None
            if foreign is not None:
                return foreign  # a trace another instrumentation recorded: its trace id is its run id
            if len(in_trace) != 1:
                what = "no spanreplay run" if not in_trace else f"{len(in_trace)} runs ({', '.join(in_trace[:5])})"
                raise RunNotFoundError(
                    f"Trace {run_id.lower()} in {backend.shown} holds {what}; pass a run id instead "
                    f"(spanreplay runs {backend.shown} lists them).",
                    run_id=run_id,
                    available=tuple(in_trace),
                )
            run_id = in_trace[0]
            # The run may continue in other traces (a run scoped to a process spans requests).
            spans += search_spans(backend, sc.RUN_ID, (run_id,))
        else:
            spans = list(search_spans(backend, sc.RUN_ID, (run_id,)))
        mine = [s for s in spans if s.attributes.get(sc.RUN_ID) == run_id]
        if not mine:
            raise RunNotFoundError(
                f"Run {run_id} is not in {backend.shown}: no trace of the last {backend.lookback} holds a span "
                f"with {sc.RUN_ID}={run_id}; pass the trace id instead, or widen the search with ?lookback=30d "
                "(and name the service with ?service=NAME for Jaeger).",
                run_id=run_id,
            )
        # No lines to check for damage: a backend answers whole traces.
        return build_log(run_id, mine, self.source, damage=lambda: "")

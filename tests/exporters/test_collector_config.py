"""collector-config/: every YAML file parses, and the pieces are wired to each other and to spanreplay.

No Collector, Jaeger or Tempo runs here, so these tests check what can be
checked without them: each pipeline names only components that are defined (and
every defined component is used), the ports agree across the Collector, Jaeger,
Tempo, Grafana and compose files, the limits are raised where large payloads
need it, and the Collector's export files are in a format ``spanreplay.load``
reads: a file written the way the file exporter writes it loads to the same
event log as the agent's own trace file.
"""

from __future__ import annotations

import fnmatch
import random
import re
import struct
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

import orjson
import pytest
import yaml
import zstandard

import spanreplay
from helpers.paths import REPO
from spanreplay import semconv as sc
from spanreplay.recording.keep import KeepPolicy

ROOT = REPO / "collector-config"
YAML_FILES = sorted(p for p in ROOT.rglob("*") if p.suffix in (".yaml", ".yml"))

# The component types these files use, each in the distribution that provides it.
COLLECTOR_TYPES = {
    "receivers": {"otlp", "otlpjsonfile"},
    "processors": {"memory_limiter", "batch", "filter", "tail_sampling"},
    "exporters": {"otlp_grpc", "file", "loadbalancing"},
    "extensions": {"health_check", "file_storage"},
}
JAEGER_TYPES = {
    "receivers": {"otlp"},
    "processors": {"batch"},
    "exporters": {"jaeger_storage_exporter"},
    "extensions": {"jaeger_storage", "jaeger_query", "healthcheckv2"},
}
GRPC_DEFAULT_MIB = 4
HTTP_DEFAULT_BYTES = 20 * 1024 * 1024
TEMPO_DEFAULT_ATTRIBUTE_BYTES = 2048
TEMPO_DEFAULT_TRACE_BYTES = 5_000_000
# Every Collector config: the single one, and the two tiers of the fleet.
COLLECTORS = ["otelcol.yaml", "fleet/gateway.yaml", "fleet/sampler.yaml"]
# The tail_sampling policy types and the settings each takes (contrib's config.go).
POLICY_SETTINGS = {
    "always_sample": set(),
    "string_attribute": {"key", "values", "enabled_regex_matching", "cache_max_size", "invert_match"},
    "probabilistic": {"sampling_percentage", "hash_salt"},
    "status_code": {"status_codes"},
    "numeric_attribute": {"key", "min_value", "max_value", "invert_match"},
    "boolean_attribute": {"key", "value", "invert_match"},
    "latency": {"threshold_ms", "upper_threshold_ms"},
    "rate_limiting": {"spans_per_second"},
}
TAIL_SAMPLING_SETTINGS = {
    "decision_wait",
    "num_traces",
    "expected_new_traces_per_sec",
    "decision_cache",
    "policies",
    "sample_on_first_match",
}


def load(name: str) -> dict[str, Any]:
    document = yaml.safe_load((ROOT / name).read_text())
    assert isinstance(document, dict), f"{name} is not a YAML mapping"
    return document


@pytest.fixture(scope="module")
def collector() -> dict[str, Any]:
    return load("otelcol.yaml")


@pytest.fixture(scope="module")
def jaeger() -> dict[str, Any]:
    return load("jaeger.yaml")


@pytest.fixture(scope="module")
def tempo() -> dict[str, Any]:
    return load("tempo.yaml")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load("docker-compose.yaml")


@pytest.fixture(scope="module")
def datasources() -> dict[str, Any]:
    return load("grafana/datasources.yaml")


def port(endpoint: str) -> int:
    """The port of ``host:port`` or ``scheme://host:port/path``."""
    match = re.search(r":(\d+)(?:/.*)?$", endpoint)
    assert match, f"{endpoint!r} names no port"
    return int(match.group(1))


def host(endpoint: str) -> str:
    return re.sub(r"^\w+://", "", endpoint).rsplit(":", 1)[0]


def published(compose: dict[str, Any], service: str) -> dict[int, int]:
    """Container port -> host port for one compose service."""
    out = {}
    for mapping in compose["services"][service].get("ports", []):
        host_port, container_port = str(mapping).rsplit(":", 1)
        out[int(container_port)] = int(host_port.rsplit(":", 1)[-1])
    return out


def mounts(compose: dict[str, Any], service: str) -> dict[str, str]:
    """Container path -> host source for one compose service's volumes."""
    out = {}
    for volume in compose["services"][service].get("volumes", []):
        # The source may be a variable with a default: ${SPANREPLAY_TRACE_DIR:-../traces}
        match = re.fullmatch(r"(\$\{[^}]*\}|[^:]+):([^:]+)(?::\w+)?", str(volume))
        assert match, f"{service} has a volume compose would not read: {volume!r}"
        out[match.group(2)] = match.group(1)
    return out


def check_pipelines(config: dict[str, Any], known: dict[str, set[str]]) -> Iterator[str]:
    """Every problem in a Collector-style config's wiring, as a sentence."""
    used: dict[str, set[str]] = {kind: set() for kind in known}
    for name, pipeline in config["service"]["pipelines"].items():
        for kind in ("receivers", "processors", "exporters"):
            for component in pipeline.get(kind, []):
                used[kind].add(component)
                if component not in (config.get(kind) or {}):
                    yield f"pipeline {name} uses {kind[:-1]} {component}, which {kind} does not define"
    for extension in config["service"].get("extensions", []):
        used["extensions"].add(extension)
        if extension not in (config.get("extensions") or {}):
            yield f"service.extensions lists {extension}, which extensions does not define"
    for kind, types in known.items():
        for component in config.get(kind) or {}:
            if component.split("/")[0] not in types:
                yield f"{kind[:-1]} {component} is of a type this stack does not ship"
            if component not in used[kind]:
                yield f"{kind[:-1]} {component} is defined but no pipeline uses it"


@spanreplay.tool
def lookup(order: str, notes: int = 5000) -> dict[str, Any]:
    return {"order": order, "notes": "x" * notes}


def test_every_yaml_file_parses() -> None:
    assert {p.relative_to(ROOT).as_posix() for p in YAML_FILES} == {
        "docker-compose.yaml",
        "fleet/docker-compose.yaml",
        "fleet/gateway.yaml",
        "fleet/sampler.yaml",
        "grafana/datasources.yaml",
        "jaeger.yaml",
        "otelcol.yaml",
        "tempo.yaml",
    }
    for path in YAML_FILES:
        assert isinstance(yaml.safe_load(path.read_text()), dict), path


@pytest.mark.parametrize(
    ("name", "known"), [*((name, COLLECTOR_TYPES) for name in COLLECTORS), ("jaeger.yaml", JAEGER_TYPES)]
)
def test_each_pipeline_uses_only_defined_components_and_each_component_is_used(
    name: str, known: dict[str, set[str]]
) -> None:
    assert list(check_pipelines(load(name), known)) == []


def test_the_checker_finds_an_undefined_and_an_unused_component(collector: dict[str, Any]) -> None:
    broken = orjson.loads(orjson.dumps(collector))
    broken["service"]["pipelines"]["traces"]["exporters"].append("otlp_grpc/zipkin")
    broken["processors"]["transform/unused"] = {}
    assert list(check_pipelines(broken, COLLECTOR_TYPES)) == [
        "pipeline traces uses exporter otlp_grpc/zipkin, which exporters does not define",
        "processor transform/unused is of a type this stack does not ship",
        "processor transform/unused is defined but no pipeline uses it",
    ]


@pytest.mark.parametrize("config", COLLECTORS)
def test_memory_limiter_comes_first_and_batch_last_in_every_pipeline(config: str) -> None:
    for name, pipeline in load(config)["service"]["pipelines"].items():
        processors = pipeline["processors"]
        assert processors[0] == "memory_limiter", name
        assert processors[-1] == "batch", name


def test_the_backfill_receiver_keeps_its_place_in_an_extension_the_service_starts(collector: dict[str, Any]) -> None:
    receiver = collector["receivers"]["otlpjsonfile/backfill"]
    assert receiver["storage"] in collector["service"]["extensions"]
    assert receiver["start_at"] == "beginning"


@pytest.mark.parametrize(
    ("name", "path"),
    [
        ("otelcol.yaml", ("receivers", "otlp", "protocols")),
        ("fleet/gateway.yaml", ("receivers", "otlp", "protocols")),
        ("fleet/sampler.yaml", ("receivers", "otlp", "protocols")),
        ("jaeger.yaml", ("receivers", "otlp", "protocols")),
        ("tempo.yaml", ("distributor", "receivers", "otlp", "protocols")),
    ],
)
def test_every_otlp_receiver_takes_large_messages(name: str, path: tuple[str, ...]) -> None:
    protocols: Any = load(name)
    for key in path:
        protocols = protocols[key]
    assert protocols["grpc"]["max_recv_msg_size_mib"] >= 16 * GRPC_DEFAULT_MIB
    assert protocols["http"]["max_request_body_size"] > HTTP_DEFAULT_BYTES
    assert port(protocols["grpc"]["endpoint"]) == 4317
    assert port(protocols["http"]["endpoint"]) == 4318


def test_tempo_keeps_long_attributes_and_large_traces(tempo: dict[str, Any]) -> None:
    from spanreplay.model import payloads as _payloads

    assert tempo["distributor"]["max_attribute_bytes"] > TEMPO_DEFAULT_ATTRIBUTE_BYTES
    # Even at the default, spanreplay's own chunks pass: they are shorter than the cut.
    assert _payloads.CHUNK_BYTES < TEMPO_DEFAULT_ATTRIBUTE_BYTES
    assert tempo["overrides"]["defaults"]["global"]["max_bytes_per_trace"] > TEMPO_DEFAULT_TRACE_BYTES


def test_the_collector_listens_where_compose_publishes_it(collector: dict[str, Any], compose: dict[str, Any]) -> None:
    protocols = collector["receivers"]["otlp"]["protocols"]
    ports = published(compose, "collector")
    assert ports[port(protocols["grpc"]["endpoint"])] == 4317
    assert ports[port(protocols["http"]["endpoint"])] == 4318
    assert ports[port(collector["extensions"]["health_check"]["endpoint"])] == 13133


@pytest.mark.parametrize(
    ("exporter", "service", "config", "path"),
    [
        ("otlp_grpc/jaeger", "jaeger", "jaeger.yaml", ("receivers", "otlp", "protocols", "grpc")),
        ("otlp_grpc/tempo", "tempo", "tempo.yaml", ("distributor", "receivers", "otlp", "protocols", "grpc")),
    ],
)
def test_the_collector_exports_to_the_port_each_backend_listens_on(
    collector: dict[str, Any], compose: dict[str, Any], exporter: str, service: str, config: str, path: tuple[str, ...]
) -> None:
    endpoint = collector["exporters"][exporter]["endpoint"]
    assert host(endpoint) == service
    assert service in compose["services"]
    receiver: Any = load(config)
    for key in path:
        receiver = receiver[key]
    assert port(endpoint) == port(receiver["endpoint"])
    assert collector["exporters"][exporter]["tls"]["insecure"] is True  # plain gRPC inside the compose network


def test_grafana_reaches_tempo_and_jaeger_where_they_serve_queries(
    datasources: dict[str, Any], tempo: dict[str, Any], jaeger: dict[str, Any], compose: dict[str, Any]
) -> None:
    by_type = {source["type"]: source for source in datasources["datasources"]}
    assert by_type["tempo"]["isDefault"] is True
    assert host(by_type["tempo"]["url"]) == "tempo"
    assert port(by_type["tempo"]["url"]) == tempo["server"]["http_listen_port"]
    assert published(compose, "tempo")[tempo["server"]["http_listen_port"]] == 3200
    query = jaeger["extensions"]["jaeger_query"]
    assert host(by_type["jaeger"]["url"]) == "jaeger"
    assert port(by_type["jaeger"]["url"]) == port(query["http"]["endpoint"])
    assert published(compose, "jaeger")[port(query["http"]["endpoint"])] == 16686
    assert mounts(compose, "grafana")["/etc/grafana/provisioning/datasources/spanreplay.yaml"] == (
        "./grafana/datasources.yaml"
    )


def test_every_file_compose_mounts_exists(compose: dict[str, Any]) -> None:
    for service in compose["services"]:
        for source in mounts(compose, service).values():
            if source.startswith("./"):
                assert (ROOT / source).exists(), f"{service} mounts {source}, which collector-config/ lacks"


def test_the_readme_names_every_published_port(compose: dict[str, Any]) -> None:
    readme = (ROOT / "README.md").read_text()
    for service in compose["services"]:
        for host_port in published(compose, service).values():
            assert f"| {host_port} | " in readme, f"README.md does not list port {host_port} ({service})"


# --- the file exporter and the backfill receiver against what spanreplay reads and writes -------------


def test_the_file_exporter_avoids_the_append_and_group_by_pitfalls(collector: dict[str, Any]) -> None:
    exporter = collector["exporters"]["file/spanreplay"]
    assert exporter["format"] == "json"
    assert exporter["compression"] == "zstd"
    assert exporter["rotation"]["max_megabytes"] > 0  # also what keeps a restart from truncating the file
    assert "append" not in exporter  # cannot be combined with compression or rotation
    assert not (exporter.get("group_by") or {}).get("enabled")  # groups by resource, drops and truncates


def test_the_file_exporter_writes_to_a_host_directory(collector: dict[str, Any], compose: dict[str, Any]) -> None:
    path = PurePosixPath(collector["exporters"]["file/spanreplay"]["path"])
    source = mounts(compose, "collector")[str(path.parent)]
    assert (ROOT / source).is_dir()  # the directory `spanreplay runs collector-config/data/exports` reads
    assert source == "./data/exports"
    storage = collector["extensions"]["file_storage/backfill"]["directory"]
    assert (ROOT / mounts(compose, "collector")[storage]).is_dir()


def test_the_backfill_receiver_reads_the_agents_trace_files(
    collector: dict[str, Any], compose: dict[str, Any], trace_dir: Path
) -> None:
    with spanreplay.record(agent="backfilled") as run:
        lookup("1042", notes=3_000_000)  # a large model input is no rarer than this
    [written] = trace_dir.iterdir()
    [pattern] = collector["receivers"]["otlpjsonfile/backfill"]["include"]
    directory = str(PurePosixPath(pattern).parent)
    assert mounts(compose, "collector")[directory] == "${SPANREPLAY_TRACE_DIR:-../traces}"
    assert fnmatch.fnmatch(f"{directory}/{written.name}", pattern)
    assert written.name == f"{run.run_id}.jsonl"
    # The receiver cuts lines at max_log_size (1 MiB by default), which would break this span's JSON.
    longest = max(len(line) for line in written.read_bytes().splitlines())
    assert longest > 1024 * 1024
    assert longest < _bytes(collector["receivers"]["otlpjsonfile/backfill"]["max_log_size"])


def test_the_filter_drops_exactly_the_running_copies_of_run_spans(collector: dict[str, Any], trace_dir: Path) -> None:
    [condition] = collector["processors"]["filter/running-copies"]["traces"]["span"]
    attribute, value = re.fullmatch(r'attributes\["([^"]+)"\] == "([^"]+)"', condition).groups()  # type: ignore[union-attr]
    with spanreplay.record(agent="filtered"):
        spanreplay.random()
    [written] = trace_dir.iterdir()
    statuses = [_attributes(line).get(attribute) for line in written.read_bytes().splitlines()]
    # The root span twice (running, then ok) and the boundary once: only the first goes.
    assert statuses == [value, None, "ok"]


def _attributes(line: bytes) -> dict[str, Any]:
    [span] = orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return {kv["key"]: next(iter(kv["value"].values())) for kv in span["attributes"]}


def _bytes(size: str | int) -> int:
    if isinstance(size, int):
        return size
    number, unit = re.fullmatch(r"(\d+)\s*([KMG]i?B)?", size).groups()  # type: ignore[union-attr]
    return int(number) * {None: 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}[unit]


def _collector_batches(trace_file: Path) -> list[bytes]:
    """The agent's spans as the Collector's file exporter writes them: one OTLP/JSON batch per line."""
    documents = [orjson.loads(line) for line in trace_file.read_bytes().splitlines()]
    half = len(documents) // 2
    batches = [documents[:half], documents[half:]]
    return [orjson.dumps({"resourceSpans": [rs for d in batch for rs in d["resourceSpans"]]}) for batch in batches]


@pytest.mark.parametrize("framing", ["whole-file zstd stream", "length-prefixed zstd records"])
def test_the_collector_export_files_load_to_the_same_event_log_as_the_trace_file(
    framing: str, trace_dir: Path, tmp_path: Path, compose: dict[str, Any]
) -> None:
    with spanreplay.record(agent="exported") as run:
        lookup("1042")
        spanreplay.random()
    local = spanreplay.load(trace_dir, run.run_id)
    batches = _collector_batches(trace_dir / f"{run.run_id}.jsonl")
    exports = tmp_path / "exports"
    exports.mkdir()
    if framing == "whole-file zstd stream":
        # The exporter.file.nativeCompression gate that docker-compose.yaml turns on.
        assert "--feature-gates=exporter.file.nativeCompression" in compose["services"]["collector"]["command"]
        data = zstandard.ZstdCompressor().compress(b"".join(b + b"\n" for b in batches))
    else:
        # Without the gate: each batch compressed on its own, after its 4-byte big-endian length.
        frames = [zstandard.ZstdCompressor().compress(b) for b in batches]
        data = b"".join(struct.pack(">I", len(f)) + f for f in frames)
    (exports / "traces.jsonl.zst").write_bytes(data)
    assert spanreplay.load(exports, run.run_id) == local


# --- tail sampling: one Collector, then a fleet -----------------------------------------------------


def check_tail_sampling(config: dict[str, Any]) -> Iterator[str]:
    """Every problem ``otelcol validate`` would find in a config's tail_sampling processors, as a sentence."""
    for name, processor in (config.get("processors") or {}).items():
        if name.split("/")[0] != "tail_sampling":
            continue
        for key in set(processor) - TAIL_SAMPLING_SETTINGS:
            yield f"{name} has no setting {key}"
        if not re.fullmatch(r"\d+(ms|s|m)", str(processor.get("decision_wait", "30s"))):
            yield f"{name}.decision_wait is not a duration"
        policies = processor.get("policies") or []
        if not policies:
            yield f"{name} has no policies"
        names = [policy.get("name") for policy in policies]
        if len(set(names)) != len(names):
            yield f"{name} names two policies alike"
        for policy in policies:
            kind = policy.get("type")
            if kind not in POLICY_SETTINGS:
                yield f"{name} policy {policy.get('name')} has an unknown type {kind}"
                continue
            for key in set(policy) - {"name", "type", kind}:
                yield f"{name} policy {policy['name']} has no setting {key}"
            for key in set(policy.get(kind) or {}) - POLICY_SETTINGS[kind]:
                yield f"{name} policy {policy['name']}: {kind} has no setting {key}"
            if kind == "probabilistic" and not 0 < policy[kind]["sampling_percentage"] <= 100:
                yield f"{name} policy {policy['name']}: sampling_percentage is not a percentage"


def _policies(config: str) -> dict[str, dict[str, Any]]:
    return {policy["name"]: policy for policy in load(config)["processors"]["tail_sampling"]["policies"]}


@pytest.mark.parametrize("config", ["otelcol.yaml", "fleet/sampler.yaml"])
def test_tail_sampling_passes_the_config_checks(config: str) -> None:
    assert list(check_tail_sampling(load(config))) == []


def test_the_tail_sampling_checker_finds_what_the_collector_would_refuse(collector: dict[str, Any]) -> None:
    broken = orjson.loads(orjson.dumps(collector))
    sampling = broken["processors"]["tail_sampling"]
    sampling["wait"] = "30s"
    sampling["policies"][0]["string_attribute"]["value"] = "error"
    sampling["policies"][1]["probabilistic"]["sampling_percentage"] = 150
    sampling["policies"].append({"name": "failed-runs", "type": "trace_state"})
    assert sorted(check_tail_sampling(broken)) == [
        "tail_sampling has no setting wait",
        "tail_sampling names two policies alike",
        "tail_sampling policy failed-runs has an unknown type trace_state",
        "tail_sampling policy failed-runs: string_attribute has no setting value",
        "tail_sampling policy share-of-the-rest: sampling_percentage is not a percentage",
    ]


def test_the_single_collector_and_the_samplers_keep_the_same_runs() -> None:
    assert _policies("otelcol.yaml") == _policies("fleet/sampler.yaml")


@pytest.mark.parametrize("config", ["otelcol.yaml", "fleet/sampler.yaml"])
def test_tail_sampling_runs_on_the_otlp_pipeline_only_after_the_memory_limiter(config: str) -> None:
    pipelines = load(config)["service"]["pipelines"]
    assert pipelines["traces"]["processors"][:2] == ["memory_limiter", "tail_sampling"]
    # The backfill pipeline sends trace files the agents' keep policy already chose.
    assert all("tail_sampling" not in p["processors"] for name, p in pipelines.items() if name != "traces")


def _fnv1a_64(data: bytes) -> int:
    value = 0xCBF29CE484222325
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) % 2**64
    return value


def _sampled(policies: dict[str, dict[str, Any]], trace_id: str, spans: list[dict[str, Any]]) -> set[str]:
    """The policies that sample a trace, evaluated as the tail sampling processor does."""
    sampled = set()
    for name, policy in policies.items():
        if policy["type"] == "string_attribute":
            rule = policy["string_attribute"]
            if any(span.get(rule["key"]) in rule["values"] for span in spans):
                sampled.add(name)
        elif policy["type"] == "probabilistic":
            rule = policy["probabilistic"]
            salt = rule.get("hash_salt") or "default-hash-seed"
            threshold = int((2**64 - 1) * rule["sampling_percentage"] / 100)
            if _fnv1a_64(salt.encode() + bytes.fromhex(trace_id)) <= threshold:
                sampled.add(name)
    return sampled


def _exported_spans(trace_file: Path) -> tuple[str, list[dict[str, Any]]]:
    """A run's spans as OTLP sends them (no running copy of the run span), and its trace id."""
    spans = []
    trace_ids = set()
    for line in trace_file.read_bytes().splitlines():
        [span] = orjson.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]
        trace_ids.add(span["traceId"])
        attributes = _attributes(line)
        if attributes.get(sc.RUN_STATUS) != sc.RUN_STATUS_RUNNING:
            spans.append(attributes)
    [trace_id] = trace_ids
    return trace_id, spans


def _failing_run() -> None:
    with spanreplay.record(agent="sampled", run_id="run_failed"):
        lookup("1042", notes=10)
        raise ValueError("refund refused")


def test_a_failed_run_is_kept_by_its_status_and_a_successful_one_only_by_the_share(trace_dir: Path) -> None:
    policies = _policies("fleet/sampler.yaml")
    assert policies["failed-runs"]["string_attribute"] == {"key": sc.RUN_STATUS, "values": [sc.RUN_STATUS_ERROR]}
    with pytest.raises(ValueError, match="refund refused"):
        _failing_run()
    with spanreplay.record(agent="sampled", run_id="run_ok"):
        lookup("1043", notes=10)
    failed_trace, failed = _exported_spans(trace_dir / "run_failed.jsonl")
    ok_trace, ok = _exported_spans(trace_dir / "run_ok.jsonl")
    assert "failed-runs" in _sampled(policies, failed_trace, failed)
    assert "failed-runs" not in _sampled(policies, ok_trace, ok)
    # The same successful run under trace ids that fall on either side of the share.
    rng = random.Random(7)
    shares = [bool(_sampled(policies, f"{rng.getrandbits(128):032x}", ok)) for _ in range(2000)]
    assert 0.08 < sum(shares) / len(shares) < 0.12


def test_the_collectors_share_and_the_keep_policys_pick_different_runs() -> None:
    # docs/collector.md: the Collector hashes the trace id, the keep policy the run id,
    # so with both at 10% about 1% of successful runs are in both places, not 10%.
    policies = {"share": _policies("otelcol.yaml")["share-of-the-rest"]}
    keep = KeepPolicy(policies["share"]["probabilistic"]["sampling_percentage"] / 100)
    rng = random.Random(11)
    both = in_files = in_collector = 0
    for n in range(4000):
        files = keep.kept_by_share(f"run_20260101_000000_{n:08x}")
        collector = bool(_sampled(policies, f"{rng.getrandbits(128):032x}", []))
        in_files += files
        in_collector += collector
        both += files and collector
    assert 0.08 < in_files / 4000 < 0.12
    assert 0.08 < in_collector / 4000 < 0.12
    assert both / 4000 < 0.025


def test_the_gateway_routes_each_trace_to_one_sampler_by_dns(collector: dict[str, Any]) -> None:
    gateway = load("fleet/gateway.yaml")
    fleet = load("fleet/docker-compose.yaml")
    exporter = gateway["exporters"]["loadbalancing"]
    assert exporter["routing_key"] == "traceID"  # every span of a trace reaches the same sampler
    dns = exporter["resolver"]["dns"]
    assert dns["hostname"] in fleet["services"]
    assert fleet["services"][dns["hostname"]]["deploy"]["replicas"] > 1
    sampler = load("fleet/sampler.yaml")
    assert dns["port"] == port(sampler["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"])
    assert exporter["protocol"]["otlp"]["tls"]["insecure"] is True
    # The gateway takes what the agents send, as the single Collector does.
    assert gateway["receivers"] == {"otlp": collector["receivers"]["otlp"]}


@pytest.mark.parametrize(
    ("exporter", "service", "config", "path"),
    [
        ("otlp_grpc/jaeger", "jaeger", "jaeger.yaml", ("receivers", "otlp", "protocols", "grpc")),
        ("otlp_grpc/tempo", "tempo", "tempo.yaml", ("distributor", "receivers", "otlp", "protocols", "grpc")),
    ],
)
def test_the_samplers_export_to_the_backends_of_the_fleet(
    exporter: str, service: str, config: str, path: tuple[str, ...]
) -> None:
    sampler = load("fleet/sampler.yaml")
    fleet = load("fleet/docker-compose.yaml")
    endpoint = sampler["exporters"][exporter]["endpoint"]
    assert host(endpoint) == service
    assert mounts(fleet, service)[f"/etc/{'jaeger/config' if service == 'jaeger' else 'tempo'}.yaml"] == f"../{config}"
    receiver: Any = load(config)
    for key in path:
        receiver = receiver[key]
    assert port(endpoint) == port(receiver["endpoint"])


def test_every_file_the_fleet_compose_mounts_exists() -> None:
    fleet = load("fleet/docker-compose.yaml")
    for service in fleet["services"]:
        for source in mounts(fleet, service).values():
            if source.startswith("."):
                assert (ROOT / "fleet" / source).exists(), f"fleet {service} mounts {source}, which is missing"


def test_the_samplers_hold_traces_longer_than_the_single_collector_needs(collector: dict[str, Any]) -> None:
    single = collector["processors"]["tail_sampling"]
    sampler = load("fleet/sampler.yaml")["processors"]["tail_sampling"]
    for config in (single, sampler):
        # Spans that arrive after the decision follow it: the caches hold more traces than wait at once.
        assert config["decision_cache"]["sampled_cache_size"] >= config["num_traces"]
        assert config["decision_cache"]["non_sampled_cache_size"] >= config["num_traces"]
    assert sampler["decision_wait"] == single["decision_wait"]

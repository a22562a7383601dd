"""Record ``foreign_agent`` with another project's Anthropic instrumentor into a Collector proto file.

Run by ``foreign_instrumentors`` with the python of the test-only environment
that holds the instrumentors (never the project's: their ``anthropic`` entry
points would shadow spanreplay's)::

    python foreign_recorder.py openinference|openllmetry|anthropic-sdk URL OUT [--stream]

``anthropic-sdk`` is the SDK's own telemetry (its ``open_telemetry`` client
option, content mode on), with no instrumentor at all.

The agent runs under one root span, as an application's own tracing would put
it; everything else is what the instrumentor wrote. The spans go to ``OUT`` as
the Collector's file exporter writes ``format: proto``: one ``TracesData``
behind a 4-byte big-endian length. The final answer is printed as JSON.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main(argv: list[str]) -> int:
    which, url, out = argv[:3]
    stream = "--stream" in argv[3:]
    # OpenLLMetry records message contents only when asked (it is on by default; said anyway).
    os.environ.setdefault("TRACELOOP_TRACE_CONTENT", "true")

    import anthropic
    import foreign_agent
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if which == "openinference":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor as OpenInference

        OpenInference().instrument(tracer_provider=provider)
    elif which == "openllmetry":
        from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as OpenLLMetry

        OpenLLMetry().instrument(tracer_provider=provider)
    elif which != "anthropic-sdk":
        raise SystemExit(f"unknown instrumentor {which!r}: openinference, openllmetry or anthropic-sdk")

    options: dict[str, object] = {}
    if which == "anthropic-sdk":
        traces = {"enabled": True, "content_mode": "content"}
        options["open_telemetry"] = {"tracer_provider": provider, "traces": traces}
    client = anthropic.Anthropic(base_url=url, api_key="local-stand-in", max_retries=0, **options)
    with provider.get_tracer("support-agent").start_as_current_span("support-agent"):
        final = foreign_agent.answer(client, stream=stream)
    provider.force_flush()
    body = encode_spans(exporter.get_finished_spans()).SerializeToString()
    Path(out).write_bytes(len(body).to_bytes(4, "big") + body)
    print(json.dumps({"answer": final, "tools": foreign_agent.TOOL_LOG}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

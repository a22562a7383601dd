"""Every span and attribute name spanreplay writes or reads, and nowhere else.

This module is public and a contract: OpenTelemetry Collector configs filter and
route on these names, the Postgres store indexes them, and recordings written by
every earlier release carry them. A name here never changes meaning; renaming one
means reading the old name too. Code elsewhere imports the names from here and
never spells one itself (a test checks every module of the package).

Sections say whose convention each name is: spanreplay's own (the replay payload,
under the ``spanreplay.`` namespace), the OpenTelemetry general conventions
(resource, server, HTTP, exceptions), the GenAI semantic conventions, the older
flattened GenAI names OpenLLMetry still writes, the Anthropic SDK's own telemetry,
OpenInference (Arize Phoenix), and the tags Jaeger's translator writes. A comment
marks a name that is older or a vendor's.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ANTHROPIC_CONTENT_TRUNCATED",
    "ANTHROPIC_MESSAGE_STOP_REASON",
    "ANTHROPIC_REQUEST_ID",
    "ANTHROPIC_TOOL_RESULT_CONTENT",
    "ANTHROPIC_USAGE_CACHE_WRITE_1H_INPUT_TOKENS",
    "ANTHROPIC_USAGE_SERVICE_TIER",
    "AWAITED",
    "CALL_ID",
    "CONTENT_ATTRIBUTES",
    "DEPLOYMENT_ENVIRONMENT",
    "DEPLOYMENT_ENVIRONMENT_NAME",
    "EFFECT",
    "ERROR",
    "ERROR_TYPE",
    "ESCAPED_NAMES",
    "EXCEPTION_ESCAPED",
    "EXCEPTION_EVENT",
    "EXCEPTION_MESSAGE",
    "EXCEPTION_STACKTRACE",
    "EXCEPTION_TYPE",
    "FOREIGN_COMPARED",
    "FOREIGN_GAPS",
    "FOREIGN_INSTRUMENTATION",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CAPTURE_CONTENT_ENV",
    "GEN_AI_COMPLETION_PREFIX",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_NAMESPACE",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_PROMPT_PREFIX",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MAX_TOKENS",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_STOP_SEQUENCES",
    "GEN_AI_REQUEST_TEMPERATURE",
    "GEN_AI_REQUEST_TOP_K",
    "GEN_AI_REQUEST_TOP_P",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_ID",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK",
    "GEN_AI_SYSTEM_INSTRUCTIONS",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_DEFINITIONS",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS",
    "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS",
    "GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS",
    "GEN_AI_USAGE_COMPLETION_TOKENS",
    "GEN_AI_USAGE_COST",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GEN_AI_USAGE_PREFIX",
    "GEN_AI_USAGE_PROMPT_TOKENS",
    "HTTP_RESPONSE_STATUS_CODE",
    "INPUT",
    "INPUT_BASE_MESSAGES",
    "INPUT_BASE_SEQ",
    "INPUT_CHECKS",
    "INPUT_FULL_SHA256",
    "INPUT_FULL_SIZE",
    "INPUT_MESSAGES_PATH",
    "INPUT_MIME_TYPE",
    "INPUT_REFS_ENV",
    "INPUT_UNCHECKED",
    "INPUT_VALUE",
    "INSTRUMENTATION_NAME",
    "JAEGER_ERROR",
    "JAEGER_SPAN_KIND",
    "KEY",
    "KIND",
    "KIND_AGENT",
    "KIND_BRANCH",
    "KIND_CLOCK",
    "KIND_MARKER",
    "KIND_MCP",
    "KIND_MODEL",
    "KIND_RANDOM",
    "KIND_STATE",
    "KIND_TOOL",
    "KIND_UUID",
    "LLM_FINISH_REASON",
    "LLM_INPUT_MESSAGES",
    "LLM_INVOCATION_PARAMETERS",
    "LLM_MODEL_NAME",
    "LLM_OUTPUT_MESSAGES",
    "LLM_REQUEST_MODEL_NAME",
    "LLM_RESPONSE_MODEL_NAME",
    "LLM_TOKEN_COUNT_CACHE_READ",
    "LLM_TOKEN_COUNT_CACHE_WRITE",
    "LLM_TOKEN_COUNT_COMPLETION",
    "LLM_TOKEN_COUNT_PREFIX",
    "LLM_TOKEN_COUNT_PROMPT",
    "LLM_TOOLS",
    "LLM_TOOL_JSON_SCHEMA",
    "MASKED_SUFFIX",
    "MCP_DISCOVER",
    "MCP_INITIALIZE",
    "MCP_TOOLS_LIST",
    "OPENINFERENCE_SPAN_KIND",
    "OPENTRACING_REF_TYPE",
    "OPERATION_CHAT",
    "OPERATION_COUNT_TOKENS",
    "OPERATION_EXECUTE_TOOL",
    "OPERATION_GENERATE_CONTENT",
    "OPERATION_INVOKE_AGENT",
    "OPERATION_TEXT_COMPLETION",
    "OTEL_LIBRARY_NAME",
    "OTEL_LIBRARY_VERSION",
    "OTEL_SCOPE_NAME",
    "OTEL_SCOPE_VERSION",
    "OTEL_STATUS_CODE",
    "OTEL_STATUS_DESCRIPTION",
    "OUTPUT",
    "OUTPUT_MIME_TYPE",
    "OUTPUT_TYPES",
    "OUTPUT_VALUE",
    "PROVIDER_ANTHROPIC",
    "REPLAY_COMMAND",
    "RUN_CONCURRENT_SIBLINGS",
    "RUN_ERROR",
    "RUN_FORKED_AT",
    "RUN_FORKED_FROM",
    "RUN_ID",
    "RUN_MASKING",
    "RUN_PARENT",
    "RUN_SPAN_PREFIX",
    "RUN_STATUS",
    "RUN_STATUS_CRASHED",
    "RUN_STATUS_ERROR",
    "RUN_STATUS_OK",
    "RUN_STATUS_RUNNING",
    "RUN_STEPS",
    "SCHEMA",
    "SCHEMA_VERSION",
    "SCHEMA_VERSION_BRANCHES",
    "SCHEMA_VERSION_INPUT_REFS",
    "SCHEMA_VERSION_READ",
    "SEQ",
    "SERVED_FROM",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "SERVICE_NAME",
    "SHA256_SUFFIX",
    "SIZE_SUFFIX",
    "TOOL_NAME",
    "W3C_TRACESTATE",
    "boundary_span_name",
    "run_span_name",
]

# Schema version of the replay payload. Bump it when the layout below changes, and
# keep replaying every older version: the readers accept what each one wrote, and
# behaviour a version added is gated on it (see SCHEMA_VERSION_BRANCHES).
SCHEMA_VERSION: Final = 3

INSTRUMENTATION_NAME: Final = "spanreplay"

# --- run root span -------------------------------------------------------------
RUN_SPAN_PREFIX: Final = "invoke_agent"
RUN_ID: Final = "spanreplay.run.id"
RUN_STATUS: Final = "spanreplay.run.status"
RUN_ERROR: Final = "spanreplay.run.error"
RUN_FORKED_FROM: Final = "spanreplay.run.forked_from"
# On a sub-agent's run (``record(agent=...)`` or ``@agent`` inside an open run): the id of
# the run that opened it. The runs of one trace form a tree by it.
RUN_PARENT: Final = "spanreplay.run.parent"
# A fork's first step that ran live (its seq, equal to the parent run's up to there).
RUN_FORKED_AT: Final = "spanreplay.run.forked_at"
# The call ids of two boundaries made at the same time from one scope with no branch between
# them (threads or tasks spanreplay did not see start): their ordinals depend on timing.
RUN_CONCURRENT_SIBLINGS: Final = "spanreplay.run.concurrent_siblings"
# How many boundaries the run started, written when it ends: lets readers spot lost spans.
# How the run's payloads were masked ("off", "placeholders", "keyed:{key id}").
RUN_MASKING: Final = "spanreplay.run.masking"
RUN_STEPS: Final = "spanreplay.run.steps"
# On the failure alert's log record: the command that replays the failed run.
REPLAY_COMMAND: Final = "spanreplay.replay.command"

RUN_STATUS_OK: Final = "ok"
RUN_STATUS_ERROR: Final = "error"
RUN_STATUS_RUNNING: Final = "running"
RUN_STATUS_CRASHED: Final = "crashed"

# --- boundary spans --------------------------------------------------------------
SEQ: Final = "spanreplay.seq"
# On a fork's step served from the run it forked from (not run live): that run's id.
SERVED_FROM: Final = "spanreplay.served_from"
CALL_ID: Final = "spanreplay.call_id"
KIND: Final = "spanreplay.kind"
KEY: Final = "spanreplay.key"
SCHEMA: Final = "spanreplay.schema_version"
# On a span whose kind, key, call id, tool name or agent name held text UTF-8 cannot
# hold (a file name from os.listdir()): the names of those attributes, whose text is
# written with _text_escapes.escape. Absent: every such text is written as it is.
ESCAPED_NAMES: Final = "spanreplay.escaped"

# A payload attribute holds orjson text: one string, or an array of string chunks
# when the text is long. Its byte length and sha256 sit beside it.
INPUT: Final = "spanreplay.input"
OUTPUT: Final = "spanreplay.output"
ERROR: Final = "spanreplay.error"
# Beside an output that holds values JSON cannot say (a datetime, a dataclass, a set):
# a payload (text or chunks, .size, .sha256) holding a JSON object that maps the JSON
# path of each such value to its type tag. Absent: the output is plain JSON.
OUTPUT_TYPES: Final = "spanreplay.output.types"
# True when the work was awaited (an async function, or a callable that returned a
# coroutine): replay then hands back an awaitable too. Absent means not awaited.
AWAITED: Final = "spanreplay.awaited"
# True on a boundary marked ``effect=True`` (work that changes the world: a payment, an
# email), from the span's start. Such a span is also written when it starts, before its
# work runs (the intent); a copy that never ended is a side effect that may have happened.
EFFECT: Final = "spanreplay.effect"
SIZE_SUFFIX: Final = ".size"
SHA256_SUFFIX: Final = ".sha256"
# Beside a payload that masking changed: a JSON list of {"path", "rule"}, the
# places masked and the rule that masked each (never the value). Absent: nothing masked.
MASKED_SUFFIX: Final = ".masked"
# Beside an input masked without a key: a JSON object mapping the path of each masked
# place to the keyed checks of the values found there, in order (see
# masking/_place_checks.py); "unchecked" when they could not be made. Never a value,
# never the run's salt. Absent: nothing at a place a key would pseudonymize.
INPUT_CHECKS: Final = "spanreplay.input.checks"
INPUT_UNCHECKED: Final = "unchecked"
# An input that repeats the previous input's messages (same run, kind and key) is
# written as those messages left out: the seq of that input, how many of its messages
# come first, and the full input's byte length and sha256, checked once it is rebuilt.
INPUT_BASE_SEQ: Final = "spanreplay.input.base_seq"
INPUT_BASE_MESSAGES: Final = "spanreplay.input.base_messages"
# Where the messages list sits in the input: "messages", or "body.messages" (an HTTP request's body).
INPUT_MESSAGES_PATH: Final = "spanreplay.input.messages_path"
INPUT_FULL_SIZE: Final = "spanreplay.input.full.size"
INPUT_FULL_SHA256: Final = "spanreplay.input.full.sha256"
# Schema version of a span whose input references an earlier one: a release that
# reads only version 1 would replay the input without its earlier messages, so it refuses.
SCHEMA_VERSION_INPUT_REFS: Final = 2
# Schema version from which call ids carry branch scopes: a task or thread started in a
# run is ``branch:{name}#{n}`` within the scope that started it. A run written before
# it is replayed without branches (its gather and thread-pool calls share one scope).
SCHEMA_VERSION_BRANCHES: Final = 3
# The newest schema version this release reads.
SCHEMA_VERSION_READ: Final = 3
# Set to 0 (or false, no, off) to write every input whole, as before.
INPUT_REFS_ENV: Final = "SPANREPLAY_INPUT_REFS"

# --- spanreplay's own, in memory only -----------------------------------------------
# On each event read from another instrumentation's trace (never written to a span):
# who recorded it, what of the request replay compares, and what it lacks for an exact replay.
FOREIGN_INSTRUMENTATION: Final = "spanreplay.sources.foreign.instrumentation"
FOREIGN_COMPARED: Final = "spanreplay.sources.foreign.compared"
FOREIGN_GAPS: Final = "spanreplay.sources.foreign.gaps"

# --- OpenTelemetry general conventions: resource, server, HTTP ------------------------
SERVICE_NAME: Final = "service.name"
DEPLOYMENT_ENVIRONMENT_NAME: Final = "deployment.environment.name"
# The older name of the deployment environment, which Jaeger and Grafana dashboards still filter on.
DEPLOYMENT_ENVIRONMENT: Final = "deployment.environment"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"

# --- OpenTelemetry exceptions (the span event ``record_exception`` adds) ----------------
EXCEPTION_EVENT: Final = "exception"
EXCEPTION_TYPE: Final = "exception.type"
EXCEPTION_MESSAGE: Final = "exception.message"
EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
# Deprecated by the conventions (an exception event is recorded as it escapes); the SDK still writes it.
EXCEPTION_ESCAPED: Final = "exception.escaped"

# --- OpenTelemetry GenAI conventions ----------------------------------------------------
# Every GenAI attribute, current or older, starts so.
GEN_AI_NAMESPACE: Final = "gen_ai."
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
GEN_AI_REQUEST_TOP_K: Final = "gen_ai.request.top_k"
GEN_AI_REQUEST_STOP_SEQUENCES: Final = "gen_ai.request.stop_sequences"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: Final = "gen_ai.usage.cache_write.input_tokens"
# The name the conventions used for cache writes before cache_write; still read by some backends.
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
# Not (yet) in the conventions: the call's price in US dollars, from spanreplay's price table.
GEN_AI_USAGE_COST: Final = "gen_ai.usage.cost"
# Every usage attribute (token counts under any of the names above) starts so.
GEN_AI_USAGE_PREFIX: Final = "gen_ai.usage."
# Opt-in content, JSON text in the conventions' message schema.
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
# The opt-in GenAI message-content attributes (JSON text), each with the payload part it
# repeats: masked like that part.
CONTENT_ATTRIBUTES: Final = (
    (GEN_AI_INPUT_MESSAGES, "input"),
    (GEN_AI_SYSTEM_INSTRUCTIONS, "input"),
    (GEN_AI_OUTPUT_MESSAGES, "output"),
)
# The conventions' switch for the content attributes above.
GEN_AI_CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"

OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
OPERATION_CHAT: Final = "chat"
OPERATION_TEXT_COMPLETION: Final = "text_completion"
OPERATION_GENERATE_CONTENT: Final = "generate_content"
OPERATION_COUNT_TOKENS: Final = "count_tokens"
PROVIDER_ANTHROPIC: Final = "anthropic"

# --- older GenAI names, as OpenLLMetry still writes them ---------------------------------
# The token counts' names before the GenAI conventions renamed them.
GEN_AI_USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
GEN_AI_USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"
# The conversation flattened into numbered attributes before the JSON message attributes:
# ``gen_ai.prompt.{N}.role``/``content``, ``gen_ai.completion.{N}.content``/``finish_reason``.
GEN_AI_PROMPT_PREFIX: Final = "gen_ai.prompt."
GEN_AI_COMPLETION_PREFIX: Final = "gen_ai.completion."

# --- the Anthropic SDK's own telemetry (vendor names) ----------------------------------
# The Anthropic API's request id (the request-id response header), as the SDK's own spans name it.
ANTHROPIC_REQUEST_ID: Final = "anthropic.request.id"
# Usage the conventions have no name for, which the price depends on: cache writes
# to the 1-hour cache (of the cache_write tokens), and the service tier ("batch": half price).
ANTHROPIC_USAGE_CACHE_WRITE_1H_INPUT_TOKENS: Final = "anthropic.usage.cache_creation.ephemeral_1h_input_tokens"
ANTHROPIC_USAGE_SERVICE_TIER: Final = "anthropic.usage.service_tier"
# A tool result's content as the SDK's spans keep it (content mode on).
ANTHROPIC_TOOL_RESULT_CONTENT: Final = "anthropic.tool_result.content"
# True when the SDK cut the content it wrote to the span.
ANTHROPIC_CONTENT_TRUNCATED: Final = "anthropic.content.truncated"
# The API's own stop reason, beside the conventions' finish reasons.
ANTHROPIC_MESSAGE_STOP_REASON: Final = "anthropic.message.stop_reason"

# --- OpenInference (Arize Phoenix's instrumentors; vendor names) -------------------------
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
# A span's whole input and output (JSON text when the mime type says so).
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
TOOL_NAME: Final = "tool.name"
LLM_MODEL_NAME: Final = "llm.model_name"
# Older OpenInference instrumentors split the model name into the requested one and the answering one.
LLM_REQUEST_MODEL_NAME: Final = "llm.request.model_name"
LLM_RESPONSE_MODEL_NAME: Final = "llm.response.model_name"
LLM_INVOCATION_PARAMETERS: Final = "llm.invocation_parameters"
LLM_FINISH_REASON: Final = "llm.finish_reason"
LLM_TOKEN_COUNT_PREFIX: Final = "llm.token_count."
LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
LLM_TOKEN_COUNT_CACHE_READ: Final = "llm.token_count.prompt_details.cache_read"
LLM_TOKEN_COUNT_CACHE_WRITE: Final = "llm.token_count.prompt_details.cache_write"
# Flattened messages and tools: ``llm.input_messages.{N}.message.role`` and so on,
# ``llm.tools.{N}.tool.json_schema``.
LLM_INPUT_MESSAGES: Final = "llm.input_messages"
LLM_OUTPUT_MESSAGES: Final = "llm.output_messages"
LLM_TOOLS: Final = "llm.tools"
LLM_TOOL_JSON_SCHEMA: Final = "tool.json_schema"

# --- Jaeger's translation of OTLP (tags that carry span fields) --------------------------
JAEGER_SPAN_KIND: Final = "span.kind"
OTEL_SCOPE_NAME: Final = "otel.scope.name"
OTEL_SCOPE_VERSION: Final = "otel.scope.version"
# The scope's older name (instrumentation library), which older Jaeger releases write.
OTEL_LIBRARY_NAME: Final = "otel.library.name"
OTEL_LIBRARY_VERSION: Final = "otel.library.version"
OTEL_STATUS_CODE: Final = "otel.status_code"
OTEL_STATUS_DESCRIPTION: Final = "otel.status_description"
W3C_TRACESTATE: Final = "w3c.tracestate"
# OpenTracing's error tag: true marks the span as failed.
JAEGER_ERROR: Final = "error"
# The OTLP link attribute Jaeger's translator writes for every reference it keeps as a link.
OPENTRACING_REF_TYPE: Final = "opentracing.ref_type"

# --- boundary kinds ----------------------------------------------------------------
KIND_MODEL: Final = "model"
KIND_TOOL: Final = "tool"
KIND_CLOCK: Final = "clock"
KIND_RANDOM: Final = "random"
KIND_UUID: Final = "uuid"
# A checkpoint of the agent's own state (``spanreplay.checkpoint``): the value is its output.
KIND_STATE: Final = "state_update"
# Not nondeterminism: a version marker, ``spanreplay.patched(id)``, recorded once per run.
KIND_MARKER: Final = "marker"
# Not a boundary: the call-id segment of a task or thread started in a run.
KIND_BRANCH: Final = "branch"
# Not nondeterminism: the step of a run that opened a sub-agent's run (key: the sub-agent's
# name; output: ``{"run_id": ...}``). Replay serves that child run's steps at this point.
KIND_AGENT: Final = "agent"

# --- MCP client sessions (spanreplay.instrumentation.mcp) -------------------------------
# A request of an MCP session that is not a tool call (its handshake, its tool listing):
# kind ``mcp``, key the JSON-RPC method. A tool call is kind ``tool``, keyed by the tool.
KIND_MCP: Final = "mcp"
MCP_INITIALIZE: Final = "initialize"
MCP_DISCOVER: Final = "server/discover"
MCP_TOOLS_LIST: Final = "tools/list"


def run_span_name(agent: str) -> str:
    """``invoke_agent {agent}``, the GenAI conventions' name for an agent run."""
    return f"{RUN_SPAN_PREFIX} {agent}"


def boundary_span_name(kind: str, key: str) -> str:
    """The span name of a boundary: GenAI names for tools and models, else ``kind key``."""
    if kind == KIND_TOOL:
        return f"{OPERATION_EXECUTE_TOOL} {key}"
    if kind == KIND_MODEL:
        return f"{OPERATION_CHAT} {key}"
    return f"{kind} {key}"

"""Every span and attribute name spanreplay writes or reads, and nowhere else.

The GenAI names follow the OpenTelemetry semantic conventions for generative AI;
the replay payload lives under the ``spanreplay.`` namespace.
"""

from __future__ import annotations

from typing import Final

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
# A fork's first step that ran live (its seq, equal to the parent run's up to there).
RUN_FORKED_AT: Final = "spanreplay.run.forked_at"
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

# --- OpenTelemetry general and GenAI conventions ---------------------------------
SERVICE_NAME: Final = "service.name"
ERROR_TYPE: Final = "error.type"
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
# The token counts' names before the GenAI conventions renamed them (OpenLLMetry still writes them).
GEN_AI_USAGE_PROMPT_TOKENS: Final = "gen_ai.usage.prompt_tokens"
GEN_AI_USAGE_COMPLETION_TOKENS: Final = "gen_ai.usage.completion_tokens"

# --- OpenInference (Arize Phoenix's instrumentors) -----------------------------------
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
LLM_TOKEN_COUNT_PROMPT: Final = "llm.token_count.prompt"
LLM_TOKEN_COUNT_COMPLETION: Final = "llm.token_count.completion"
LLM_TOKEN_COUNT_CACHE_READ: Final = "llm.token_count.prompt_details.cache_read"
LLM_TOKEN_COUNT_CACHE_WRITE: Final = "llm.token_count.prompt_details.cache_write"
LLM_MODEL_NAME: Final = "llm.model_name"
# Opt-in content, JSON text in the conventions' message schema.
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
# The opt-in GenAI message-content attributes (JSON text), each with the payload part it
# repeats: masked like that part.
CONTENT_ATTRIBUTES: Final = (
    (GEN_AI_INPUT_MESSAGES, "input"),
    (GEN_AI_SYSTEM_INSTRUCTIONS, "input"),
    (GEN_AI_OUTPUT_MESSAGES, "output"),
)
# The conventions' switch for the content attributes above.
GEN_AI_CAPTURE_CONTENT_ENV: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"
# The Anthropic API's request id (the request-id response header), as the SDK's own spans name it.
ANTHROPIC_REQUEST_ID: Final = "anthropic.request.id"
# Usage the conventions have no name for, which the price depends on: cache writes
# to the 1-hour cache (of the cache_write tokens), and the service tier ("batch": half price).
ANTHROPIC_USAGE_CACHE_WRITE_1H_INPUT_TOKENS: Final = "anthropic.usage.cache_creation.ephemeral_1h_input_tokens"
ANTHROPIC_USAGE_SERVICE_TIER: Final = "anthropic.usage.service_tier"
PROVIDER_ANTHROPIC: Final = "anthropic"
OPERATION_COUNT_TOKENS: Final = "count_tokens"

OPERATION_INVOKE_AGENT: Final = "invoke_agent"
OPERATION_EXECUTE_TOOL: Final = "execute_tool"
OPERATION_CHAT: Final = "chat"

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

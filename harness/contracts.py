"""The vocabularies of docs/architecture.md §3, each its own enum so no layer overloads one `success`."""

from __future__ import annotations

from enum import StrEnum
from typing import Union

from pydantic.types import JsonValue as JsonValue

# JSON values as they cross tool and model boundaries (instead of `Any`); pydantic's named
# recursive alias works both for mypy and for validation inside models.
JsonScalar = Union[str, int, float, bool, None]
"""One JSON scalar (a database cell, a log field)."""
JsonObject = dict[str, JsonValue]
"""One JSON object (a tool's input, a row, a log event); `JsonValue` is any JSON value."""


class InvocationStatus(StrEnum):
    """Whether a tool request reached the backend and how it ended."""

    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    REJECTED = "REJECTED"


class EvidenceStatus(StrEnum):
    """For a completed call: did the scope return anything at all."""

    EVIDENCE = "EVIDENCE"
    NO_EVIDENCE = "NO_EVIDENCE"


class Relevance(StrEnum):
    """Knowledge-base retrieval relevance; REFERENCE is not automatically NO_GAIN."""

    STRONG = "STRONG"
    REFERENCE = "REFERENCE"


class InformationGain(StrEnum):
    """Whether an observation advanced the diagnosis. Two values only."""

    GAINED = "GAINED"
    NO_GAIN = "NO_GAIN"


class GainProducer(StrEnum):
    """Who decided a gain value (docs/architecture.md §4.3)."""

    HARNESS = "HARNESS"
    AGENT = "AGENT"


class CollectionState(StrEnum):
    """The progress tracker's collection state."""

    COLLECTING = "COLLECTING"
    SATURATED = "SATURATED"


class StopReason(StrEnum):
    """Why the Harness stopped the loop (absent when the agent finished on its own)."""

    INFORMATION_SATURATED = "INFORMATION_SATURATED"
    BUDGET_LIMIT_REACHED = "BUDGET_LIMIT_REACHED"
    PROGRESS_PROTOCOL_VIOLATED = "PROGRESS_PROTOCOL_VIOLATED"


class SemanticVerdict(StrEnum):
    """SemanticGuard's only two answers."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ReleaseOutcome(StrEnum):
    """The only public lifecycle of a run."""

    SUCCESS = "SUCCESS"
    FALLBACK = "FALLBACK"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


class FallbackKind(StrEnum):
    """Which safe fallback Release published."""

    INSUFFICIENT_EVIDENCE = "INSUFFICIENT_EVIDENCE"
    MISSING_REQUIRED_CONTEXT = "MISSING_REQUIRED_CONTEXT"


class ViolationKind(StrEnum):
    """Kinds of progress-protocol violation; none is NO_GAIN, none reaches a backend."""

    MISSING_PREVIOUS_OBSERVATION = "MISSING_PREVIOUS_OBSERVATION"
    WRONG_TOOL_CALL_ID = "WRONG_TOOL_CALL_ID"
    UNEXPECTED_PREVIOUS_OBSERVATION = "UNEXPECTED_PREVIOUS_OBSERVATION"
    INVALID_GAIN_VALUE = "INVALID_GAIN_VALUE"
    MALFORMED_ENVELOPE = "MALFORMED_ENVELOPE"
    UNKNOWN_TOOL = "UNKNOWN_TOOL"
    INVALID_INPUT = "INVALID_INPUT"
    REUSED_TOOL_CALL_ID = "REUSED_TOOL_CALL_ID"


class RejectionReason(StrEnum):
    """Why a tool request was rejected before the backend."""

    PROTOCOL_VIOLATION = "PROTOCOL_VIOLATION"
    DUPLICATE_SCOPE = "DUPLICATE_SCOPE"
    SATURATED = "SATURATED"
    BUDGET = "BUDGET"
    CANCELLED = "CANCELLED"
    """Left in the message when the run was cancelled; never executed."""
    AWAITING_EVALUATION = "AWAITING_EVALUATION"
    """Queued in the same assistant turn behind a call whose result became pending: not executed, not a
    violation (the model could not have evaluated a result it had not seen), no gain, no budget."""
    STOP_RULE = "STOP_RULE"
    """A request check (a loop detector the run was given, `harness.request_checks`) stopped the run at it: not
    executed, the run ends as at a budget."""


class BudgetKind(StrEnum):
    """Which hard budget was hit."""

    MODEL_CALLS = "MODEL_CALLS"
    TOOL_INVOCATIONS = "TOOL_INVOCATIONS"
    TOKENS = "TOKENS"
    OBSERVATION_BYTES = "OBSERVATION_BYTES"
    DEADLINE = "DEADLINE"
    STOP_RULE = "STOP_RULE"
    """A request check (a loop detector the run was given) said to stop; its reason is the stop's detail."""


class SchemaMode(StrEnum):
    """How the agent-facing envelope schema is stated to the model."""

    ADAPTIVE = "adaptive"
    """Per call: no `previous_observation` when nothing is pending; required, with the pending id as a
    `const`, when one is (constrained decoders then cannot emit a malformed envelope)."""
    STATIC = "static"
    """One schema for the whole run: `previous_observation` optional, described in prose."""


class ToolChoiceMode(StrEnum):
    """What the Harness allows on one diagnosis model call."""

    CONFIGURED = "configured"
    """The model client's configured tool_choice (auto, required or a forced tool)."""
    NONE = "none"
    """No tool call: STOP_REQUIRED was delivered, only the Draft may be written."""


class HarnessControl(StrEnum):
    """A control of the Harness a measurement may switch off, one at a time (`HarnessConfig.ablate`)."""

    NONE = "none"
    """Every control on: the Harness as it ships."""
    ENVELOPE = "envelope"
    """The envelope and the information-gain contract: the tools take their business input as it is, no observation
    waits for an evaluation and no NO_GAIN is counted (so no saturation or STOP_REQUIRED from it); a malformed
    request, an unknown tool or bad input is still a protocol violation."""
    DUPLICATE_REJECTION = "duplicate-rejection"
    """A tool and scope that already completed runs the backend again instead of being rejected as NO_GAIN."""
    EVIDENCE_GUARD = "evidence-guard"
    """EvidenceGuard checks and traces the citations, but its verdict is not applied: the SemanticGuard judges the
    Draft against its citations as written."""
    SEMANTIC_GUARD = "semantic-guard"
    """No SemanticGuard call: a conclusion whose citations EvidenceGuard verified is published."""


class EvidenceCheck(StrEnum):
    """The EvidenceGuard's verdict: every citation real and its excerpt found, or not."""

    PASSED = "PASSED"
    FAILED = "FAILED"


class GuardName(StrEnum):
    """The two guards in front of Release."""

    EVIDENCE = "EVIDENCE"
    SEMANTIC = "SEMANTIC"


class ModelPurpose(StrEnum):
    """Why a chat model is being called: the diagnosis loop or the isolated guard."""

    DIAGNOSIS = "DIAGNOSIS"
    SEMANTIC_GUARD = "SEMANTIC_GUARD"


class ModelErrorKind(StrEnum):
    """Stable classification of a failed model call; only some are retried."""

    RATE_LIMIT = "RATE_LIMIT"
    SERVER_ERROR = "SERVER_ERROR"
    TIMEOUT = "TIMEOUT"
    CONNECTION = "CONNECTION"
    BAD_RESPONSE = "BAD_RESPONSE"
    CLIENT_ERROR = "CLIENT_ERROR"
    NOT_A_COMPLETION = "NOT_A_COMPLETION"
    """The endpoint answered 2xx with a body that is not a chat completion (not JSON, no choices): its fault."""
    REPLAY_MISS = "CASSETTE_MISS"
    """A transport that replays recorded answers holds none for this request (never retried: it would miss again).
    Raised by such a transport through `OpenAIChatModel`'s `transport` hook. Stored as "CASSETTE_MISS": the text
    metrics databases and event logs written before the name was the library's have always held."""

    @property
    def retryable(self) -> bool:
        """Rate limits, 5xx, timeouts, dropped connections and non-completion bodies are worth another attempt."""
        return self in _RETRYABLE

    @property
    def infrastructure(self) -> bool:
        """The endpoint, the network or a replaying transport failed, not the model's answer (only BAD_RESPONSE is)."""
        return self is not ModelErrorKind.BAD_RESPONSE


_RETRYABLE = frozenset(
    {
        ModelErrorKind.RATE_LIMIT, ModelErrorKind.SERVER_ERROR, ModelErrorKind.TIMEOUT, ModelErrorKind.CONNECTION,
        ModelErrorKind.NOT_A_COMPLETION,
    }
)  # fmt: skip


class ControlSignal(StrEnum):
    """The only control instruction the model ever sees."""

    STOP_REQUIRED = "STOP_REQUIRED"

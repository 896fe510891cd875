"""The chat-model interface the one Diagnosis Agent loop and SemanticGuard call."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal, Protocol, Union

from harness.contracts import JsonObject, ModelErrorKind, ModelPurpose, ToolChoiceMode


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """One tool call as the model emitted it; `arguments` is the raw JSON text."""

    id: str
    """The model-chosen call id."""
    name: str
    """The tool name the model asked for."""
    arguments: str
    """Raw arguments text; may be invalid JSON (that is a protocol violation, not a crash)."""
    written_as_text: bool = False
    """The model wrote this call as JSON text in its reply and the client read it from there
    (`ToolCallFormat.JSON`); False for a call the endpoint returned in `tool_calls`."""


class ToolCallFormat(StrEnum):
    """How a model's tool calls travel from the endpoint to the Harness."""

    NATIVE = "native"
    """The endpoint parses the model's calls and returns them in `tool_calls` (its chat template's format)."""
    JSON = "json"
    """The reply is constrained by `response_format` to one JSON object, either a call
    `{"name": …, "arguments": …}` of an offered tool or the final answer, and the client reads the call from the
    text: for endpoints whose tool-call parsing or `tool_choice` enforcement does not work for a model."""


@dataclass(frozen=True, slots=True)
class SystemMessage:
    """System prompt."""

    content: str
    """Text."""
    role: Literal["system"] = "system"


@dataclass(frozen=True, slots=True)
class UserMessage:
    """User turn."""

    content: str
    """Text."""
    role: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """Model turn: text (the Draft) and/or tool calls."""

    content: str | None
    """Text content; the final Draft is JSON here."""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    """Tool calls in this turn."""
    role: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class ToolMessage:
    """The observation for one tool call."""

    tool_call_id: str
    """The call this answers."""
    content: str
    """The bounded observation (JSON text)."""
    role: Literal["tool"] = "tool"


ChatMessage = Union[SystemMessage, UserMessage, AssistantMessage, ToolMessage]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as advertised to the model (agent-facing: envelope schema)."""

    name: str
    """Tool name."""
    description: str
    """Description for the model."""
    parameters: JsonObject
    """JSON schema of the envelope `{previous_observation?, input}`."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One model call."""

    messages: tuple[ChatMessage, ...]
    """The conversation so far."""
    tools: tuple[ToolSpec, ...] = ()
    """Tools available (none for SemanticGuard)."""
    purpose: ModelPurpose = ModelPurpose.DIAGNOSIS
    """Diagnosis loop or isolated guard."""
    timeout_seconds: float = 60.0
    """Per-request timeout (the Harness passes min(model timeout, time left before the deadline))."""
    tool_choice: ToolChoiceMode = ToolChoiceMode.CONFIGURED
    """NONE after STOP_REQUIRED: the one permitted Draft must be writable (no forced tool call)."""
    answer_schema: JsonObject | None = None
    """JSON schema of the final answer (the Draft's); a client that constrains replies to JSON offers it beside
    the calls. None: the answer has no schema (SemanticGuard's verdict)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage reported by the endpoint (zeros when it reports none)."""

    input_tokens: int = 0
    """Prompt tokens."""
    output_tokens: int = 0
    """Completion tokens."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """A successful model call."""

    message: AssistantMessage
    """The assistant turn."""
    usage: Usage = field(default_factory=Usage)
    """Token usage."""
    finish_reason: str | None = None
    """The endpoint's finish reason, if any."""


class ModelCallError(Exception):
    """A model call failed with a stable classification the Harness can retry on."""

    def __init__(self, kind: ModelErrorKind, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after


class ChatModel(Protocol):
    """Anything that answers a ChatRequest; implementations must not retry on their own."""

    @property
    def name(self) -> str:
        """A label for metrics (e.g. `scripted`, `openai:gpt-4o-mini`)."""
        ...

    def complete(self, request: ChatRequest) -> ModelResponse:
        """Answer one request or raise ModelCallError."""
        ...

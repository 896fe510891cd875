"""The run's transcript: what was sent to the model and what it answered, at the model-call boundary.

`call_model` records every request (only the messages the conversation did not already send) and
every answer or failed attempt, so the transcript is exactly what the model saw: the tools offered
(their names and descriptions, recorded when they first appear or change), the system and
user prompts, each observation text (STOP_REQUIRED and corrective texts included), the Draft, and
the SemanticGuard's separate request and verdict. Assistant turns are recorded as received (their
echo in the next request is not recorded twice). Observations the loop produced but never sent
(the run ended first) are kept with `sent=False`.

The transcript holds references to the (frozen) messages, so recording costs no copy. It is written
by the run's loop thread only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypedDict, Unpack

from harness.contracts import ModelErrorKind, ModelPurpose
from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatRequest,
    ModelCallError,
    ModelResponse,
    SystemMessage,
    ToolMessage,
    UserMessage,
)

__all__ = ["EntryKind", "Transcript", "TranscriptEntry"]


class EntryKind(StrEnum):
    """What one transcript entry is."""

    TOOLS = "TOOLS"
    SYSTEM = "SYSTEM"
    USER = "USER"
    ASSISTANT = "ASSISTANT"
    TOOL_CALL = "TOOL_CALL"
    OBSERVATION = "OBSERVATION"
    MODEL_ERROR = "MODEL_ERROR"


@dataclass(frozen=True, slots=True)
class TranscriptEntry:
    """One message (or one tool call of an assistant message, or one failed attempt)."""

    seq: int
    """Position in the run's transcript, from 0."""
    purpose: ModelPurpose
    """The conversation: the diagnosis loop or the isolated SemanticGuard call."""
    kind: EntryKind
    """What the entry is."""
    model_call: int
    """The model call attempt (over the run, from 1) that sent or produced it; 0 for never sent."""
    content: str | None
    """The text: prompt, assistant content (the Draft), observation, or error message; for TOOLS the tools offered,
    as a JSON list of `{"name", "description"}`."""
    tool_call_id: str | None = None
    """The call id (as the model emitted it for TOOL_CALL, as answered for OBSERVATION)."""
    tool: str | None = None
    """The tool name the model asked for (TOOL_CALL)."""
    arguments: str | None = None
    """The raw arguments text (TOOL_CALL), possibly invalid JSON."""
    sent: bool = True
    """False for an observation the run produced but never sent (the loop ended first)."""
    input_tokens: int | None = None
    """Prompt tokens of the call that produced this ASSISTANT entry."""
    output_tokens: int | None = None
    """Completion tokens of that call."""
    finish_reason: str | None = None
    """The endpoint's finish reason (ASSISTANT)."""
    error_kind: ModelErrorKind | None = None
    """Classification of a failed attempt (MODEL_ERROR)."""


class _EntryFields(TypedDict, total=False):
    """The optional fields of a TranscriptEntry, as `_append` passes them on."""

    tool_call_id: str | None
    tool: str | None
    arguments: str | None
    sent: bool
    input_tokens: int | None
    output_tokens: int | None
    finish_reason: str | None
    error_kind: ModelErrorKind | None


def _kind_of(message: ChatMessage) -> EntryKind:
    if isinstance(message, SystemMessage):
        return EntryKind.SYSTEM
    if isinstance(message, UserMessage):
        return EntryKind.USER
    if isinstance(message, ToolMessage):
        return EntryKind.OBSERVATION
    return EntryKind.ASSISTANT


class Transcript:
    """Append-only record of one run's model conversations."""

    __slots__ = ("_calls", "_entries", "_last", "_sent", "_tools")

    def __init__(self) -> None:
        self._entries: list[TranscriptEntry] = []
        self._sent: dict[ModelPurpose, int] = {}
        self._last: dict[ModelPurpose, ChatMessage] = {}
        self._tools: dict[ModelPurpose, str] = {}
        self._calls = 0

    @property
    def entries(self) -> tuple[TranscriptEntry, ...]:
        """A snapshot of the entries so far."""
        return tuple(self._entries)

    def request(self, request: ChatRequest) -> None:
        """One attempt is about to be sent: record the messages this conversation has not sent yet."""
        self._calls += 1
        purpose = request.purpose
        done = self._sent.get(purpose, 0)
        msgs = request.messages
        if done > len(msgs) or (done and msgs[done - 1] is not self._last.get(purpose)):
            done = 0  # not a continuation: a new conversation for this purpose, recorded whole
        if request.tools:
            # Names and descriptions only: the envelope's schema changes with the pending call, what a tool is for
            # (a database tool's tables and their columns, say) does not.
            offered = json.dumps([{"name": s.name, "description": s.description} for s in request.tools],
                                 ensure_ascii=False, separators=(",", ":"))  # fmt: skip
            if self._tools.get(purpose) != offered:
                self._tools[purpose] = offered
                self._append(purpose, EntryKind.TOOLS, self._calls, offered)
        self._add(purpose, msgs[done:], self._calls, sent=True)
        self._sent[purpose] = len(msgs)
        if msgs:
            self._last[purpose] = msgs[-1]

    def response(self, purpose: ModelPurpose, response: ModelResponse) -> None:
        """The attempt just recorded answered: its assistant message and each tool call."""
        m = response.message
        u = response.usage
        self._append(purpose, EntryKind.ASSISTANT, self._calls, m.content, input_tokens=u.input_tokens,
                     output_tokens=u.output_tokens, finish_reason=response.finish_reason)  # fmt: skip
        for call in m.tool_calls:
            self._append(purpose, EntryKind.TOOL_CALL, self._calls, None, tool_call_id=call.id, tool=call.name,
                         arguments=call.arguments)  # fmt: skip

    def failure(self, purpose: ModelPurpose, error: ModelCallError) -> None:
        """The attempt just recorded failed."""
        self._append(purpose, EntryKind.MODEL_ERROR, self._calls, str(error), error_kind=error.kind)

    def unsent(self, messages: Sequence[ChatMessage]) -> None:
        """At the end of the loop: the diagnosis messages produced after the last request (never sent)."""
        done = self._sent.get(ModelPurpose.DIAGNOSIS, 0)
        self._add(ModelPurpose.DIAGNOSIS, messages[done:], 0, sent=False)

    def _add(self, purpose: ModelPurpose, messages: Sequence[ChatMessage], call: int, *, sent: bool) -> None:
        for message in messages:
            if isinstance(message, AssistantMessage):
                continue  # recorded as received, by `response`
            call_id = message.tool_call_id if isinstance(message, ToolMessage) else None
            self._append(purpose, _kind_of(message), call, message.content, tool_call_id=call_id, sent=sent)

    def _append(
        self, purpose: ModelPurpose, kind: EntryKind, call: int, content: str | None, **fields: Unpack[_EntryFields]
    ) -> None:
        self._entries.append(TranscriptEntry(len(self._entries), purpose, kind, call, content, **fields))

"""What every adapter shares: the Harness answers a whole assistant message at once, in order, and every call
the model made reaches it, whatever its id or tool name.

A framework keys tool calls by id and looks each name up in its own tool list: a reused id is a call it has
already answered (or two calls it cannot tell apart), an unknown name is an error it raises itself. Both are
protocol violations only the Harness may answer (REUSED_TOOL_CALL_ID, UNKNOWN_TOOL). So the framework never sees
the model's ids or unknown names: each call is handed to it under a fresh id of the adapter's own, and a name the
agent has no tool for under a catch-all tool; the framework's history is read back through the same mapping, so
the Harness (and the transcript) see exactly the calls the model made.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.interceptor import ToolAnswer
from harness.models.base import ChatMessage, ToolCallRequest, ToolSpec
from harness.session import HarnessSession, tool_specs
from harness.tools.base import BusinessTool

END_OF_RUN = "[harness: the run ended]"
"""The final text the framework's model answers once the session ended the loop (never handed to Release)."""

EMPTY_FINAL = "[harness: empty final message]"
"""Stands in for an empty final message inside a framework (handed to Release as the empty message it was)."""

CATCH_ALL_TOOL = "harness_unknown_tool"
"""The framework tool that carries a call to a name the agent has no tool for (suffixed if a tool has the name)."""

_CATCH_ALL_DESCRIPTION = "Carries a call to a tool the agent does not have to the Harness, which rejects it."
"""The catch-all tool's description (the framework's; the model is offered the Harness's own tool specs)."""

_FRAMEWORK_ID_PREFIX = "harness_call_"
"""The framework-side ids: unique within the run, never one the model chose."""


@dataclass(frozen=True, slots=True)
class FrameworkCall:
    """One model tool call as the framework carries it."""

    id: str
    """The adapter's own id for the call (unique within the run)."""
    name: str
    """The framework tool that runs it: the call's own tool, or the catch-all for a name the agent lacks."""


def catch_all_name(tool_names: Iterable[str]) -> str:
    """The catch-all tool's name: one no business tool has."""
    names = set(tool_names)
    name = CATCH_ALL_TOOL
    while name in names:
        name += "_"
    return name


class MessageAnswers:
    """The tool calls of the model's messages, as the framework carries them, and the Harness's answers.

    A framework runs each tool call on its own (sometimes concurrently); the Harness decides on the whole
    message in order (one pending call at a time, calls after a stop answered unexecuted). So the first
    tool the framework runs hands the whole message to the session, and every call reads its own answer."""

    def __init__(self, session: HarnessSession, tools: Sequence[BusinessTool[Any]]) -> None:
        self._session = session
        self._tools = tuple(tools)
        self._names = frozenset(t.name for t in self._tools)
        self.catch_all = catch_all_name(self._names)
        """The framework tool that carries calls to names the agent has no tool for."""
        self._lock = threading.Lock()
        self._batch: tuple[str, ...] = ()
        self._answers: dict[str, ToolAnswer] = {}
        self._calls: dict[str, ToolCallRequest] = {}

    def framework_tools(self) -> tuple[ToolSpec, ...]:
        """The tools to register with the framework: each business tool with the envelope schema (arguments are
        never validated by the framework), then the catch-all."""
        specs = tool_specs(self._tools, self._session.ctx.config.schema_mode, None)
        return (*specs, ToolSpec(self.catch_all, _CATCH_ALL_DESCRIPTION, {"type": "object", "properties": {}}))

    def expect(self, calls: Sequence[ToolCallRequest]) -> tuple[FrameworkCall, ...]:
        """The model's new message: these calls are answered next, under the returned framework ids and tools."""
        with self._lock:
            out: list[FrameworkCall] = []
            for call in calls:
                framework_id = f"{_FRAMEWORK_ID_PREFIX}{len(self._calls) + 1}"
                self._calls[framework_id] = call
                out.append(FrameworkCall(framework_id, call.name if call.name in self._names else self.catch_all))
            self._batch = tuple(c.id for c in out)
            return tuple(out)

    def call(self, framework_id: str) -> ToolCallRequest:
        """The call the model made, with its own id, name and raw arguments."""
        return self._calls[framework_id]

    def answer(self, framework_id: str) -> str:
        """The observation text for one call (its whole message handled on the message's first call)."""
        with self._lock:
            if framework_id in self._batch:
                batch, self._batch = self._batch, ()
                turn = self._session.handle_tool_calls([self._calls[i] for i in batch])
                # exactly one answer per call, in the message's order (ids may repeat: match by position)
                self._answers.update(zip(batch, turn.answers, strict=True))
            answer = self._answers.get(framework_id)
        return answer.observation.text if answer is not None else ""


class StableHistory:
    """The framework's history, converted afresh on every call, kept as the same message objects where it
    repeats the last one, so the transcript records each message once (it follows a conversation by identity)."""

    def __init__(self) -> None:
        self._last: list[ChatMessage] = []

    def __call__(self, fresh: Sequence[ChatMessage]) -> list[ChatMessage]:
        """`fresh` with its prefix shared with the previous history replaced by that history's objects."""
        n = 0
        while n < len(self._last) and n < len(fresh) and self._last[n] == fresh[n]:
            n += 1
        self._last = [*self._last[:n], *fresh[n:]]
        return list(self._last)

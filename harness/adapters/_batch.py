"""What every adapter shares: the Harness answers a whole assistant message at once, in order."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from harness.interceptor import ToolAnswer
from harness.models.base import ChatMessage, ToolCallRequest
from harness.session import HarnessSession

END_OF_RUN = "[harness: the run ended]"
"""The final text the framework's model answers once the session ended the loop (never handed to Release)."""

EMPTY_FINAL = "[harness: empty final message]"
"""Stands in for an empty final message inside a framework (handed to Release as the empty message it was)."""


class UnknownToolCall(Exception):
    """A tool call the framework cannot carry: the agent has no tool of that name."""


class MessageAnswers:
    """The tool calls of the model's last message and the Harness's answers to them.

    A framework runs each tool call on its own (sometimes concurrently); the Harness decides on the whole
    message in order (one pending call at a time, calls after a stop answered unexecuted). So the first
    tool the framework runs hands the whole message to the session, and every call reads its own answer."""

    def __init__(self, session: HarnessSession) -> None:
        self._session = session
        self._lock = threading.Lock()
        self._batch: tuple[ToolCallRequest, ...] = ()
        self._answers: dict[str, ToolAnswer] = {}
        self.calls: dict[str, ToolCallRequest] = {}
        """Every tool call the model made, by id, with its raw arguments."""

    def expect(self, calls: Sequence[ToolCallRequest]) -> None:
        """The model's new message: these calls are answered next."""
        with self._lock:
            self.calls.update({c.id: c for c in calls})
            self._batch = tuple(calls)

    def answer(self, tool_call_id: str) -> str:
        """The observation text for one call (the message handled on its first call)."""
        with self._lock:
            if tool_call_id not in self._answers and self._batch:
                turn = self._session.handle_tool_calls(self._batch)
                self._answers.update({a.tool_call_id: a for a in turn.answers})
                self._batch = ()
            answer = self._answers.get(tool_call_id)
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

"""A tool that answers a captured run's calls with what they returned, and any other call from its fixtures.

`harness-bench capture` keeps each call's result beside the records it builds fixtures from: a BM25 score
depends on every document of the original knowledge base and a SQL aggregate on rows the run never saw, so
neither can be recomputed from the captured records; serving the recorded result for the same scope is what
lets a captured case replay to the same observations.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from harness import BusinessTool, ToolExecutionError, ToolResult

__all__ = ["RecordedAnswer", "with_recorded"]


@dataclass(frozen=True, slots=True)
class RecordedAnswer:
    """One recorded result: the input that produced it and what the backend did."""

    input: dict[str, Any]
    """The business input as the run called it."""
    result: ToolResult
    """What the backend returned for it."""
    error: str | None = None
    """The backend failed instead, with this `Type: message` (the result is then unused)."""

    def replay(self) -> ToolResult:
        """The result, or the failure raised again as the Harness reports it (`Type: message`)."""
        if self.error is None:
            return self.result
        kind, sep, message = self.error.partition(": ")
        if sep and kind == "TimeoutError":
            raise TimeoutError(message)
        raise ToolExecutionError(message if sep and kind == "ToolExecutionError" else self.error)


class _RecordedTool(BusinessTool[BaseModel]):
    """Wraps a real tool: a call whose scope was recorded gets the recorded result, any other goes to the tool."""

    inner: BusinessTool[Any]
    answers: dict[str, RecordedAnswer]

    def __init__(
        self, inner: BusinessTool[Any], answers: Sequence[RecordedAnswer], input_model: type[BaseModel]
    ) -> None:
        self.inner = inner
        self.input_model = input_model
        self.answers = {}
        generic = type(inner).input_model  # the class's model: a recorded SQL may name tables the fixture lacks
        for answer in answers:
            try:
                key = inner.normalize_scope(generic.model_validate(answer.input))
            except (ValidationError, ValueError):
                continue  # an input its tool no longer accepts: never matched (the call is rejected before)
            self.answers.setdefault(key, answer)

    def normalize_scope(self, parsed: BaseModel) -> str:
        return self.inner.normalize_scope(parsed)

    def run(self, parsed: BaseModel) -> ToolResult:
        found = self.answers.get(self.inner.normalize_scope(parsed))
        return found.replay() if found is not None else self.inner.run(parsed)


def with_recorded(
    inner: BusinessTool[Any],
    answers: Sequence[RecordedAnswer],
    input_model: type[BaseModel] | None = None,
    description: str | None = None,
) -> BusinessTool[Any]:
    """`inner` answering `answers` first; `input_model` widens what it accepts, and `description` says so to the
    model (neither: `inner` unchanged)."""
    if not answers and input_model is None:
        return inner
    model = input_model or inner.input_model
    cls = type(
        f"Recorded_{inner.name}",
        (_RecordedTool,),
        {"name": inner.name, "description": description or inner.description, "input_model": model,
         "runs_inline": inner.runs_inline},
    )  # fmt: skip
    tool: BusinessTool[Any] = cls(inner, answers, model)
    return tool

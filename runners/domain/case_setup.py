"""What a case run is given: its task (question and context) and its three tools on the case's fixtures, with the
case's faults applied. The bench's runner, the scripted profiles and serve-sim all build a case this one way."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from harness.prompts import DiagnosisTask, TaskContext
from harness.tools.base import BusinessTool, ToolExecutionError, ToolResult
from runners.domain.evalset import EvalCase, FaultKind, ToolFault
from runners.domain.tools.db_query import DatabaseQuery
from runners.domain.tools.kb_search import KnowledgeBaseSearch
from runners.domain.tools.log_search import LogSearch


class _FaultyTool(BusinessTool[BaseModel]):
    """Wraps a real tool; its backend fails as the case's fault says (tool_failures family)."""

    inner: BusinessTool[Any]
    fault: ToolFault

    def __init__(self, inner: BusinessTool[Any], fault: ToolFault) -> None:
        self.inner = inner
        self.fault = fault
        self.calls = 0

    def normalize_scope(self, parsed: BaseModel) -> str:
        return self.inner.normalize_scope(parsed)

    def run(self, parsed: BaseModel) -> ToolResult:
        self.calls += 1
        if self.calls > self.fault.after_calls:
            if self.fault.kind is FaultKind.TIMEOUT:
                raise TimeoutError(f"{self.inner.name} backend timed out: {self.fault.message}")
            raise ToolExecutionError(f"{self.inner.name} backend error: {self.fault.message}")
        return self.inner.run(parsed)


def _faulty(inner: BusinessTool[Any], fault: ToolFault) -> BusinessTool[Any]:
    cls = type(
        f"Faulty_{inner.name}",
        (_FaultyTool,),
        {"name": inner.name, "description": inner.description, "input_model": inner.input_model},
    )
    tool: BusinessTool[Any] = cls(inner, fault)
    return tool


def build_tools(case: EvalCase) -> list[BusinessTool[Any]]:
    """The case's three tools on their fixtures (real BM25 and DuckDB), faults applied."""
    fx = case.fixtures
    tools: list[BusinessTool[Any]] = [KnowledgeBaseSearch(fx.kb), LogSearch(fx.logs), DatabaseQuery(fx.tables)]
    faults = {f.tool: f for f in fx.faults}
    return [_faulty(t, faults[t.name]) if t.name in faults else t for t in tools]


def task_of(case: EvalCase) -> DiagnosisTask:
    """The DiagnosisTask for a case."""
    c = case.context
    return DiagnosisTask(case.question, TaskContext(c.tenant, c.service, c.time_start, c.time_end))

"""What a case run is given: its task (question and context) and its three tools on the case's fixtures, with the
case's faults applied. The bench's runner, the scripted profiles and serve-sim all build a case this one way."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from harness import BusinessTool, DiagnosisTask, TaskContext, ToolExecutionError, ToolResult
from runners.domain.evalset import EvalCase, FaultKind, ToolFault, db_tables
from runners.domain.suite import DeclaredTool
from runners.domain.tools import kb_search
from runners.domain.tools.captured_results import RecordedAnswer, with_recorded
from runners.domain.tools.db_query import DatabaseQuery, case_input_model, tables_sentence
from runners.domain.tools.declared import declared_tool
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
    """The case's tools: the three built-in ones on their fixtures (real BM25 and DuckDB), a captured case's recorded
    results served first, faults applied; a suite's case, the tools its suite declares (answered from the case's
    results) and the built-in ones it names, in the suite's order."""
    fx = case.fixtures
    tools: list[BusinessTool[Any]] = [KnowledgeBaseSearch(fx.kb), LogSearch(fx.logs), DatabaseQuery(fx.tables)]
    if case.suite is not None:
        builtin = {t.name: t for t in _builtin(case, tools)}
        offered = case.tool_names
        return [declared_tool(t, fx.results) if isinstance(t, DeclaredTool) else builtin[t.name]
                for t in case.suite.tools if t.name in offered]  # fmt: skip
    return _builtin(case, tools)


def _builtin(case: EvalCase, tools: list[BusinessTool[Any]]) -> list[BusinessTool[Any]]:
    fx = case.fixtures
    if fx.recorded or fx.named_tables:  # a captured case (runners/domain/tools/captured_results.py)
        widened = case_input_model(db_tables(fx)) if fx.named_tables else None
        described = f"{DatabaseQuery.description} {tables_sentence(db_tables(fx))}" if fx.named_tables else None
        tools = [with_recorded(t, _answers(case, t.name), *((widened, described) if t.name == "db_query" else ()))
                 for t in tools]  # fmt: skip
    faults = {f.tool: f for f in fx.faults}
    return [_faulty(t, faults[t.name]) if t.name in faults else t for t in tools]


def _answers(case: EvalCase, tool: str) -> list[RecordedAnswer]:
    return [
        RecordedAnswer(dict(r.input), ToolResult(r.evidence_status, r.count, dict(r.scope),
                                                 tuple(dict(x) for x in r.records), r.truncated, tuple(r.relevance),
                                                 r.count_without_text_filter),
                       r.error)
        for r in case.fixtures.recorded if r.tool == tool
    ]  # fmt: skip


def task_of(case: EvalCase) -> DiagnosisTask:
    """The DiagnosisTask for a case."""
    c = case.context
    return DiagnosisTask(case.question, TaskContext(c.tenant, c.service, c.time_start, c.time_end))


def import_tool_backends() -> None:
    """Import what the tools import on first use (bm25s, numpy, scipy), on this thread: call it before case runs start
    on threads of their own (`kb_search.load_backend` says why)."""
    kb_search.load_backend()

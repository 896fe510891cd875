"""Cancellation is never a tool failure (the Harness side).

DuckDB turns a SIGINT into "Query interrupted" inside a tool; with the signal turned into one
cancellation flag, the interrupted backend must not be recorded as a FAILED invocation (that would
change the case's outcome in the metrics): the run is released CANCELLED.
"""

from __future__ import annotations

from harness.agent import run_diagnosis
from harness.context import RunContext
from harness.contracts import InvocationStatus, ReleaseOutcome
from harness.prompts import DiagnosisTask
from harness.tools.base import ToolResult
from harness.trace import EventKind
from runners.domain.scripted import ScriptedChatModel, ScriptStep, Trajectory
from tests.conftest import LINES, LookupInput, LookupTool


class _InterruptedTool(LookupTool):
    """Its second call is interrupted by Ctrl-C the way DuckDB reports it."""

    ctx: RunContext

    def run(self, parsed: LookupInput) -> ToolResult:
        if self.calls == 1:
            self.calls += 1
            self.ctx.cancellation.cancel()
            raise RuntimeError("Query interrupted")
        return super().run(parsed)


def test_a_tool_interrupted_by_cancellation_is_not_a_failed_invocation() -> None:
    ctx = RunContext.create()
    tool = _InterruptedTool(LINES)
    tool.ctx = ctx
    steps = [ScriptStep(tool="lookup", input={"query": q}) for q in ("nothing", "pool", "timeout")]
    model = ScriptedChatModel(Trajectory(steps=steps))
    r = run_diagnosis(DiagnosisTask("why?"), [tool], model, ctx=ctx)
    assert r.decision.outcome is ReleaseOutcome.CANCELLED
    invocations = [e for e in r.events if e.kind is EventKind.TOOL_INVOCATION]
    assert [e.invocation_status for e in invocations] == [InvocationStatus.COMPLETED]
    assert r.usage.tool_invocations == 1 and tool.calls == 2
    assert all(ctx.store.read(i).record is None or ctx.store.read(i).record.status is InvocationStatus.COMPLETED
               for i in ctx.store.ids())  # fmt: skip


def test_a_cancelled_run_starts_no_backend_call_and_answers_the_message() -> None:
    ctx = RunContext.create()
    tool = LookupTool(LINES)
    steps = [ScriptStep(tool="lookup", input={"query": "timeout"}),
             ScriptStep(tool="lookup", input={"query": "pool"}, same_turn=True)]  # fmt: skip
    model = ScriptedChatModel(Trajectory(steps=steps))

    class _CancelOnFirstCall(ScriptedChatModel):
        def complete(self, request):  # type: ignore[no-untyped-def]
            ctx.cancellation.cancel()  # Ctrl-C while the model was thinking
            return model.complete(request)

    r = run_diagnosis(DiagnosisTask("why?"), [tool], _CancelOnFirstCall(Trajectory()), ctx=ctx)
    assert r.decision.outcome is ReleaseOutcome.CANCELLED and tool.calls == 0
    rejected = [e for e in r.events if e.kind is EventKind.TOOL_REQUEST_REJECTED]
    assert [e.rejection.value for e in rejected if e.rejection] == ["CANCELLED", "CANCELLED"]
    assert [e.tool_call_id for e in rejected] == ["call_1", "call_2"], "every call of the message is answered"

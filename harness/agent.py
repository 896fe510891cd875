"""The Diagnosis Agent loop — the only ReAct loop in the code base.

The model decides hypotheses, tools and the Draft; every tool request passes the interceptor,
every model call passes the Harness retry, and the loop always ends in exactly one Release.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.config import HarnessConfig
from harness.context import BudgetUsage, RunContext
from harness.contracts import (
    BudgetKind,
    ModelErrorKind,
    ModelPurpose,
    RejectionReason,
    SchemaMode,
    ToolChoiceMode,
)
from harness.draft import DraftParse, parse_draft
from harness.envelope import envelope_schema
from harness.interceptor import HarnessToolInterceptor
from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    SystemMessage,
    ToolCallRequest,
    ToolMessage,
    ToolSpec,
    UserMessage,
)
from harness.prompts import SYSTEM_PROMPT, DiagnosisTask, render_task
from harness.release import ReleaseDecision, release
from harness.retry import DeadlineReached, ModelCallFailed, RetriesCutByBudget, Sleep, call_model
from harness.tools.base import BusinessTool
from harness.trace import EventKind, TraceEvent
from harness.transcript import TranscriptEntry


@dataclass(frozen=True, slots=True)
class RunResult:
    """Everything one run produced."""

    run_id: str
    """The run's id."""
    decision: ReleaseDecision
    """The single published outcome."""
    usage: BudgetUsage
    """Budget consumption."""
    events: tuple[TraceEvent, ...]
    """The audit trace."""
    turns: int
    """Model turns that produced an answer."""
    draft_error: str | None
    """Why the final message was not a valid Draft, if it was not."""
    error: str | None
    """A model-call failure (the loop's, or the SemanticGuard call's), if any."""
    wall_ms: float
    """Wall-clock duration."""
    error_kind: ModelErrorKind | None = None
    """The classification of `error`, typed where the call failed (None without an error)."""
    transcript: tuple[TranscriptEntry, ...] = ()
    """What the model was sent and answered, in order (the diagnosis loop and the SemanticGuard call)."""


def tool_specs(
    tools: Sequence[BusinessTool[Any]], mode: SchemaMode = SchemaMode.STATIC, pending: str | None = None
) -> tuple[ToolSpec, ...]:
    """Agent-facing specs: each business schema wrapped in the envelope (adaptive: for this pending state)."""
    return tuple(ToolSpec(t.name, t.description, envelope_schema(t.input_schema(), mode, pending)) for t in tools)


def run_diagnosis(
    task: DiagnosisTask,
    tools: Sequence[BusinessTool[Any]],
    model: ChatModel,
    *,
    config: HarnessConfig | None = None,
    guard_model: ChatModel | None = None,
    ctx: RunContext | None = None,
    sleep: Sleep = time.sleep,
) -> RunResult:
    """Run one diagnosis to exactly one Release outcome. Never raises for model or tool misbehaviour."""
    ctx = ctx or RunContext.create(config)
    cfg = ctx.config
    t0 = time.perf_counter()
    interceptor = HarnessToolInterceptor(ctx, {t.name: t for t in tools})
    messages: list[ChatMessage] = [SystemMessage(SYSTEM_PROMPT), UserMessage(render_task(task))]
    ctx.trace.emit(EventKind.RUN_STARTED, detail=f"model={model.name}")
    parsed: DraftParse | None = None
    loop_error: str | None = None
    loop_error_kind: ModelErrorKind | None = None
    turn = 0
    auto_id = 0

    def budget_ok() -> bool:
        return ctx.model_budget_exhausted() is None

    def stop_for(budget: BudgetKind, detail: str | None = None) -> None:
        ctx.record_budget_stop(budget, detail)

    while not ctx.cancellation.cancelled:
        exhausted = ctx.model_budget_exhausted()
        if exhausted is not None:
            stop_for(exhausted)
            break
        # After STOP_REQUIRED the one permitted Draft must be writable: no forced tool call.
        choice = ToolChoiceMode.NONE if ctx.tracker.stop_required_delivered else ToolChoiceMode.CONFIGURED
        specs = tool_specs(tools, cfg.schema_mode, ctx.tracker.pending)
        request = ChatRequest(tuple(messages), specs, ModelPurpose.DIAGNOSIS, cfg.model_timeout_seconds, choice)
        try:
            response = call_model(ctx, model, request, sleep=sleep, budget_check=budget_ok)
        except DeadlineReached as exc:  # the deadline cut the call: a budget stop, not a model failure
            stop_for(BudgetKind.DEADLINE, f"deadline reached during a model call ({exc.last})"[:300])
            break
        except RetriesCutByBudget as exc:  # the retries used up a budget: a budget stop, not an endpoint error
            budget = ctx.model_budget_exhausted() or BudgetKind.MODEL_CALLS
            stop_for(budget, f"retries cut by the budget ({exc.last})"[:300])
            break
        except ModelCallFailed as exc:
            loop_error, loop_error_kind = str(exc), exc.last.kind
            break
        turn += 1
        message = response.message
        if not message.tool_calls:
            parsed = parse_draft(message.content)
            ctx.trace.emit(EventKind.DRAFT_RECEIVED, detail=parsed.error)
            break
        calls = []
        for call in message.tool_calls:
            if not call.id:
                auto_id += 1
                call = ToolCallRequest(f"call_harness_{auto_id}", call.name, call.arguments)
            calls.append(call)
        messages.append(AssistantMessage(message.content or "", tuple(calls)))
        if ctx.usage.total_tokens >= cfg.max_total_tokens:
            stop_for(BudgetKind.TOKENS, "token budget exhausted by the last model call")
            # every call of the message is still answered (and traced) once, none executed
            interceptor.answer_unexecuted(calls, RejectionReason.BUDGET, "budget limit reached (TOKENS)")
            break
        outcome = interceptor.handle_turn(calls, turn)
        messages.extend(ToolMessage(a.tool_call_id, a.observation.text) for a in outcome.answers)
        if outcome.ended:
            break
    ctx.transcript.unsent(messages)  # observations of a loop that ended before sending them

    decision = release(
        ctx,
        question=task.question,
        parsed=parsed,
        guard_model=guard_model or model,
        cancelled=ctx.cancellation.cancelled,
        loop_error=loop_error,
    )
    return RunResult(
        run_id=ctx.run_id,
        decision=decision,
        usage=ctx.usage,
        events=ctx.trace.events,
        turns=turn,
        draft_error=parsed.error if parsed else None,
        error=loop_error or decision.call_error,  # a guard call's endpoint failure is not the model's answer
        wall_ms=round((time.perf_counter() - t0) * 1000, 3),
        error_kind=loop_error_kind if loop_error else decision.call_error_kind,
        transcript=ctx.transcript.entries,
    )

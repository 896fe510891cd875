"""`--agent plain`: the loop most teams run, beside the Harness, so the bench can say what the protocol costs and what
it buys on the same cases, model and budgets.

The plain loop calls the same model with the same tools and the same budgets (model calls, tool invocations, tokens,
deadline; retries as the Harness's), and nothing else: no envelope (the tools take their business input as it is),
no information-gain contract (no GAINED / NO_GAIN, no threshold, no STOP_REQUIRED), no duplicate-scope rejection (a
repeated query runs again), no guards on what it publishes. Its answer is the model's: a Draft with a conclusion is
published as SUCCESS, a Draft without one as the Harness's Release would name it (FALLBACK/INSUFFICIENT_EVIDENCE when a
call completed, an empty result included; FALLBACK/MISSING_REQUIRED_CONTEXT when none did and the Draft says what
context is missing; else FAILED), anything else (a budget, an invalid final message, a failed call) is FAILED —
as peers raise on a limit. EvidenceGuard is run on a published conclusion, to count what the Harness would have
blocked, and changes nothing. Optionally a loop detector (`--stop-rule`, the run's request checks) stops it as a
limit does; it watches the calls the loop runs (an unknown tool or bad input is answered with an error, as peers do,
and neither traced nor seen by it).

Its system prompt is its own (the Harness's without the protocol block) unless the run's `plain_prompt` is `harness`
(`--plain-prompt harness`): then it sends the Harness's word for word, so that a comparison with the Harness changes
the loop and not the prompt too.

Its trace has the Harness's event types, so its runs are stored, shown and compared like any other.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from harness import (
    DRAFT_JSON_SCHEMA,
    AssistantMessage,
    BudgetKind,
    BusinessTool,
    ChatMessage,
    ChatModel,
    ChatRequest,
    DeadlineReached,
    DiagnosisTask,
    DraftReceived,
    EvidenceCheck,
    EvidenceChecked,
    FallbackKind,
    InvocationStatus,
    ModelCallFailed,
    ModelErrorKind,
    ModelPurpose,
    Released,
    ReleaseDecision,
    ReleaseOutcome,
    RetriesCutByBudget,
    RunContext,
    RunResult,
    RunStarted,
    SystemMessage,
    ToolCallRequest,
    ToolChoiceMode,
    ToolInputError,
    ToolInvocation,
    ToolMessage,
    ToolSpec,
    UserMessage,
    call_model,
    check_evidence,
    parse_draft,
    project_result,
    render_task,
)
from runners.domain.prompt import plain_prompt
from runners.plan.bench_config import BenchHarnessConfig, PlainPrompt

__all__ = ["PlainLoop", "plain_loop"]


def _error(call_id: str, tool: str, message: str) -> str:
    return json.dumps({"tool_call_id": call_id, "tool": tool, "status": "ERROR", "error": message[:500]},
                      ensure_ascii=False, separators=(",", ":"))  # fmt: skip


@dataclass(frozen=True, slots=True)
class _Call:
    """A request the plain loop can run."""

    call: ToolCallRequest
    """The model's request."""
    tool: BusinessTool[Any]
    """The tool it names."""
    parsed: BaseModel
    """Its business input."""
    scope: str
    """Its normalised scope."""


def _released(ctx: RunContext, decision: ReleaseDecision) -> ReleaseDecision:
    ctx.trace.emit(Released(outcome=decision.outcome, fallback_kind=decision.fallback_kind,
                            stop_reason=decision.stop_reason, detail=decision.reason[:300]))  # fmt: skip
    return decision


def _prompt_of(ctx: RunContext) -> PlainPrompt:
    """The run's `plain_prompt` (a library config, which has none: the plain loop's own)."""
    return ctx.config.plain_prompt if isinstance(ctx.config, BenchHarnessConfig) else PlainPrompt.PLAIN


class PlainLoop:
    """The plain loop (an AgentLoop)."""

    def __call__(
        self,
        task: DiagnosisTask,
        tools: Sequence[BusinessTool[Any]],
        model: ChatModel,
        *,
        ctx: RunContext,
        guard_model: ChatModel | None,
        system_prompt: str,
    ) -> RunResult:
        """One run to its answer (see the module docstring); `system_prompt` is the Harness's: sent as it is when the
        run's `plain_prompt` is `harness`, else its role is kept in the plain loop's own prompt."""
        t0 = time.perf_counter()
        by_name = {t.name: t for t in tools}
        specs = tuple(ToolSpec(t.name, t.description, t.input_schema()) for t in tools)
        prompt = system_prompt if _prompt_of(ctx) is PlainPrompt.HARNESS else plain_prompt(system_prompt)
        messages: list[ChatMessage] = [SystemMessage(prompt), UserMessage(render_task(task))]
        ctx.trace.emit(RunStarted(model=model.name))
        draft_text: str | None = None
        error: str | None = None
        error_kind: ModelErrorKind | None = None  # typed as the Harness types it: a cassette miss is the bench's
        turns = auto_id = 0
        while True:
            if ctx.cancellation.cancelled:
                break
            exhausted = ctx.model_budget_exhausted()
            if exhausted is not None:
                ctx.record_budget_stop(exhausted)
                break
            request = ChatRequest(tuple(messages), specs, ModelPurpose.DIAGNOSIS, ctx.config.model_timeout_seconds,
                                  ToolChoiceMode.CONFIGURED, DRAFT_JSON_SCHEMA)  # fmt: skip
            try:
                response = call_model(ctx, model, request)
            except (DeadlineReached, RetriesCutByBudget) as exc:
                budget = BudgetKind.DEADLINE if isinstance(exc, DeadlineReached) else BudgetKind.MODEL_CALLS
                ctx.record_budget_stop(budget, str(exc)[:300])
                break
            except ModelCallFailed as exc:
                error, error_kind = str(exc), exc.last.kind
                break
            turns += 1
            calls: list[ToolCallRequest] = []
            for c in response.message.tool_calls:
                if not c.id:
                    auto_id += 1
                    c = ToolCallRequest(f"call_plain_{auto_id}", c.name, c.arguments, c.written_as_text)
                calls.append(c)
            if not calls:
                draft_text = response.message.content
                break
            messages.append(AssistantMessage(response.message.content or "", tuple(calls)))
            stop = False
            for call in calls:
                if stop:
                    messages.append(ToolMessage(call.id, _error(call.id, call.name, "not run: the loop stopped")))
                    continue
                ready = self._parse(by_name, call)
                why = None if isinstance(ready, str) else ctx.check_request(call.id, call.name, ready.scope)
                if why is not None:  # a loop detector (--stop-rule): the loop stops as at a limit
                    ctx.record_budget_stop(BudgetKind.STOP_RULE, why[:300], tool_call_id=call.id)
                    stop = True
                    messages.append(ToolMessage(call.id, _error(call.id, call.name, "not run: the loop stopped")))
                    continue
                tool_budget = ctx.tool_budget_exhausted()
                if tool_budget is not None:
                    ctx.record_budget_stop(tool_budget, tool_call_id=call.id)
                    stop = True
                    messages.append(ToolMessage(call.id, _error(call.id, call.name, "not run: budget reached")))
                    continue
                text = ready if isinstance(ready, str) else self._invoke(ctx, ready)
                messages.append(ToolMessage(call.id, text))
            if stop:
                break
        ctx.transcript.unsent(messages)
        decision = self._publish(ctx, draft_text, error)
        parsed = parse_draft(draft_text) if draft_text is not None else None
        return RunResult(
            run_id=ctx.run_id, decision=decision, usage=ctx.usage, events=ctx.trace.events, turns=turns,
            draft_error=parsed.error if parsed else None, error=error, error_kind=error_kind,
            wall_ms=round((time.perf_counter() - t0) * 1000, 3), transcript=ctx.transcript.entries,
        )  # fmt: skip

    def _parse(self, tools: dict[str, BusinessTool[Any]], call: ToolCallRequest) -> _Call | str:
        """A request as a plain loop reads it: the call to run, or the error text an unknown tool or bad input
        gets (such a request runs nothing and is not traced; a loop detector never sees it)."""
        tool = tools.get(call.name)
        if tool is None:
            return _error(call.id, call.name, f"unknown tool {call.name!r}; tools: {', '.join(tools)}")
        try:
            raw = json.loads(call.arguments or "{}")
            parsed = tool.parse_input(raw if isinstance(raw, dict) else {})
        except (ValueError, ToolInputError) as exc:
            return _error(call.id, call.name, str(exc))
        return _Call(call, tool, parsed, tool.normalize_scope(parsed))

    def _invoke(self, ctx: RunContext, request: _Call) -> str:
        """Run one call as a plain loop does: the backend's result is the bounded observation; every backend call
        is a TOOL_INVOCATION, repeats included."""
        call, tool, parsed, scope = request.call, request.tool, request.parsed, request.scope
        started = ctx.store.clock()
        t0 = time.perf_counter()
        try:
            result = tool.run(parsed)
        except Exception as exc:  # the backend failed: its message, as the Harness shows one
            message = f"{type(exc).__name__}: {exc}"
            ctx.store.put(tool_call_id=call.id, tool=call.name, scope=scope, input=parsed.model_dump(mode="json"),
                          status=InvocationStatus.FAILED, result=None, error=message, started_at=started)  # fmt: skip
            text = _error(call.id, call.name, message)
            ctx.usage.tool_invocations += 1
            ctx.request_failed(call.id)
            ctx.trace.emit(ToolInvocation(tool_call_id=call.id, tool=call.name, scope=scope,
                                          invocation_status=InvocationStatus.FAILED, observation_bytes=len(text),
                                          latency_ms=round((time.perf_counter() - t0) * 1000, 3),
                                          detail=message[:300]))  # fmt: skip
            return text
        ctx.store.put(tool_call_id=call.id, tool=call.name, scope=scope, input=parsed.model_dump(mode="json"),
                      status=InvocationStatus.COMPLETED, result=result, error=None, started_at=started)  # fmt: skip
        observation = project_result(call.id, call.name, result, ctx.result_observation_cap(),
                                     evaluation_required=False)  # fmt: skip
        ctx.usage.tool_invocations += 1
        ctx.usage.observation_bytes += observation.bytes
        ctx.trace.emit(ToolInvocation(
            tool_call_id=call.id, tool=call.name, scope=scope, invocation_status=InvocationStatus.COMPLETED,
            observation_bytes=observation.bytes, latency_ms=round((time.perf_counter() - t0) * 1000, 3),
            evidence_status=result.evidence_status, count=result.count, truncated=observation.truncated,
        ))  # fmt: skip
        return observation.text

    def _publish(self, ctx: RunContext, draft_text: str | None, error: str | None) -> ReleaseDecision:
        """The model's answer as the plain loop publishes it (no guard decides; EvidenceGuard's verdict recorded)."""
        stop_reason = ctx.tracker.stop_reason
        if ctx.cancellation.cancelled:
            return _released(ctx, ReleaseDecision(ReleaseOutcome.CANCELLED, None, stop_reason, None, None, None,
                                                  "run cancelled"))  # fmt: skip
        if draft_text is None:
            why = error or (f"stopped: {ctx.usage.budget_hit.value}" if ctx.usage.budget_hit else "no answer")
            return _released(ctx, ReleaseDecision(ReleaseOutcome.FAILED, None, stop_reason, None, None, None, why))
        parsed = parse_draft(draft_text)
        ctx.trace.emit(DraftReceived(draft_valid=parsed.error is None, detail=parsed.error))
        draft = parsed.draft
        if draft is None:
            return _released(ctx, ReleaseDecision(ReleaseOutcome.FAILED, None, stop_reason, None, None, None,
                                                  f"invalid answer: {parsed.error}"))  # fmt: skip
        if draft.conclusion is not None and draft.conclusion.strip():
            verdict = check_evidence(draft, ctx.store, ctx.config.min_excerpt_chars)
            checked = EvidenceCheck.PASSED if verdict.passed else EvidenceCheck.FAILED
            problems = None if verdict.passed else "; ".join(verdict.problems)[:300]
            ctx.trace.emit(EvidenceChecked(verdict=checked, detail=problems))
            why = "published unguarded" + ("" if verdict.passed else " (EvidenceGuard would have rejected it)")
            return _released(ctx, ReleaseDecision(ReleaseOutcome.SUCCESS, None, stop_reason, draft, None, None, why))
        # The fallback's kind follows the Harness's Release, so the two loops differ by the protocol and not by how a
        # fallback is named: something was checked (a completed call, empty results too) -> INSUFFICIENT_EVIDENCE;
        # nothing checked but context declared missing -> MISSING_REQUIRED_CONTEXT; neither -> FAILED.
        checked_any = any(isinstance(e, ToolInvocation) and e.invocation_status is InvocationStatus.COMPLETED
                          for e in ctx.trace.events)  # fmt: skip
        why = "the model reported no conclusion"
        if checked_any or draft.missing_info:
            kind = FallbackKind.INSUFFICIENT_EVIDENCE if checked_any else FallbackKind.MISSING_REQUIRED_CONTEXT
            return _released(ctx, ReleaseDecision(ReleaseOutcome.FALLBACK, kind, stop_reason, None, None, None, why))
        return _released(ctx, ReleaseDecision(ReleaseOutcome.FAILED, None, stop_reason, None, None, None, why))


plain_loop = PlainLoop()
"""The plain loop with no loop detector."""

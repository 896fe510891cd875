"""HarnessSession: the loop-facing half of the Harness, for `run_diagnosis` and for any agent loop.

A loop (the native one, an embedder's own, a framework adapter) asks the session for every model
call and hands it every tool call; the session owns everything else: run identity, budgets and
deadline, model-call accounting and retries, the stop decisions and their recording (once), the
tool-choice rule after STOP_REQUIRED, cancellation, and the hand-off to EvidenceGuard,
SemanticGuard and Release. A loop that goes through it gets exactly the accounting, events and
outcome of `run_diagnosis`::

    session = HarnessSession(tools, model_name=model.name)
    messages = session.initial_messages(task)
    while not session.ended:
        turn = session.complete(model, messages)
        if turn.message is None:          # a budget stop or a model failure: recorded, the loop ends
            break
        messages.append(turn.message)
        if not turn.message.tool_calls:   # the final text: read as the Draft
            session.receive_final(turn.message.content)
            break
        answers = session.handle_tool_calls(turn.message.tool_calls)
        messages.extend(ToolMessage(a.tool_call_id, a.observation.text) for a in answers.answers)
    result = session.finish(question=task.question, guard_model=model, messages=messages)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TextIO

from harness.config import HarnessConfig
from harness.context import BudgetUsage, CancellationToken, RunContext
from harness.contracts import (
    BudgetKind,
    HarnessControl,
    ModelErrorKind,
    ModelPurpose,
    RejectionReason,
    SchemaMode,
    ToolChoiceMode,
)
from harness.draft import DRAFT_JSON_SCHEMA, DraftParse, parse_draft
from harness.envelope import envelope_schema
from harness.interceptor import HarnessToolInterceptor, TurnResult
from harness.models.base import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ChatRequest,
    SystemMessage,
    ToolCallRequest,
    ToolSpec,
    UserMessage,
)
from harness.prompts import DEFAULT_SYSTEM_PROMPT, DiagnosisTask, render_task
from harness.release import ReleaseDecision, release
from harness.retry import DeadlineReached, ModelCallFailed, RetriesCutByBudget, Sleep, call_model
from harness.tools.base import BusinessTool
from harness.trace import DraftReceived, RunStarted, TraceEvent
from harness.transcript import TranscriptEntry

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

__all__ = ["HarnessSession", "ModelTurn", "RunResult", "tool_specs"]


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


@dataclass(frozen=True, slots=True)
class ModelTurn:
    """What one model call of the loop produced."""

    message: AssistantMessage | None
    """The answer (every tool call with an id), or None: the loop must end (a budget stop or a model
    failure, both already recorded)."""

    @property
    def final(self) -> bool:
        """The answer has no tool call: it is the final text, to be read as the Draft."""
        return self.message is not None and not self.message.tool_calls


def tool_specs(
    tools: Sequence[BusinessTool[Any]], mode: SchemaMode = SchemaMode.ADAPTIVE, pending: str | None = None
) -> tuple[ToolSpec, ...]:
    """Agent-facing specs: each business schema wrapped in the envelope (adaptive: for this pending state)."""
    return tuple(ToolSpec(t.name, t.description, envelope_schema(t.input_schema(), mode, pending)) for t in tools)


class HarnessSession:
    """One run, driven by any loop. Create it, ask it for model calls, hand it tool calls, `finish` it."""

    def __init__(
        self,
        tools: Sequence[BusinessTool[Any]],
        *,
        model_name: str,
        config: HarnessConfig | None = None,
        ctx: RunContext | None = None,
        cancellation: CancellationToken | None = None,
        sleep: Sleep = time.sleep,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        tracer: Tracer | None = None,
        event_log: TextIO | None = None,
    ) -> None:
        """Start a run (RUN_STARTED). `ctx`: a prepared context (else one from `config`/`cancellation`);
        `sleep`: the retry backoff wait; `system_prompt`: the prompt of `initial_messages`; `tracer`: an
        OpenTelemetry tracer the run's GenAI spans go to as they happen (`harness.otel`; needs the `otel` extra);
        `event_log`: a text stream every typed event is written to as it happens, one JSON line each
        (`harness.event_log`; `harness-bench import` reads it)."""
        self.ctx = ctx or RunContext.create(config, cancellation=cancellation)
        if tracer is not None:  # without a tracer OpenTelemetry is never imported and costs nothing
            from harness.otel import start_recording

            start_recording(self.ctx, tracer)
        if event_log is not None:
            from harness.event_log import EventLogWriter

            self.ctx.trace.also_listen(EventLogWriter(event_log, run_id=self.ctx.run_id, config=self.ctx.config))
        self._tools = tuple(tools)
        self._interceptor = HarnessToolInterceptor(self.ctx, {t.name: t for t in self._tools})
        self._sleep = sleep
        self._system_prompt = system_prompt
        self._t0 = time.perf_counter()
        self._ended = False
        self._auto_id = 0
        self._parsed: DraftParse | None = None
        self._error: str | None = None
        self._error_kind: ModelErrorKind | None = None
        self._result: RunResult | None = None
        self.turns = 0
        """Model turns that produced an answer."""
        self.ctx.trace.emit(RunStarted(model=model_name))

    # -- state ------------------------------------------------------------------------------
    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.ctx.run_id

    @property
    def usage(self) -> BudgetUsage:
        """Budget consumption so far."""
        return self.ctx.usage

    @property
    def events(self) -> tuple[TraceEvent, ...]:
        """The audit trace so far."""
        return self.ctx.trace.events

    @property
    def ended(self) -> bool:
        """No further model call: the loop ended (Draft, stop, budget, failure) or the run was cancelled."""
        return self._ended or self.ctx.cancellation.cancelled

    def cancel(self) -> None:
        """Cancel the run: no new model or backend call starts; `finish` releases CANCELLED."""
        self.ctx.cancellation.cancel()

    @property
    def tool_choice(self) -> ToolChoiceMode:
        """After STOP_REQUIRED the one permitted Draft must be writable: no forced tool call."""
        return ToolChoiceMode.NONE if self.ctx.tracker.stop_required_delivered else ToolChoiceMode.CONFIGURED

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The tools as the model sees them now (the envelope for the current pending state; the business schema
        alone with the envelope switched off)."""
        if self.ctx.config.ablate is HarnessControl.ENVELOPE:
            return tuple(ToolSpec(t.name, t.description, t.input_schema()) for t in self._tools)
        return tool_specs(self._tools, self.ctx.config.schema_mode, self.ctx.tracker.pending)

    def initial_messages(self, task: DiagnosisTask) -> list[ChatMessage]:
        """The system prompt and the task's user message."""
        return [SystemMessage(self._system_prompt), UserMessage(render_task(task))]

    # -- the model side ---------------------------------------------------------------------
    def request(self, messages: Sequence[ChatMessage]) -> ChatRequest | None:
        """The next diagnosis request, or None when a budget forbids another model call (the stop recorded)."""
        if self.ended:
            return None
        exhausted = self.ctx.model_budget_exhausted()
        if exhausted is not None:
            self._stop(exhausted)
            return None
        cfg = self.ctx.config
        return ChatRequest(
            tuple(messages),
            self.tool_specs(),
            ModelPurpose.DIAGNOSIS,
            cfg.model_timeout_seconds,
            self.tool_choice,
            DRAFT_JSON_SCHEMA,
        )

    def complete(self, model: ChatModel, messages: Sequence[ChatMessage]) -> ModelTurn:
        """One model turn through the Harness retry: every attempt counted and traced; a deadline or
        budget cut is a budget stop, every other failure ends the loop as the run's model error."""
        request = self.request(messages)
        if request is None:
            return ModelTurn(None)
        try:
            response = call_model(self.ctx, model, request, sleep=self._sleep, budget_check=self._budget_ok)
        except DeadlineReached as exc:  # the deadline cut the call: a budget stop, not a model failure
            self._stop(BudgetKind.DEADLINE, f"deadline reached during a model call ({exc.last})"[:300])
            return ModelTurn(None)
        except RetriesCutByBudget as exc:  # the retries used up a budget: a budget stop, not an endpoint error
            budget = self.ctx.model_budget_exhausted() or BudgetKind.MODEL_CALLS
            self._stop(budget, f"retries cut by the budget ({exc.last})"[:300])
            return ModelTurn(None)
        except ModelCallFailed as exc:
            self._error, self._error_kind = str(exc), exc.last.kind
            self._ended = True
            return ModelTurn(None)
        self.turns += 1
        message = response.message
        return ModelTurn(AssistantMessage(message.content or "", self._with_ids(message.tool_calls)))

    def receive_final(self, text: str | None) -> DraftParse:
        """The model's final text (no tool call): read as the Draft (DRAFT_RECEIVED); the loop ends."""
        parsed = parse_draft(text)
        self._parsed = parsed
        self._ended = True
        self.ctx.trace.emit(DraftReceived(draft_valid=parsed.error is None, detail=parsed.error))
        return parsed

    # -- the tool side ----------------------------------------------------------------------
    def handle_tool_calls(self, calls: Sequence[ToolCallRequest]) -> TurnResult:
        """Every tool call of one assistant message, answered in order (exactly one answer each).

        The token budget is re-checked first (the last model call may have used it up: then none runs).
        `ended` on the result: the loop must end (controlled stop, hard budget, cancellation)."""
        calls = self._with_ids(calls)
        if self.ctx.usage.total_tokens >= self.ctx.config.max_total_tokens:
            self._stop(BudgetKind.TOKENS, "token budget exhausted by the last model call")
            answers = self._interceptor.answer_unexecuted(
                calls, RejectionReason.BUDGET, "budget limit reached (TOKENS)"
            )
            return TurnResult(tuple(answers), True)
        outcome = self._interceptor.handle_turn(calls, self.turns)
        if outcome.ended:
            self._ended = True
        return outcome

    # -- the end ----------------------------------------------------------------------------
    def finish(self, *, question: str, guard_model: ChatModel, messages: Sequence[ChatMessage] = ()) -> RunResult:
        """Release the run's single outcome (EvidenceGuard, SemanticGuard, fallback) and return the result.

        `messages`: the loop's conversation, so observations it never sent are recorded as unsent.
        Calling it again returns the same result."""
        if self._result is not None:
            return self._result
        self._ended = True
        self.ctx.transcript.unsent(messages)
        decision = release(
            self.ctx,
            question=question,
            parsed=self._parsed,
            guard_model=guard_model,
            cancelled=self.ctx.cancellation.cancelled,
            loop_error=self._error,
        )
        self._result = RunResult(
            run_id=self.ctx.run_id,
            decision=decision,
            usage=self.ctx.usage,
            events=self.ctx.trace.events,
            turns=self.turns,
            draft_error=self._parsed.error if self._parsed else None,
            error=self._error or decision.call_error,  # a guard call's endpoint failure is not the model's answer
            wall_ms=round((time.perf_counter() - self._t0) * 1000, 3),
            error_kind=self._error_kind if self._error else decision.call_error_kind,
            transcript=self.ctx.transcript.entries,
        )
        return self._result

    # -- helpers ----------------------------------------------------------------------------
    def _budget_ok(self) -> bool:
        return self.ctx.model_budget_exhausted() is None

    def _stop(self, budget: BudgetKind, detail: str | None = None) -> None:
        self.ctx.record_budget_stop(budget, detail)
        self._ended = True

    def _with_ids(self, calls: Sequence[ToolCallRequest]) -> tuple[ToolCallRequest, ...]:
        """Every call with an id (the Harness assigns one where the model sent none)."""
        out: list[ToolCallRequest] = []
        for call in calls:
            if not call.id:
                self._auto_id += 1
                call = replace(call, id=f"call_harness_{self._auto_id}")
            out.append(call)
        return tuple(out)

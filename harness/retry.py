"""Harness-owned model retries (docs/architecture.md §8): the SDK never retries; only this does, on a stable
classification, with every attempt traced and counted. A new ReAct turn is never a retry."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from harness.context import RunContext
from harness.contracts import ModelErrorKind, ModelPurpose
from harness.models.base import ChatModel, ChatRequest, ModelCallError, ModelResponse
from harness.trace import ModelCall

Sleep = Callable[[float], None]


class ModelCallFailed(Exception):
    """Every allowed attempt failed (or the failure is not retryable)."""

    def __init__(self, last: ModelCallError, attempts: int) -> None:
        super().__init__(f"model call failed after {attempts} attempt(s): {last.kind.value}: {last}")
        self.last = last
        self.attempts = attempts


class DeadlineReached(ModelCallFailed):
    """The run's deadline, not the model, ended the call: a budget stop (BUDGET_LIMIT_REACHED / DEADLINE)."""


class RetriesCutByBudget(ModelCallFailed):
    """A retryable failure whose next attempt the run's budget forbids (the attempts used up the
    model-call or token budget): a budget stop, not an endpoint error."""


def call_model(
    ctx: RunContext,
    model: ChatModel,
    request: ChatRequest,
    *,
    sleep: Sleep = time.sleep,
    budget_check: Callable[[], bool] | None = None,
) -> ModelResponse:
    """Call `model`, retrying RATE_LIMIT / SERVER_ERROR / TIMEOUT / CONNECTION.

    Each attempt is a MODEL_CALL event and is counted in the usage (diagnosis attempts against
    the model-call budget). `budget_check` returning False stops further attempts.
    """
    cfg = ctx.config
    attempt = 0
    while True:
        # Every attempt gets what is left of the run's deadline at most: the deadline is a deadline.
        remaining = ctx.remaining_seconds()
        if remaining <= 0:
            raise DeadlineReached(ModelCallError(ModelErrorKind.TIMEOUT, "the run's deadline passed"), attempt)
        attempt += 1
        allowed = min(cfg.model_timeout_seconds, request.timeout_seconds)
        cut_by_deadline = remaining < allowed
        request = replace(request, timeout_seconds=min(allowed, remaining))
        if request.purpose is ModelPurpose.DIAGNOSIS:
            ctx.usage.model_calls += 1
        else:
            ctx.usage.guard_calls += 1
        t0 = time.perf_counter()
        ctx.transcript.request(request)
        try:
            response = model.complete(request)
        except ModelCallError as err:
            ctx.transcript.failure(request.purpose, err)
            ctx.trace.emit(
                ModelCall(
                    purpose=request.purpose,
                    attempt=attempt,
                    latency_ms=round((time.perf_counter() - t0) * 1000, 3),
                    error_kind=err.kind,
                    detail=str(err)[:300],
                )
            )
            if err.kind is ModelErrorKind.TIMEOUT and cut_by_deadline:
                raise DeadlineReached(err, attempt) from err
            if not err.kind.retryable or attempt >= cfg.max_model_attempts:
                raise ModelCallFailed(err, attempt) from err
            if budget_check is not None and not budget_check():
                raise RetriesCutByBudget(err, attempt) from err
            if ctx.cancellation.cancelled:  # Ctrl-C/SIGTERM: no backoff wait, no new attempt
                raise ModelCallFailed(err, attempt) from err
            wait = err.retry_after if err.retry_after is not None else cfg.retry_backoff_seconds * 2 ** (attempt - 1)
            wait = min(max(wait, 0.0), cfg.max_retry_wait_seconds, max(ctx.remaining_seconds(), 0.0))
            if ctx.remaining_seconds() <= wait:
                raise DeadlineReached(
                    ModelCallError(ModelErrorKind.TIMEOUT, f"deadline before retry: {err}"), attempt
                ) from err
            sleep(wait)
            continue
        ctx.transcript.response(request.purpose, response)
        usage = response.usage
        ctx.usage.input_tokens += usage.input_tokens
        ctx.usage.output_tokens += usage.output_tokens
        ctx.trace.emit(
            ModelCall(
                purpose=request.purpose,
                attempt=attempt,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                latency_ms=round((time.perf_counter() - t0) * 1000, 3),
                text_tool_calls=sum(c.written_as_text for c in response.message.tool_calls),
            )
        )
        return response

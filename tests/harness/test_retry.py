"""Harness-owned model retries (docs/architecture.md §8): `call_model` retries only a stable classification, counts
and traces every attempt, waits no longer than `max_retry_wait_seconds` or the deadline allows, and says why it gave
up."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from harness.config import HarnessConfig
from harness.context import RunContext
from harness.contracts import ModelErrorKind, ModelPurpose
from harness.models.base import AssistantMessage, ChatRequest, ModelCallError, ModelResponse, Usage, UserMessage
from harness.retry import DeadlineReached, ModelCallFailed, RetriesCutByBudget, call_model
from harness.trace import ModelCall

RETRYABLE = {
    ModelErrorKind.RATE_LIMIT,
    ModelErrorKind.SERVER_ERROR,
    ModelErrorKind.TIMEOUT,
    ModelErrorKind.CONNECTION,
    ModelErrorKind.NOT_A_COMPLETION,
}
ANSWER = ModelResponse(AssistantMessage("done"), Usage(input_tokens=11, output_tokens=5))


@dataclass
class FakeTime:
    """The run's deadline clock and the retry's `sleep` in one: sleeping moves the clock."""

    left: float
    """Seconds before the deadline."""
    sleeps: list[float] = field(default_factory=list)
    """Every wait `call_model` asked for, in order."""

    def remaining(self, deadline: float) -> float:
        return self.left

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.left -= seconds


@dataclass
class ScriptedOutcomes:
    """A real ChatModel: answers each request with the next outcome (an error is raised), recording requests."""

    outcomes: list[ModelCallError | ModelResponse]
    """What the next calls return or raise, in order; the last one repeats."""
    requests: list[ChatRequest] = field(default_factory=list)
    """Every request received."""
    on_call: list[Callable[[], None]] = field(default_factory=list)
    """Hooks run before answering (e.g. cancel the run mid-call)."""

    @property
    def name(self) -> str:
        return "scripted-outcomes"

    def complete(self, request: ChatRequest) -> ModelResponse:
        self.requests.append(request)
        for hook in self.on_call:
            hook()
        outcome = self.outcomes[min(len(self.requests) - 1, len(self.outcomes) - 1)]
        if isinstance(outcome, ModelCallError):
            raise outcome
        return outcome


def _ctx(time: FakeTime, **config: object) -> RunContext:
    return RunContext.create(HarnessConfig.model_validate(config), deadline_clock=time)


def _request(purpose: ModelPurpose = ModelPurpose.DIAGNOSIS, timeout: float = 60.0) -> ChatRequest:
    return ChatRequest((UserMessage("why?"),), purpose=purpose, timeout_seconds=timeout)


def _err(kind: ModelErrorKind, retry_after: float | None = None) -> ModelCallError:
    return ModelCallError(kind, f"{kind.value.lower()} from the endpoint", retry_after)


def _attempts(ctx: RunContext) -> list[tuple[int, ModelErrorKind | None]]:
    return [(e.attempt, e.error_kind) for e in ctx.trace.events if isinstance(e, ModelCall)]


# -- which failures retry ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(ModelErrorKind))
def test_only_the_stable_transient_kinds_are_retried(kind: ModelErrorKind) -> None:
    time = FakeTime(100.0)
    ctx = _ctx(time)
    model = ScriptedOutcomes([_err(kind), ANSWER])
    if kind in RETRYABLE:
        assert call_model(ctx, model, _request(), sleep=time.sleep) is ANSWER
        assert _attempts(ctx) == [(1, kind), (2, None)]
        assert time.sleeps == [0.5]
    else:
        with pytest.raises(ModelCallFailed) as info:
            call_model(ctx, model, _request(), sleep=time.sleep)
        assert type(info.value) is ModelCallFailed and info.value.attempts == 1 and info.value.last.kind is kind
        assert len(model.requests) == 1 and time.sleeps == []


def test_the_kinds_classification_matches_the_contract() -> None:
    assert {k for k in ModelErrorKind if k.retryable} == RETRYABLE


# -- attempts are counted and traced -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("purpose", "diagnosis", "guard"), [(ModelPurpose.DIAGNOSIS, 3, 0), (ModelPurpose.SEMANTIC_GUARD, 0, 3)]
)
def test_every_attempt_counts_against_its_purpose_and_tokens_only_when_answered(
    purpose: ModelPurpose, diagnosis: int, guard: int
) -> None:
    time = FakeTime(100.0)
    ctx = _ctx(time)
    model = ScriptedOutcomes([_err(ModelErrorKind.RATE_LIMIT), _err(ModelErrorKind.SERVER_ERROR), ANSWER])
    call_model(ctx, model, _request(purpose), sleep=time.sleep)
    assert (ctx.usage.model_calls, ctx.usage.guard_calls) == (diagnosis, guard)
    assert (ctx.usage.input_tokens, ctx.usage.output_tokens) == (11, 5)
    events = [e for e in ctx.trace.events if isinstance(e, ModelCall)]
    assert [(e.purpose, e.attempt, e.error_kind) for e in events] == [
        (purpose, 1, ModelErrorKind.RATE_LIMIT),
        (purpose, 2, ModelErrorKind.SERVER_ERROR),
        (purpose, 3, None),
    ]
    assert events[-1].input_tokens == 11 and events[0].input_tokens is None
    assert events[0].detail == "rate_limit from the endpoint"


def test_attempts_stop_at_max_model_attempts_with_exponential_backoff() -> None:
    time = FakeTime(1_000.0)
    ctx = _ctx(time, max_model_attempts=4, retry_backoff_seconds=0.25, max_retry_wait_seconds=100)
    model = ScriptedOutcomes([_err(ModelErrorKind.CONNECTION)])
    with pytest.raises(ModelCallFailed) as info:
        call_model(ctx, model, _request(), sleep=time.sleep)
    assert type(info.value) is ModelCallFailed and info.value.attempts == 4
    assert "after 4 attempt(s): CONNECTION" in str(info.value)
    assert len(model.requests) == 4 and ctx.usage.model_calls == 4
    assert time.sleeps == [0.25, 0.5, 1.0], "no wait after the last attempt"


# -- how long it waits -------------------------------------------------------------------------------------------------
def test_backoff_is_capped_by_max_retry_wait_seconds() -> None:
    time = FakeTime(1_000.0)
    ctx = _ctx(time, max_model_attempts=5, retry_backoff_seconds=3, max_retry_wait_seconds=10)
    call_model(ctx, ScriptedOutcomes([_err(ModelErrorKind.TIMEOUT)] * 4 + [ANSWER]), _request(), sleep=time.sleep)
    assert time.sleeps == [3, 6, 10, 10]


@pytest.mark.parametrize(("retry_after", "waited"), [(7.0, 7.0), (0.0, 0.0), (-3.0, 0.0), (500.0, 20.0)])
def test_retry_after_replaces_the_backoff_within_the_cap(retry_after: float, waited: float) -> None:
    time = FakeTime(1_000.0)
    ctx = _ctx(time)
    call_model(
        ctx, ScriptedOutcomes([_err(ModelErrorKind.RATE_LIMIT, retry_after), ANSWER]), _request(), sleep=time.sleep
    )
    assert time.sleeps == [waited]


def test_a_wait_the_deadline_cannot_afford_is_a_deadline_stop_without_sleeping() -> None:
    time = FakeTime(5.0)
    ctx = _ctx(time)
    model = ScriptedOutcomes([_err(ModelErrorKind.RATE_LIMIT, retry_after=8.0), ANSWER])
    with pytest.raises(DeadlineReached) as info:
        call_model(ctx, model, _request(), sleep=time.sleep)
    assert info.value.attempts == 1 and info.value.last.kind is ModelErrorKind.TIMEOUT
    assert "deadline before retry" in str(info.value.last)
    assert time.sleeps == [] and len(model.requests) == 1


def test_a_wait_that_fits_the_deadline_is_taken() -> None:
    time = FakeTime(5.0)
    ctx = _ctx(time)
    assert call_model(
        ctx, ScriptedOutcomes([_err(ModelErrorKind.RATE_LIMIT, 4.0), ANSWER]), _request(), sleep=time.sleep
    )
    assert time.sleeps == [4.0]


# -- the deadline ------------------------------------------------------------------------------------------------------
def test_no_attempt_starts_after_the_deadline() -> None:
    time = FakeTime(0.0)
    ctx = _ctx(time)
    model = ScriptedOutcomes([ANSWER])
    with pytest.raises(DeadlineReached) as info:
        call_model(ctx, model, _request(), sleep=time.sleep)
    assert info.value.attempts == 0 and model.requests == [] and ctx.usage.model_calls == 0


def test_each_attempt_gets_at_most_what_is_left_of_the_deadline() -> None:
    time = FakeTime(100.0)
    ctx = _ctx(time, model_timeout_seconds=30)
    model = ScriptedOutcomes([ANSWER])
    call_model(ctx, model, _request(timeout=45), sleep=time.sleep)
    call_model(ctx, model, _request(timeout=12), sleep=time.sleep)
    time.left = 4.5
    call_model(ctx, model, _request(timeout=45), sleep=time.sleep)
    assert [r.timeout_seconds for r in model.requests] == [30, 12, 4.5]


def test_a_timeout_of_an_attempt_cut_by_the_deadline_is_the_deadline() -> None:
    time = FakeTime(4.0)
    ctx = _ctx(time, model_timeout_seconds=30)
    model = ScriptedOutcomes([_err(ModelErrorKind.TIMEOUT), ANSWER])
    with pytest.raises(DeadlineReached) as info:
        call_model(ctx, model, _request(), sleep=time.sleep)
    assert info.value.attempts == 1 and info.value.last.kind is ModelErrorKind.TIMEOUT
    assert len(model.requests) == 1 and time.sleeps == []


def test_a_timeout_of_an_attempt_with_its_full_timeout_is_retried() -> None:
    time = FakeTime(100.0)
    ctx = _ctx(time, model_timeout_seconds=30)
    assert call_model(ctx, ScriptedOutcomes([_err(ModelErrorKind.TIMEOUT), ANSWER]), _request(), sleep=time.sleep)


# -- the budget and cancellation ---------------------------------------------------------------------------------------
def test_a_retry_the_budget_forbids_is_cut_by_the_budget() -> None:
    time = FakeTime(100.0)
    ctx = _ctx(time)
    checks: list[int] = []

    def budget_check() -> bool:
        checks.append(ctx.usage.model_calls)
        return ctx.usage.model_calls < 2

    model = ScriptedOutcomes([_err(ModelErrorKind.SERVER_ERROR)])
    with pytest.raises(RetriesCutByBudget) as info:
        call_model(ctx, model, _request(), sleep=time.sleep, budget_check=budget_check)
    assert info.value.attempts == 2 and info.value.last.kind is ModelErrorKind.SERVER_ERROR
    assert checks == [1, 2] and len(model.requests) == 2 and time.sleeps == [0.5]


def test_the_budget_is_not_consulted_for_a_failure_that_is_not_retried() -> None:
    time = FakeTime(100.0)
    ctx = _ctx(time)
    with pytest.raises(ModelCallFailed) as info:
        call_model(
            ctx,
            ScriptedOutcomes([_err(ModelErrorKind.CLIENT_ERROR)]),
            _request(),
            sleep=time.sleep,
            budget_check=lambda: False,
        )
    assert type(info.value) is ModelCallFailed


def test_cancellation_stops_retries_with_no_wait() -> None:
    time = FakeTime(100.0)
    ctx = _ctx(time)
    model = ScriptedOutcomes([_err(ModelErrorKind.RATE_LIMIT), ANSWER], on_call=[ctx.cancellation.cancel])
    with pytest.raises(ModelCallFailed) as info:
        call_model(ctx, model, _request(), sleep=time.sleep)
    assert type(info.value) is ModelCallFailed and info.value.attempts == 1
    assert len(model.requests) == 1 and time.sleeps == []


def test_the_stop_kinds_are_model_call_failures() -> None:
    assert issubclass(DeadlineReached, ModelCallFailed) and issubclass(RetriesCutByBudget, ModelCallFailed)
    assert not issubclass(DeadlineReached, RetriesCutByBudget) and not issubclass(RetriesCutByBudget, DeadlineReached)

"""SemanticGuard: one isolated model call — no tools, no history, no memory (docs/architecture.md §7.3).

It sees only the user's question, the Draft's user-visible claims and the verified evidence,
and answers SUPPORTED or UNSUPPORTED. Anything it cannot be parsed as fails closed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from harness.context import RunContext
from harness.contracts import BudgetKind, ModelErrorKind, ModelPurpose, SemanticVerdict
from harness.draft import Draft
from harness.evidence_guard import VerifiedEvidence
from harness.models.base import ChatModel, ChatRequest, SystemMessage, UserMessage
from harness.retry import DeadlineReached, ModelCallFailed, RetriesCutByBudget, call_model

GUARD_MARKER = "[harness-bench:semantic-guard]"
"""Opens the SemanticGuard's system prompt: an OpenAI-compatible server (a simulator, a recording proxy) tells the
guard's isolated call from a diagnosis call by it."""
GUARD_SYSTEM_PROMPT = (
    f"{GUARD_MARKER} You review a diagnosis report. You receive the user's question, the report's "
    "conclusion and claims, and the only evidence that was verified to exist. Decide whether the "
    "evidence supports the conclusion without over-interpretation. Answer with JSON only: "
    '{"verdict": "SUPPORTED" | "UNSUPPORTED", "reason": "<one sentence>"}'
)
_WORD = re.compile(r"\b(UNSUPPORTED|SUPPORTED)\b")


@dataclass(frozen=True, slots=True)
class SemanticGuardResult:
    """The verdict and a readable reason."""

    verdict: SemanticVerdict
    """SUPPORTED or UNSUPPORTED."""
    reason: str
    """Why (the guard's words, or why it failed closed)."""
    call_error: str | None = None
    """The guard call's failure (endpoint, network, replay) when that, not the guard, decided UNSUPPORTED."""
    budget: BudgetKind | None = None
    """The run budget that forbade the guard's call, cut it (the deadline) or its next retry, when that decided
    UNSUPPORTED: Release records it as the run's budget stop."""
    call_error_kind: ModelErrorKind | None = None
    """The classification of `call_error` (None without one)."""


def build_guard_request(
    question: str, draft: Draft, evidence: tuple[VerifiedEvidence, ...], timeout: float
) -> ChatRequest:
    """The guard's single request: nothing from the diagnosis conversation."""
    payload = {
        "question": question,
        "conclusion": draft.conclusion,
        "claims": [c.statement for c in draft.claims],
        "verified_evidence": [{"tool_call_id": e.tool_call_id, "tool": e.tool, "excerpt": e.excerpt} for e in evidence],
    }
    return ChatRequest(
        messages=(SystemMessage(GUARD_SYSTEM_PROMPT), UserMessage(json.dumps(payload, ensure_ascii=False))),
        tools=(),
        purpose=ModelPurpose.SEMANTIC_GUARD,
        timeout_seconds=timeout,
    )


def parse_verdict(text: str | None) -> SemanticGuardResult:
    """Parse the guard's answer; unparseable or ambiguous -> UNSUPPORTED."""
    if not text or not text.strip():
        return SemanticGuardResult(SemanticVerdict.UNSUPPORTED, "empty verdict (fail closed)")
    body = text.strip().strip("`")
    if body.startswith("json"):
        body = body[4:]
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        data = None
    if isinstance(data, dict):
        raw = data.get("verdict")
        reason = data.get("reason")
        if raw in (SemanticVerdict.SUPPORTED.value, SemanticVerdict.UNSUPPORTED.value):
            return SemanticGuardResult(SemanticVerdict(raw), str(reason or "")[:300])
        return SemanticGuardResult(SemanticVerdict.UNSUPPORTED, f"unparseable verdict {raw!r} (fail closed)")
    words = set(_WORD.findall(text.upper()))
    if len(words) == 1:
        return SemanticGuardResult(SemanticVerdict(words.pop()), text.strip()[:300])
    return SemanticGuardResult(SemanticVerdict.UNSUPPORTED, "unparseable verdict (fail closed)")


def review(
    ctx: RunContext, model: ChatModel, question: str, draft: Draft, evidence: tuple[VerifiedEvidence, ...]
) -> SemanticGuardResult:
    """Ask the guard once (Harness retries on transient errors); failures fail closed.

    The call counts against the run's model-call and token budgets and its deadline: with none left,
    the conclusion cannot be verified and fails closed.
    """
    exhausted = ctx.guard_budget_exhausted()
    if exhausted is not None:
        return SemanticGuardResult(
            SemanticVerdict.UNSUPPORTED,
            f"no {exhausted.value} budget left for the SemanticGuard call (fail closed)",
            budget=exhausted,
        )
    request = build_guard_request(question, draft, evidence, ctx.config.model_timeout_seconds)
    try:
        response = call_model(ctx, model, request, budget_check=lambda: ctx.guard_budget_exhausted() is None)
    except DeadlineReached as exc:  # the run's deadline, a budget: not an infrastructure failure
        return SemanticGuardResult(
            SemanticVerdict.UNSUPPORTED,
            f"guard call cut by the deadline ({exc.last}) (fail closed)",
            budget=BudgetKind.DEADLINE,
        )
    except RetriesCutByBudget as exc:  # the retries used up the run's budget: a budget stop, not an endpoint error
        budget = ctx.guard_budget_exhausted() or BudgetKind.MODEL_CALLS
        return SemanticGuardResult(
            SemanticVerdict.UNSUPPORTED,
            f"no {budget.value} budget left to retry the SemanticGuard call ({exc.last.kind.value}) (fail closed)",
            budget=budget,
        )
    except ModelCallFailed as exc:
        # Fails closed, and says so: a verdict that came from a dead endpoint must not read as the guard's
        return SemanticGuardResult(
            SemanticVerdict.UNSUPPORTED,
            f"guard call failed: {exc.last.kind.value} (fail closed)",
            f"SemanticGuard {exc}",
            call_error_kind=exc.last.kind,
        )
    return parse_verdict(response.message.content)

"""SemanticGuard: one isolated call, no tools, no history; unparseable fails closed."""

from __future__ import annotations

import pytest

from harness.config import HarnessConfig
from harness.context import RunContext
from harness.contracts import ModelErrorKind, ModelPurpose, SemanticVerdict
from harness.draft import Draft
from harness.evidence_guard import VerifiedEvidence
from harness.models.base import AssistantMessage, ChatRequest, ModelCallError, ModelResponse, SystemMessage
from harness.semantic_guard import parse_verdict, review


@pytest.mark.parametrize(
    ("text", "verdict"),
    [
        ('{"verdict": "SUPPORTED", "reason": "ok"}', SemanticVerdict.SUPPORTED),
        ('{"verdict": "UNSUPPORTED"}', SemanticVerdict.UNSUPPORTED),
        ('```json\n{"verdict": "SUPPORTED"}\n```', SemanticVerdict.SUPPORTED),
        ("SUPPORTED", SemanticVerdict.SUPPORTED),
        ("I think it is unsupported.", SemanticVerdict.UNSUPPORTED),
        ('{"verdict": "PROBABLY"}', SemanticVerdict.UNSUPPORTED),
        ("SUPPORTED or UNSUPPORTED, hard to say", SemanticVerdict.UNSUPPORTED),
        ("", SemanticVerdict.UNSUPPORTED),
        (None, SemanticVerdict.UNSUPPORTED),
        ("maybe", SemanticVerdict.UNSUPPORTED),
    ],
)
def test_parse_verdict_fails_closed(text: str | None, verdict: SemanticVerdict) -> None:
    assert parse_verdict(text).verdict is verdict


class Recorder:
    name = "recorder"

    def __init__(self, answer: str | Exception) -> None:
        self.answer = answer
        self.requests: list[ChatRequest] = []

    def complete(self, request: ChatRequest) -> ModelResponse:
        self.requests.append(request)
        if isinstance(self.answer, Exception):
            raise self.answer
        return ModelResponse(AssistantMessage(self.answer))


DRAFT = Draft.model_validate({"conclusion": "pool exhausted", "claims": [{"statement": "s", "citations": []}]})
EVIDENCE = (VerifiedEvidence("call_1", "logs", "pool exhausted"),)


def test_guard_request_is_isolated() -> None:
    model = Recorder('{"verdict": "SUPPORTED"}')
    ctx = RunContext.create()
    result = review(ctx, model, "why?", DRAFT, EVIDENCE)
    assert result.verdict is SemanticVerdict.SUPPORTED
    (req,) = model.requests
    assert req.tools == () and req.purpose is ModelPurpose.SEMANTIC_GUARD
    assert len(req.messages) == 2 and isinstance(req.messages[0], SystemMessage)
    assert "pool exhausted" in req.messages[1].content and "call_1" in req.messages[1].content
    assert ctx.usage.guard_calls == 1 and ctx.usage.model_calls == 0


def test_guard_model_failure_fails_closed_after_retries() -> None:
    model = Recorder(ModelCallError(ModelErrorKind.SERVER_ERROR, "boom"))
    ctx = RunContext.create(HarnessConfig(retry_backoff_seconds=0, max_model_attempts=2))
    result = review(ctx, model, "why?", DRAFT, EVIDENCE)
    assert result.verdict is SemanticVerdict.UNSUPPORTED and "SERVER_ERROR" in result.reason
    assert len(model.requests) == 2

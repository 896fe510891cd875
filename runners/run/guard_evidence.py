"""What the SemanticGuard is shown for a case, taken from the case's reference run: the question and the verified
evidence (each cited excerpt that passed the EvidenceGuard, with its call and tool), exactly as Release hands them to
the guard. `guard-check` judges a labelled conclusion against it through the guard's own request builder
(`harness.build_guard_request`), so a measured guard reads what it would read in a run, with the labelled conclusion in
place of the reference Draft's.

The reference run is the case's scripted trajectory under the default settings; its guard call is answered by a
stand-in that records the request and says SUPPORTED (the run is not judged). A case whose reference run never asks
the guard (no conclusion, or citations the EvidenceGuard refuses) shows it nothing: it cannot be used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from harness import (
    AssistantMessage,
    ChatRequest,
    Draft,
    ModelPurpose,
    ModelResponse,
    UserMessage,
    VerifiedEvidence,
    build_guard_request,
)
from runners.domain.case_model import EvalCase

__all__ = ["GuardEvidence", "guard_evidence", "guard_request", "unusable_for_guard"]


@dataclass(frozen=True, slots=True)
class GuardEvidence:
    """What the SemanticGuard is shown for one case, but the Draft."""

    question: str
    """The user's question."""
    evidence: tuple[VerifiedEvidence, ...]
    """The reference Draft's verified citations, in the order Release passes them."""


@dataclass(slots=True)
class _Recorder:
    """A guard model that keeps the requests it is sent and answers SUPPORTED."""

    requests: list[ChatRequest] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "guard-evidence-recorder"

    def complete(self, request: ChatRequest) -> ModelResponse:
        self.requests.append(request)
        return ModelResponse(AssistantMessage('{"verdict": "SUPPORTED", "reason": "recorded"}'))


def _evidence_of(request: ChatRequest) -> GuardEvidence:
    user = next(m for m in request.messages if isinstance(m, UserMessage))
    payload = json.loads(user.content)
    evidence = tuple(VerifiedEvidence(e["tool_call_id"], e["tool"], e["excerpt"]) for e in payload["verified_evidence"])
    return GuardEvidence(question=payload["question"], evidence=evidence)


def guard_evidence(case: EvalCase) -> GuardEvidence | None:
    """What the guard is shown for `case` (None: its reference run never asks the guard). Runs the case once: a
    caller that asks again for the same case keeps the answer."""
    from runners.run.case_runner import run_case  # the case runner pulls in the whole harness run

    recorder = _Recorder()
    run_case(case, guard_model=recorder)
    guard_calls = [r for r in recorder.requests if r.purpose is ModelPurpose.SEMANTIC_GUARD]
    return _evidence_of(guard_calls[-1]) if guard_calls else None


def unusable_for_guard(found: GuardEvidence | None) -> str | None:
    """Why a case with `found` (its `guard_evidence`) cannot be used to measure the guard (None: it can)."""
    if found is None:
        return "shows the SemanticGuard nothing: its reference run never asks the guard"
    if not found.evidence:
        return "shows the SemanticGuard no verified evidence"
    return None


def guard_request(evidence: GuardEvidence, conclusion: str, timeout_seconds: float) -> ChatRequest:
    """The guard's request for `conclusion` against `evidence`, built by the Harness's own builder (a Draft with the
    conclusion alone: the labelled set judges the conclusion, not an agent's claims)."""
    return build_guard_request(evidence.question, Draft(conclusion=conclusion), evidence.evidence, timeout_seconds)

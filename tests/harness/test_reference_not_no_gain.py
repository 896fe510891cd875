"""docs/architecture.md §3: a REFERENCE-only knowledge-base hit is NOT automatically NO_GAIN — it is pending the
model's own evaluation, and a GAINED verdict on it keeps the diagnosis going."""

from __future__ import annotations

import json

from harness.config import HarnessConfig
from harness.context import RunContext
from harness.contracts import GainProducer, InformationGain, Relevance
from harness.interceptor import HarnessToolInterceptor
from harness.models.base import ToolCallRequest
from harness.trace import GainApplied, ToolInvocation
from runners.domain.tools.kb_search import KbDocument, KnowledgeBaseSearch

DOCS = [
    KbDocument(doc_id="runbook", title="Gateway operations runbook",
               text="# Maintenance\n\nScheduled maintenance of the payment gateway happens on Sundays "
                    "01:00-03:00 UTC.\n\n# Escalation\n\nPage the gateway on-call for sustained error rates."),
    KbDocument(doc_id="faq", title="Merchant FAQ", text="# Refunds\n\nRefunds settle within five business days."),
    KbDocument(doc_id="glossary", title="Glossary",
               text="# Terms\n\nAn acquirer processes card payments for merchants."),
]  # fmt: skip


def test_reference_hit_is_pending_not_harness_no_gain() -> None:
    tool = KnowledgeBaseSearch(DOCS)
    ctx = RunContext.create(HarnessConfig(no_gain_threshold=1))
    icp = HarnessToolInterceptor(ctx, {tool.name: tool})
    out = icp.handle(ToolCallRequest("c1", "kb_search", json.dumps({"input": {"query": "gateway maintenance"}})), 1)
    body = json.loads(out.observation.text)
    assert body["evidence_status"] == "EVIDENCE"
    assert {r["relevance"] for r in body["records"]} == {Relevance.REFERENCE.value}, body["records"]
    # threshold 1 would saturate on any NO_GAIN: nothing was applied, the model must judge it
    assert ctx.tracker.pending == "c1" and ctx.tracker.consecutive_no_gain == 0
    assert body["evaluation_required"] is True and "control" not in body
    assert not ctx.trace.of(GainApplied)
    second = ToolCallRequest(
        "c2", "kb_search",
        json.dumps({"previous_observation": {"tool_call_id": "c1", "information_gain": "GAINED"},
                    "input": {"query": "escalation on-call"}}),
    )  # fmt: skip
    icp.handle(second, 2)
    (applied,) = ctx.trace.of(GainApplied)
    assert (applied.gain, applied.producer) == (InformationGain.GAINED, GainProducer.AGENT)
    assert len(ctx.trace.of(ToolInvocation)) == 2

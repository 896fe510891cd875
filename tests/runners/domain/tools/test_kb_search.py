"""kb_search: BM25 over Markdown chunks, STRONG/REFERENCE relevance, Chinese bigrams, cached index."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.contracts import EvidenceStatus, JsonValue, Relevance
from harness.tools.base import ToolInputError, ToolResult
from runners.domain.tools.kb_search import (
    DEFAULT_MIN_SCORE,
    MAX_CHUNK_CHARS,
    KbDocument,
    KnowledgeBaseSearch,
    chunk_markdown,
    tokenize,
)

GATEWAY_RUNBOOK = """# Payment gateway timeouts

## Symptoms

Checkout requests fail with error code GW_TIMEOUT after 3000 ms. The gateway returns HTTP 504 to the merchant
and the order stays in PENDING until the reconciliation job closes it.

## Likely causes

1. The acquirer (card network connector) responds slowly; check `acquirer_latency_p99` on the gateway dashboard.
2. The outbound HTTP connection pool is exhausted: log lines say `connection pool exhausted, waiting for lease`.
3. A recent gateway deploy lowered `upstream.timeout_ms`.

## Diagnosis

Search the gateway logs for GW_TIMEOUT in the incident window and group by tenant. If a single tenant dominates,
look at its routing rule; if all tenants are affected, the acquirer or the connection pool is the suspect.

## Mitigation

Raise the pool size with the `gateway.pool.max` flag, or fail over to the secondary acquirer route.
"""

SETTLEMENT_GUIDE = """# Settlement and reconciliation

## Daily settlement batch

The settlement service builds one batch per tenant and currency at 02:00 UTC. Each batch sums captured payments
minus refunds and fees, and posts a payout instruction to the bank.

## Reconciliation mismatches

A mismatch means the bank statement total differs from the batch total. The usual cause is a refund captured
after the batch cut-off, or a currency conversion rounding difference on multi-currency tenants.

## Re-running a batch

Re-run only after the mismatch is explained; the settlement service refuses a second payout for the same batch id.
"""

RISK_NOTES = """# Risk engine rules

## Rule evaluation

Every payment is scored by the risk engine before authorisation. Scores above the tenant threshold are rejected with
error code RISK_REJECT; borderline scores go to manual review.

## False positives after rule deploys

A burst of RISK_REJECT for one tenant right after a rule deploy usually means the new velocity rule is too strict.
Roll back the rule version in the risk console and notify the tenant.
"""

NOTIFICATION_NOTES = """# Merchant notifications

## Webhook delivery

The notification service delivers payment status webhooks to the merchant endpoint and retries with exponential
backoff for 24 hours. A payment status change is only notified once it is final.

## Failed deliveries

HTTP 4xx from the merchant is not retried except 429. Check the notification logs for the webhook id.
"""

ORDER_NOTES = """# Order lifecycle

Orders move from CREATED to PENDING when a payment starts, then to PAID or FAILED when the payment status is final.
An order stuck in PENDING for more than 30 minutes is closed by the reconciliation job.
"""

ZH_REFUND = """# 退款处理手册

## 退款失败

退款请求返回错误码 REFUND_DECLINED 时，通常是原交易已经超过可退款期限，或者商户余额不足。请先在结算系统核对商户余额。

## 重复退款

同一订单出现两次退款，一般是通知服务重试导致的幂等键冲突。需要检查退款流水里的幂等键是否一致。
"""

ZH_GATEWAY = """# 支付网关超时排查

## 现象

支付网关在三秒后返回超时，商户看到504错误，订单停留在待支付状态。

## 排查步骤

先查看网关日志中的超时记录，再检查收单机构的响应延迟和连接池使用率。连接池耗尽时日志会出现等待连接的告警。
"""

DOCS = (
    KbDocument(doc_id="rb-gateway-timeout", title="Gateway timeout runbook", text=GATEWAY_RUNBOOK),
    KbDocument(doc_id="guide-settlement", title="Settlement guide", text=SETTLEMENT_GUIDE),
    KbDocument(doc_id="notes-risk", title="Risk engine notes", text=RISK_NOTES),
    KbDocument(doc_id="notes-notification", title="Notification service notes", text=NOTIFICATION_NOTES),
    KbDocument(doc_id="notes-order", title="Order lifecycle", text=ORDER_NOTES),
    KbDocument(doc_id="zh-refund", title="退款处理手册", text=ZH_REFUND),
    KbDocument(doc_id="zh-gateway", title="支付网关超时排查", text=ZH_GATEWAY),
)


def call(tool: KnowledgeBaseSearch, raw: Mapping[str, JsonValue]) -> ToolResult:
    """What the Harness does: validate, then run."""
    return tool.run(tool.parse_input(raw))


@pytest.fixture(scope="module")
def kb() -> KnowledgeBaseSearch:
    return KnowledgeBaseSearch(DOCS)


# --- relevance -----------------------------------------------------------------------------------


def test_several_specific_terms_give_a_strong_hit_on_the_right_chunk(kb: KnowledgeBaseSearch) -> None:
    result = call(kb, {"query": "gateway connection pool exhausted acquirer timeout"})

    assert result.evidence_status is EvidenceStatus.EVIDENCE
    top = result.records[0]
    assert (top["doc_id"], top["chunk_id"]) == ("rb-gateway-timeout", "rb-gateway-timeout#1")
    assert "connection pool is exhausted" in str(top["text"])
    assert result.relevance[0] is Relevance.STRONG


def test_error_code_and_rule_terms_are_strong(kb: KnowledgeBaseSearch) -> None:
    result = call(kb, {"query": "RISK_REJECT velocity rule deploy", "top_k": 1})
    assert result.records[0]["chunk_id"] == "notes-risk#1"
    assert result.relevance == (Relevance.STRONG,)


def test_one_or_two_generic_words_are_only_reference(kb: KnowledgeBaseSearch) -> None:
    for query in ("payment status", "tenant", "payment"):
        result = call(kb, {"query": query, "top_k": 10})
        assert result.evidence_status is EvidenceStatus.EVIDENCE, query
        assert set(result.relevance) == {Relevance.REFERENCE}, query


def test_unrelated_query_is_no_evidence(kb: KnowledgeBaseSearch) -> None:
    for query in ("kubernetes ingress certificate rotation", "the and of it", "。，！"):
        result = call(kb, {"query": query})
        assert result.evidence_status is EvidenceStatus.NO_EVIDENCE, query
        assert result.count == 0 and result.records == () and result.relevance == ()


def test_a_word_in_every_chunk_falls_below_the_floor() -> None:
    docs = [
        KbDocument(doc_id=f"d{i}", title=f"Platform note {i}", text=f"The platform {topic} runbook.")
        for i, topic in enumerate(["settlement", "refund", "risk", "gateway", "webhook", "ledger"])
    ]
    assert call(KnowledgeBaseSearch(docs), {"query": "platform"}).evidence_status is EvidenceStatus.NO_EVIDENCE
    # The hits exist; it is the floor that drops them.
    loose = KnowledgeBaseSearch(docs, min_score=1e-6)
    assert call(loose, {"query": "platform"}).count == 3
    assert call(KnowledgeBaseSearch(docs), {"query": "platform ledger"}).records[0]["doc_id"] == "d5"


def test_thresholds_are_constructor_parameters(kb: KnowledgeBaseSearch) -> None:
    query = {"query": "payment status"}
    assert call(KnowledgeBaseSearch(DOCS, strong_score=1.0), query).relevance[0] is Relevance.STRONG
    assert call(KnowledgeBaseSearch(DOCS, min_score=50.0, strong_score=60.0), query).count == 0
    with pytest.raises(ValueError):
        KnowledgeBaseSearch(DOCS, min_score=2.0, strong_score=1.0)
    assert DEFAULT_MIN_SCORE > 0


def test_repeating_a_word_does_not_raise_the_score(kb: KnowledgeBaseSearch) -> None:
    once = call(kb, {"query": "payment status"}).records
    many = call(kb, {"query": "payment payment payment status status"}).records
    assert [r["score"] for r in many] == [r["score"] for r in once]


# --- Chinese -------------------------------------------------------------------------------------


def test_chinese_query_finds_the_chinese_chunk(kb: KnowledgeBaseSearch) -> None:
    dup = call(kb, {"query": "重复退款 幂等键冲突", "top_k": 1})
    assert dup.records[0]["chunk_id"] == "zh-refund#1" and "幂等键" in str(dup.records[0]["text"])
    assert dup.relevance == (Relevance.STRONG,)

    timeout = call(kb, {"query": "支付网关超时", "top_k": 1})
    assert timeout.records[0]["doc_id"] == "zh-gateway"

    steps = call(kb, {"query": "连接池耗尽", "top_k": 1})
    assert steps.records[0]["chunk_id"] == "zh-gateway#1"


def test_tokenizer_bigrams_cjk_and_keeps_codes() -> None:
    assert tokenize("网关超时") == ["网关", "关超", "超时"]
    assert tokenize("The GW_TIMEOUT on 支付网关") == ["gw_timeout", "gw", "timeout", "支付", "付网", "网关"]
    assert tokenize("单") == ["单"]


# --- records, truncation, scope ------------------------------------------------------------------


def test_records_have_the_documented_shape(kb: KnowledgeBaseSearch) -> None:
    result = call(kb, {"query": "settlement batch mismatch", "top_k": 2})
    assert result.count == len(result.records) == len(result.relevance) == 2
    for record in result.records:
        assert set(record) == {"doc_id", "title", "chunk_id", "text", "score"}
        assert isinstance(record["score"], float) and round(record["score"], 3) == record["score"]
    scores = [float(str(r["score"])) for r in result.records]
    assert scores == sorted(scores, reverse=True)
    assert result.records[0]["title"] == "Settlement guide"
    json.dumps(result.records, ensure_ascii=False)


def test_top_k_caps_and_sets_truncated(kb: KnowledgeBaseSearch) -> None:
    capped = call(kb, {"query": "gateway acquirer timeout", "top_k": 1})
    assert capped.count == 1 and capped.truncated

    wide = call(kb, {"query": "gateway acquirer timeout", "top_k": 10})
    assert wide.count > 1 and not wide.truncated
    assert wide.records[0] == capped.records[0]


def test_scope_ignores_case_and_whitespace_but_not_wording_or_top_k(kb: KnowledgeBaseSearch) -> None:
    def scope(raw: Mapping[str, JsonValue]) -> str:
        return kb.normalize_scope(kb.parse_input(raw))

    base = scope({"query": "GW_TIMEOUT connection pool"})
    assert base == '{"query":"gw_timeout connection pool","top_k":3}'
    assert scope({"top_k": 3, "query": "  gw_timeout\n CONNECTION   Pool "}) == base
    assert scope({"query": "GW_TIMEOUT connection pool", "top_k": 4}) != base
    assert scope({"query": "GW_TIMEOUT connection pools"}) != base


@settings(max_examples=60, deadline=None)
@given(
    cases=st.lists(st.booleans(), min_size=4, max_size=4),
    gaps=st.lists(st.sampled_from([" ", "  ", "\t", "\n", " \n "]), min_size=5, max_size=5),
)
def test_property_case_and_whitespace_variants_share_scope_and_result(cases: list[bool], gaps: list[str]) -> None:
    kb = KnowledgeBaseSearch(DOCS)
    words = ["Acquirer", "CONNECTION", "pool", "重复退款"]
    variant = gaps[0] + "".join(
        (w.upper() if up else w.lower()) + g for w, up, g in zip(words, cases, gaps[1:], strict=True)
    )
    canonical = " ".join(w.lower() for w in words)
    a, b = kb.parse_input({"query": variant}), kb.parse_input({"query": canonical})
    assert kb.normalize_scope(a) == kb.normalize_scope(b)
    assert kb.run(a).records == kb.run(b).records


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 501}, "query"),
        ({"query": "gateway", "top_k": 0}, "top_k"),
        ({"query": "gateway", "top_k": 11}, "top_k"),
        ({"query": "gateway", "k": 3}, "k"),
        ({}, "query"),
    ],
)
def test_invalid_input_is_rejected_naming_the_field(
    kb: KnowledgeBaseSearch, raw: dict[str, JsonValue], field: str
) -> None:
    with pytest.raises(ToolInputError, match=rf"{field}: "):
        kb.parse_input(raw)


# --- chunking and caching ------------------------------------------------------------------------


def test_chunks_follow_headings_and_carry_their_heading() -> None:
    chunks = chunk_markdown(GATEWAY_RUNBOOK)
    assert [headings for headings, _ in chunks] == [
        ("Payment gateway timeouts", "Symptoms"),
        ("Payment gateway timeouts", "Likely causes"),
        ("Payment gateway timeouts", "Diagnosis"),
        ("Payment gateway timeouts", "Mitigation"),
    ]
    assert chunks[1][1].startswith("## Likely causes\n\n1. The acquirer")


def test_long_sections_are_split_and_code_fences_kept_whole() -> None:
    body = " ".join(f"Batch {i} settled for tenant acme in CNY." for i in range(80))
    text = f"# Ledger\n\n{body}\n\n```sql\n# not a heading\n\nselect 1;\n```\n"
    chunks = chunk_markdown(text)
    assert len(chunks) > 2
    assert all(len(t) <= MAX_CHUNK_CHARS + len("# Ledger\n\n") for _, t in chunks)
    assert all(h == ("Ledger",) for h, _ in chunks)
    assert "# not a heading\n\nselect 1;" in chunks[-1][1]
    # Nothing is lost or altered by the split (apart from whitespace at the cut points).
    rejoined = " ".join(t.removeprefix("# Ledger\n\n") for _, t in chunks)
    assert rejoined.split() == (body + " ```sql # not a heading select 1; ```").split()


def test_constructing_again_reuses_the_cached_index() -> None:
    first = KnowledgeBaseSearch(DOCS)
    again = KnowledgeBaseSearch([KbDocument(**d.model_dump()) for d in DOCS])  # equal content, new objects
    assert again._index is first._index
    changed = KnowledgeBaseSearch([*DOCS[:-1], DOCS[-1].model_copy(update={"text": ZH_GATEWAY + "\n补充。"})])
    assert changed._index is not first._index


def test_duplicate_doc_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="doc_id"):
        KnowledgeBaseSearch([DOCS[0], DOCS[0]])


def test_empty_knowledge_base_is_no_evidence() -> None:
    assert call(KnowledgeBaseSearch([]), {"query": "gateway"}).evidence_status is EvidenceStatus.NO_EVIDENCE

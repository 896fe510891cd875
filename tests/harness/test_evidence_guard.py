"""EvidenceGuard proves excerpts against values: one string value of one cited record, informative.

The records come from the real tools (DuckDB log search and business tables, BM25 over Markdown),
exactly as the canonical store holds them.
"""

from __future__ import annotations

from typing import Any

import pytest

from harness.canonical_store import CanonicalStore
from harness.config import HarnessConfig
from harness.contracts import InvocationStatus
from harness.draft import Draft
from harness.evidence_guard import check_evidence
from harness.tools.base import BusinessTool
from runners.domain.tools.db_query import DatabaseQuery, TableFixture
from runners.domain.tools.kb_search import KbDocument, KnowledgeBaseSearch
from runners.domain.tools.log_search import LogEvent, LogSearch

LOGS = [
    LogEvent(ts="2026-07-01T14:03:40Z", tenant="t1", service="gateway", level="ERROR",
             message="db connection pool exhausted (active=64/64, waiting=212)", trace_id="tr-9f2"),
    LogEvent(ts="2026-07-01T14:03:41Z", tenant="t1", service="gateway", level="WARN",
             message="POST /v2/payments took 3000ms", trace_id=None),
    LogEvent(ts="2026-07-01T14:04:00Z", tenant="t1", service="settlement", level="ERROR",
             message="结算批次失败：数据库连接池耗尽", trace_id=None),
    LogEvent(ts="2026-07-01T14:05:00Z", tenant="t1", service="notification", level="WARN",
             message='webhook got HTTP 401 (body: "invalid signature")', trace_id=None),
]  # fmt: skip
KB = [
    KbDocument(
        doc_id="kb-pool",
        title="Gateway connection pool runbook",
        text="# Pool exhaustion\n\nWhen the gateway's database pool is exhausted,\nrequests queue until "
        "the 30 s acquire timeout and then fail with 504.",
    )
]
TABLES = [
    TableFixture(
        name="batches",
        columns=("batch_id", "tenant", "status", "latency_ms", "settled", "note"),
        rows=(
            ("B-0630-02", "t2", "FAILED", 3000, False, "rerun of job run 7781 without --resume"),
            ("ST-t2-0706", "t2", "SETTLED", 120, True, "cutoff moved to 22:00 by rollout cfg-2214"),
        ),
    )
]


def _run(tool: BusinessTool[Any], raw: dict[str, Any]) -> Any:
    return tool.run(tool.parse_input(raw))


@pytest.fixture(scope="module")
def store() -> CanonicalStore:
    """Completed calls of this run: log lines, a KB hit, DB rows (one with a nested list, one keyed `line`)."""
    results = {
        "log": ("log_search", _run(LogSearch(LOGS), {"start": "2026-07-01T14:00:00Z", "end": "2026-07-01T15:00:00Z"})),
        "kb": ("kb_search", _run(KnowledgeBaseSearch(KB), {"query": "gateway pool exhausted"})),
        "db": ("db_query", _run(DatabaseQuery(TABLES), {"sql": "select * from batches order by batch_id"})),
        "db_list": (
            "db_query",
            _run(DatabaseQuery(TABLES), {"sql": "select tenant, list(status order by status) as s from batches "
                                                "group by tenant"}),
        ),
        "db_line": ("db_query", _run(DatabaseQuery(TABLES), {"sql": "select note as line from batches"})),
    }  # fmt: skip
    s = CanonicalStore(ttl_seconds=3600)
    for call_id, (tool, result) in results.items():
        assert result.records, call_id  # every cited call really returned rows
        s.put(tool_call_id=call_id, tool=tool, scope=call_id, input={}, status=InvocationStatus.COMPLETED,
              result=result, error=None, started_at=0.0)  # fmt: skip
    return s


def _check(store: CanonicalStore, call_id: str, excerpt: str, min_chars: int | None = None) -> list[str]:
    draft = Draft.model_validate(
        {
            "conclusion": "c",
            "claims": [{"statement": "s", "citations": [{"tool_call_id": call_id, "excerpt": excerpt}]}],
        }
    )
    verdict = check_evidence(draft, store, min_chars or HarnessConfig().min_excerpt_chars)
    assert verdict.passed == (not verdict.problems)
    return list(verdict.problems)


VERIFIED = [
    ("log", "db connection pool exhausted", "a substring of a log message"),
    ("log", "DB Connection   POOL\n exhausted", "case and whitespace differ"),
    ("log", "POST /v2/payments took 3000ms", "a whole message with a number inside text"),
    ("log", "2026-07-01T14:03:40Z", "a whole timestamp value"),
    ("log", "tr-9f2", "a whole id value"),
    ("log", "数据库连接池耗尽", "a substring of a Chinese message"),
    ("log", 'HTTP 401 (body: "invalid signature")', "a quote with its quotation marks"),
    ("log", 'HTTP 401 (body: \\"invalid signature\\")', "the same quote JSON-escaped, as the observation shows it"),
    ("kb", "the gateway's database pool is exhausted, requests queue", "KB text across a line break"),
    ("kb", "Gateway connection pool runbook", "the KB title"),
    ("db", "rerun of job run 7781", "a fragment of a DB string cell"),
    ("db", "B-0630-02", "a whole DB id cell with a single letter"),
    ("db", "ST-t2-0706", "a whole DB id cell without a 3-letter word"),
    ("db", "FAILED", "a whole DB status cell"),
    ("db_list", "SETTLED", "a string inside a nested list value"),
]


@pytest.mark.parametrize(("call_id", "excerpt", "why"), VERIFIED, ids=[v[2] for v in VERIFIED])
def test_real_text_inside_one_value_verifies(store: CanonicalStore, call_id: str, excerpt: str, why: str) -> None:
    assert _check(store, call_id, excerpt) == []


REJECTED = [
    # keys and JSON structure: in every record, proof of nothing (each matched the old JSON-text rule)
    ("log", "message", "not found", "a key name"),
    ("log", "tenant", "not found", "another key name"),
    ("log", "trace_id", "not found", "a key name with an underscore"),
    ("db_line", '{"line":', "not found", "the JSON opening of a record"),
    ("db_line", "line", "not found", "the only key of a record"),
    ("log", '"level": "ERROR"', "not found", "a key with its value"),
    ("log", '", "', "no letters", "punctuation only"),
    ("log", '"}, {"', "no letters", "punctuation spanning two records"),
    # text spanning two fields or two records
    ("log", 'gateway", "level": "ERROR', "not found", "two fields in JSON form"),
    ("log", "gateway ERROR", "not found", "two adjacent values"),
    ("log", 'signature\\")", "trace_id', "not found", "an escaped value running into the next key"),
    ("db", "FAILED 3000", "not found", "a string cell and the next number cell"),
    ("log", "waiting=212) 2026-07-01T14:03:41Z", "not found", "the end of one record and the next"),
    # numbers and other non-string values
    ("db", "3000", "no letters", "a whole number cell"),
    ("log", "3000", "no letters", "a number inside a message"),
    ("log", "2026-07-01", "no letters", "a date fragment"),
    ("log", "14:03:40", "no letters", "a time fragment"),
    ("db", "false", "not found", "a boolean cell is not text"),
    ("db", "7781", "no letters", "digits cut out of a string cell"),
    # too short, or a fragment with no word in it
    ("log", "db", "shorter than 4", "two characters"),
    ("log", "t1", "shorter than 4", "a whole but tiny value"),
    ("db", "t2-0", "no word of 3 or more letters", "a fragment of an id"),
    ("log", "07-01T14", "no word of 3 or more letters", "a fragment of a timestamp"),
    # real text, wrong place
    ("kb", "db connection pool exhausted", "not found", "text of another call"),
    ("log", "db connection pool exhausted...", "not found", "an ellipsis the record does not have"),
    ("log", "connection pool exhausted on the primary", "not found", "a real quote with an invented tail"),
]


@pytest.mark.parametrize(("call_id", "excerpt", "reason", "why"), REJECTED, ids=[r[3] for r in REJECTED])
def test_excerpts_that_prove_nothing_are_rejected(
    store: CanonicalStore, call_id: str, excerpt: str, reason: str, why: str
) -> None:
    problems = _check(store, call_id, excerpt)
    assert len(problems) == 1 and problems[0].startswith(f"citation {call_id}: "), problems
    assert reason in problems[0], problems


def test_min_excerpt_chars_is_the_configured_floor(store: CanonicalStore) -> None:
    assert _check(store, "db", "FAILED") == []
    assert "shorter than 7" in _check(store, "db", "FAILED", min_chars=7)[0]


def test_each_citation_is_judged_on_its_own(store: CanonicalStore) -> None:
    draft = Draft.model_validate(
        {
            "conclusion": "the gateway's DB pool ran out",
            "claims": [
                {"statement": "pool exhausted", "citations": [
                    {"tool_call_id": "log", "excerpt": "connection pool exhausted"},
                    {"tool_call_id": "kb", "excerpt": "title"},
                ]},
                {"statement": "batch failed", "citations": [{"tool_call_id": "call_99", "excerpt": "FAILED"}]},
            ],
        }
    )  # fmt: skip
    verdict = check_evidence(draft, store)
    assert not verdict.passed
    assert [(v.tool_call_id, v.tool, v.excerpt) for v in verdict.verified] == [
        ("log", "log_search", "connection pool exhausted")
    ]
    assert verdict.problems[0].startswith("citation kb: excerpt not found")
    assert verdict.problems[1] == "citation call_99: never ran in this run"

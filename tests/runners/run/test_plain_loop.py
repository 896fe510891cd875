"""`--agent plain`: the loop without the Harness — plain tools, the same budgets, repeats run again, the answer
published as the model wrote it (EvidenceGuard's verdict recorded, not applied), over HTTP too (serve-sim)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import EvidenceChecked, HarnessConfig, ReleaseOutcome, ToolInvocation, ToolRequestRejected
from runners.cli import main
from runners.domain.evalset import BUILTIN_DIR, EvalCase, load_cases
from runners.domain.prompt import PLAIN_SYSTEM_PROMPT
from runners.run.case_runner import run_case
from runners.run.plain_loop import plain_loop
from tests._db import open_read_only


@pytest.fixture(scope="module")
def cases() -> dict[str, EvalCase]:
    return {c.id: c for c in load_cases([str(BUILTIN_DIR)])}


def test_the_model_sees_plain_tools_and_no_protocol(cases: dict[str, EvalCase]) -> None:
    run = run_case(cases["diagnosable_gateway_risk_pool_exhausted_t1"], loop=plain_loop, judge_invariants=False)
    system = next(e.content for e in run.result.transcript if e.kind.value == "SYSTEM")
    assert system == PLAIN_SYSTEM_PROMPT and "previous_observation" not in system and "STOP_REQUIRED" not in system
    offered = json.loads(next(e.content or "" for e in run.result.transcript if e.kind.value == "TOOLS"))
    assert [t["name"] for t in offered] == ["kb_search", "log_search", "db_query"]
    call = next(e for e in run.result.transcript if e.kind.value == "TOOL_CALL")
    assert "previous_observation" not in (call.arguments or "") and "input" not in json.loads(call.arguments or "{}")
    assert run.result.decision.outcome is ReleaseOutcome.SUCCESS and run.passed


def test_a_repeated_query_runs_again_where_the_harness_refuses_it(cases: dict[str, EvalCase]) -> None:
    case = cases["duplicate_scopes_log_field_order_gateway_pool_t1"]
    harnessed, plain = run_case(case), run_case(case, loop=plain_loop, judge_invariants=False)
    refused = [e for e in harnessed.result.events if isinstance(e, ToolRequestRejected)]
    assert refused and not [e for e in plain.result.events if isinstance(e, ToolRequestRejected)]
    ran = [e.scope for e in plain.result.events if isinstance(e, ToolInvocation)]
    assert len(ran) > len(set(ran)), "the same scope reached the backend twice"
    assert plain.metrics.tool_invocations > harnessed.metrics.tool_invocations


def test_a_fabricated_citation_is_published_and_evidenceguard_says_it_would_have_blocked_it(
    cases: dict[str, EvalCase],
) -> None:
    case = cases["fabricated_citations_never_ran_call99_t1"]
    assert run_case(case).result.decision.outcome is not ReleaseOutcome.SUCCESS
    plain = run_case(case, loop=plain_loop, judge_invariants=False)
    assert plain.result.decision.outcome is ReleaseOutcome.SUCCESS
    checked = [e for e in plain.result.events if isinstance(e, EvidenceChecked)]
    assert [e.verdict.value for e in checked] == ["FAILED"] and "would have rejected" in plain.result.decision.reason
    assert not plain.passed, "the outcome verdict still judges what was published"


@pytest.mark.parametrize("family", ["empty_logs", "missing_context", "generic_kb"])
def test_a_fallback_is_named_as_the_harness_names_it(cases: dict[str, EvalCase], family: str) -> None:
    """The loops differ by the protocol, not by how a fallback is named: where both end without a conclusion, the
    plain loop's fallback kind is the Harness's (empty results checked are INSUFFICIENT_EVIDENCE, as the Release
    says), so a difference in the honest-fallback rate is the protocol's, never the naming's."""
    compared = 0
    for case in (c for c in cases.values() if c.family.value == family):
        harnessed, plain = run_case(case), run_case(case, loop=plain_loop, judge_invariants=False)
        h, p = harnessed.result.decision, plain.result.decision
        if h.outcome is ReleaseOutcome.FALLBACK and p.outcome is ReleaseOutcome.FALLBACK:
            assert p.fallback_kind is h.fallback_kind, case.id
            compared += 1
    assert compared >= 2, f"only {compared} {family} cases ended in a fallback through both loops"


def test_a_budget_ends_the_plain_loop_without_an_answer(cases: dict[str, EvalCase]) -> None:
    case = cases["diagnosable_duplicate_settlement_batch_rerun_shop42"]
    run = run_case(case, loop=plain_loop, config=HarnessConfig(max_tool_invocations=1), judge_invariants=False)
    assert run.result.decision.outcome is ReleaseOutcome.FAILED
    assert run.metrics.tool_invocations == 1 and run.result.usage.budget_hit is not None


def test_the_bench_runs_the_plain_loop_in_process_and_over_http(tmp_path: Path) -> None:
    """The same rows from the scripted model in process and through serve-sim's real HTTP path (the simulator sees
    plain tools and answers with the business input alone)."""
    from runners.domain.evalset import load_cases as load
    from runners.domain.profiles import trajectory_for_model
    from runners.endpoints.simulator import SimulatorServer

    db = tmp_path / "p.duckdb"
    pick = [
        "--case",
        "diagnosable_gateway_risk_pool_exhausted_t1",
        "--case",
        "fabricated_citations_never_ran_call99_t1",
    ]
    assert main(["run", "--agent", "plain", "--db", str(db), "--label", "local", *pick]) in (0, 1)
    with SimulatorServer(load(), trajectory_for=trajectory_for_model) as sim:
        assert main(["run", "--agent", "plain", "--db", str(db), "--label", "http", "--model", "openai:scripted",
                     "--base-url", sim.base_url, *pick]) in (0, 1)  # fmt: skip
    con = open_read_only(db)
    try:
        rows = con.execute(
            "SELECT b.label, c.case_id, c.outcome, c.tool_invocations, c.tool_rejections, c.outcome_passed"
            " FROM case_runs c JOIN bench_runs b USING (bench_run_id) ORDER BY c.case_id, b.label"
        ).fetchall()
        agents = {r[0] for r in con.execute("SELECT agent FROM bench_runs").fetchall()}
    finally:
        con.close()
    by_label = {label: [r[1:] for r in rows if r[0] == label] for label in ("local", "http")}
    assert by_label["local"] == by_label["http"] and len(by_label["local"]) == 2
    assert agents == {"plain"}

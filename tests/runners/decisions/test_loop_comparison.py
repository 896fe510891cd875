"""The Harness against the plain loop: paired by case over the cases both ran, the plain loop's unchecked
publications counted apart from its verified recall."""

from __future__ import annotations

from runners.decisions.loop_comparison import compare_loops
from runners.store.recorded_sweeps import CaseRunRow


def _row(case: str, *, outcome: str, passed: bool, evidence: str | None = None, threshold: int = 2,
         tokens: int = 100) -> CaseRunRow:  # fmt: skip
    return CaseRunRow(
        case_id=case, family="diagnosable", no_gain_threshold=threshold, passed=passed, outcome_passed=passed,
        outcome=outcome, stop_reason=None, model_calls=2, guard_calls=0, wall_ms=1.0, tool_invocations=1,
        duplicate_scope_rejections=0, protocol_violations=0, stop_required_deliveries=0, input_tokens=tokens,
        output_tokens=0, draft_valid=True, evidence_check=evidence, semantic_verdict=None,
    )  # fmt: skip


def test_the_comparison_is_paired_and_counts_unchecked_publications_apart() -> None:
    expected = {"a": True, "b": True, "c": False, "d": True}
    harness = [
        _row("a", outcome="SUCCESS", passed=True, evidence="PASSED"),
        _row("b", outcome="FALLBACK", passed=False, evidence="FAILED"),
        _row("c", outcome="FALLBACK", passed=True),
        _row("d", outcome="SUCCESS", passed=True, evidence="PASSED"),  # the plain loop never ran d: left out
        _row("a", outcome="FALLBACK", passed=False, threshold=1),  # another threshold: not compared
    ]
    plain = [
        _row("a", outcome="SUCCESS", passed=True, evidence="PASSED", tokens=50),
        _row("b", outcome="SUCCESS", passed=True, evidence="FAILED", tokens=50),  # right words, citations rejected
        _row("c", outcome="SUCCESS", passed=False, evidence="FAILED", tokens=50),
    ]
    got = compare_loops("m", harness, plain, expected, 2)
    by = {m.name: m for m in got.metrics}
    assert got.cases == 3
    recall, verified = by["recall (SUCCESS with the root cause)"], by["recall, citations verified"]
    assert (recall.cases, recall.harness, recall.plain) == (2, 0.5, 1.0)
    assert (verified.harness, verified.plain) == (0.5, 0.5)
    honest = by["honest fallback"]
    assert (honest.cases, honest.harness, honest.plain, honest.difference.value) == (1, 1.0, 0.0, -1.0)
    assert by["tokens per run"].difference.value == -50.0
    assert {m.name for m in got.metrics if m.share} == {
        "recall (SUCCESS with the root cause)",
        "recall, citations verified",
        "honest fallback",
    }
    assert (got.harness_blocked, got.plain_published_rejected) == (1, 2)

"""The built-in cases' outcome expectations as any agent is judged on them.

- A case whose point is a model's mistake (a protocol mistake, a repeated rejection, STOP_REQUIRED ignored, an
  unsupported conclusion, an invalid final message, a fabricated citation; `OTHER_MISTAKES` names those no marker
  shows) says what a model that does not make it should publish (`expect.without_mistake`), unless the mistake does
  not change the honest outcome (`CLEAN_MODEL_GETS_THE_SAME`, with the reason).
- Root-cause words are the case's own: each word has an alternative that the question or the fixtures contain (a
  typo, or a word the evidence never uses, would fail every right conclusion).
- A clean model's SUCCESS has its root cause marked in the fixtures, and the words reject the case's own wrong
  conclusion where the Draft's conclusion is the mistake.
- Off the default threshold, the reference's outcome changes only where the threshold really changes what a run can
  find (`THRESHOLD_EFFECTS`): never because of a bound written for the default.
"""

from __future__ import annotations

import pytest

from harness.config import HarnessConfig
from harness.contracts import ReleaseOutcome
from runners.domain.evalset import EvalCase, Family, load_cases
from runners.domain.evidence_marks import carries_evidence, evidence_marks
from runners.domain.root_cause import RootCause
from runners.domain.scripted import RejectionReaction, StopReaction
from runners.run._conclusion_text import analyse
from runners.run.case_runner import run_case
from runners.run.rule_judge import RULE_JUDGE
from tests.runners.domain._case_records import case_text, fixture_records

CASES = load_cases()

_FAILS_ANYWAY = "every backend holding data fails on every call: nothing can be verified, FAILED either way"
_NOTHING_IN_SCOPE = "the fixtures hold nothing for the asked scope: FALLBACK/INSUFFICIENT_EVIDENCE either way"
_ALREADY_CLEAN = "the mistake is corrected within the run: the expected outcome is already a clean model's"

CLEAN_MODEL_GETS_THE_SAME: dict[str, str] = {
    "budget_exhaustion_model_calls_truncated_args_all_failed_t4": _FAILS_ANYWAY,
    "fabricated_citations_failed_call_cited_t6": _FAILS_ANYWAY,
    "protocol_violations_invalid_draft_after_failed_check_fails_closed": _FAILS_ANYWAY,
    "duplicate_scopes_time_notation_settlement_acme_pay": _NOTHING_IN_SCOPE,
    "empty_logs_risk_declines_ignores_stop_t1": _NOTHING_IN_SCOPE,
    "empty_logs_real_verbatim_repeat_cut_draft_t1": _NOTHING_IN_SCOPE,
    "multi_call_turns_ignores_stop_required_with_parallel_calls_t5": _NOTHING_IN_SCOPE,
    "protocol_violations_unknown_tool_corrected_then_saturated_t6_email": _NOTHING_IN_SCOPE,
    "protocol_violations_wrong_call_id_corrected_harbor_fx_payouts": (
        "one settled batch and nothing about a second run: no root cause to publish, FALLBACK either way"
    ),
    "generic_kb_pool_guide_ignores_stop_settlement_t5": (
        "the only log line restates the symptom (the pool was exhausted), nothing says why: FALLBACK either way"
    ),
    "unsupported_conclusions_generic_runbook_as_fact_acme_pay": (
        "only a generic runbook passage, no record of acme-pay's handshakes: FALLBACK either way"
    ),
    "protocol_violations_missing_prev_obs_corrected_visa_429_t4": _ALREADY_CLEAN,
    "protocol_violations_unexpected_echo_corrected_t1_3ds": _ALREADY_CLEAN,
    "protocol_violations_invalid_gain_and_malformed_json_polar_air_cert": _ALREADY_CLEAN,
    "protocol_violations_missing_input_then_unknown_tool_stop_shop42_config": _ALREADY_CLEAN,
}
"""Cases whose point is a model's mistake but whose expected outcome is already what a clean model publishes."""

WRONG_CONCLUSION: dict[str, str] = {
    "fabricated_citations_never_ran_call99_t1": "replica lag, backed by an invented call",
    "fabricated_citations_empty_call_cited_acme_pay": "connection resets, which were another tenant's",
    "fabricated_citations_unreturned_kb_chunk_t9": "a retired signing key, from a runbook section about another error",
    "fabricated_citations_real_general_knowledge_no_claims_webhook_t4": "a guess from general knowledge",
}
"""Fabricated-citation cases whose Draft's conclusion is wrong too (the others cite badly but conclude rightly);
every unsupported_conclusions case's conclusion is wrong by construction."""

THRESHOLD_EFFECTS: dict[int, dict[str, str]] = {
    1: {
        case_id: "its first observation is empty or judged NO_GAIN and comes before the evidence: at threshold 1 it "
        "saturates the run there, and the Draft's citations of calls that never ran are rejected (FALLBACK)"
        for case_id in (
            "diagnosable_late_visa_rate_limit_mall88",
            "diagnosable_late_risk_rule_threshold_t7",
            "diagnosable_late_order_deadlock_t4",
            "diagnosable_late_webhook_signature_header_shop88",
            "diagnosable_late_settlement_cutoff_t2",
            "diagnosable_late_acquirer_callback_allowlist_t3",
            "diagnosable_payout_status_consumer_poison_message_northwind",
            "diagnosable_late_chargeback_file_new_header_t14",
            "diagnosable_late_partner_key_rotated_without_grace_lumen",
            "diagnosable_late_screening_threshold_lowered_harbor_fx",
            "duplicate_scopes_sql_layout_refunds_shop42",
            "duplicate_scopes_paraphrase_runs_order_deadlock",
            "duplicate_scopes_duplicate_then_evidence_risk_rule",
            "duplicate_scopes_sql_literal_case_not_merged_payouts",
            "multi_call_turns_first_empty_rest_run_t5",
            "multi_call_turns_echoed_evaluation_not_a_violation_t5",
            "protocol_violations_unexpected_echo_corrected_t1_3ds",
            "tool_failures_retry_same_scope_fails_again_t12_webhooks",
        )
    },
    3: {},
    4: {},
}
"""Per NO_GAIN threshold other than the default, the cases whose reference outcome really changes there, and why."""


OTHER_MISTAKES: dict[str, str] = {
    "budget_exhaustion_tool_budget_all_gained_webhook_backlog": "never concludes; its evidence is in by call 6",
    "budget_exhaustion_tool_budget_alternating_dead_ends_shop42": "never concludes; its evidence is in by call 2",
    "budget_exhaustion_retrying_failed_log_scope_acme_pay": "retries a failing search instead of concluding",
    "tool_failures_real_unknown_column_retried_until_budget_shop42": "sends a failing query ten times verbatim",
    "tool_failures_draft_cites_failed_call_t13_chargebacks": "cites a call that failed",
    "generic_kb_gateway_runbook_timeout_t3": "keeps rewriting knowledge-base queries instead of reading the logs",
}
"""Cases whose point is a model's mistake that no marker of the case data shows."""


def _mistakes(case: EvalCase) -> list[str]:
    """What in the case is a model's mistake, by the markers the case data carries."""
    traj = case.trajectory
    found = [f"step {i + 1}: {s.mistake.value}" for i, s in enumerate(traj.steps) if s.mistake is not None]
    if traj.on_rejection is RejectionReaction.REPEAT or any(s.on_rejection is RejectionReaction.REPEAT
                                                             for s in traj.steps):  # fmt: skip
        found.append("repeats a rejected request")
    if traj.on_stop_required is StopReaction.IGNORE:
        found.append("ignores STOP_REQUIRED")
    if traj.semantic_verdict.value == "UNSUPPORTED":
        found.append("an unsupported conclusion")
    if traj.draft_text is not None:
        found.append("an invalid final message")
    if case.family is Family.FABRICATED_CITATIONS:
        found.append("a fabricated citation")
    if case.id in OTHER_MISTAKES:
        found.append(OTHER_MISTAKES[case.id])
    return found


MISTAKES = [case for case in CASES if _mistakes(case)]


@pytest.mark.parametrize("case", MISTAKES, ids=[c.id for c in MISTAKES])
def test_a_mistake_case_says_what_a_clean_model_publishes(case: EvalCase) -> None:
    clean = case.expect.without_mistake
    if case.id in CLEAN_MODEL_GETS_THE_SAME:
        assert clean is None, f"{case.id} has without_mistake: drop it from CLEAN_MODEL_GETS_THE_SAME"
        return
    assert clean is not None, (
        f"{case.id} ({'; '.join(_mistakes(case))}) needs expect.without_mistake, or an entry in "
        "CLEAN_MODEL_GETS_THE_SAME saying why a clean model publishes the same outcome"
    )


def test_the_listed_cases_are_mistake_cases() -> None:
    ids = {case.id for case in MISTAKES}
    assert set(CLEAN_MODEL_GETS_THE_SAME) <= ids
    assert set(WRONG_CONCLUSION) <= ids
    assert {case.id for case in CASES} >= set(OTHER_MISTAKES)


WITH_CLEAN = [case for case in CASES if case.expect.without_mistake is not None]


@pytest.mark.parametrize("case", WITH_CLEAN, ids=[c.id for c in WITH_CLEAN])
def test_without_mistake_differs_from_the_expectation(case: EvalCase) -> None:
    clean, exp = case.expect.without_mistake, case.expect
    assert clean is not None
    assert (clean.outcome, clean.fallback_kind) != (exp.outcome, exp.fallback_kind), (
        f"{case.id}: without_mistake repeats the expected outcome; leave it out"
    )


SUCCESSES = [(case, label, want.root_cause) for case in CASES
             for label, want in (("expect", case.expect), ("without_mistake", case.expect.without_mistake))
             if want is not None and want.outcome is ReleaseOutcome.SUCCESS
             and want.root_cause is not None]  # fmt: skip


@pytest.mark.parametrize(("case", "label", "cause"), SUCCESSES, ids=[f"{c.id}-{lab}" for c, lab, _ in SUCCESSES])
def test_root_cause_facts_are_the_cases_own(case: EvalCase, label: str, cause: RootCause) -> None:
    """Each fact has a wording the case's question or fixtures hold: a fact no record shows is no root cause."""
    text = analyse(case_text(case))
    foreign = [f.variants for f in cause.facts if not any(text.find(v) for v in f.variants)]
    assert not foreign, f"{case.id} {label}: no wording of {foreign} occurs in its question or fixtures"


CLEAN_SUCCESS = [case for case in WITH_CLEAN
                 if (clean := case.expect.without_mistake) and clean.outcome is ReleaseOutcome.SUCCESS]  # fmt: skip


@pytest.mark.parametrize("case", CLEAN_SUCCESS, ids=[c.id for c in CLEAN_SUCCESS])
def test_a_clean_success_has_its_evidence_marked(case: EvalCase) -> None:
    marks = evidence_marks(case)
    found = [m for m in marks if carries_evidence(m.tool, fixture_records(case, m.tool), [m])]
    assert found, f"{case.id}: a clean model should reach SUCCESS, but no fixture record is marked as evidence"


WRONG = [case for case in CLEAN_SUCCESS
         if case.family is Family.UNSUPPORTED_CONCLUSIONS or case.id in WRONG_CONCLUSION]  # fmt: skip


@pytest.mark.parametrize("case", WRONG, ids=[c.id for c in WRONG])
def test_the_judge_rejects_the_cases_wrong_conclusion(case: EvalCase) -> None:
    clean = case.expect.without_mistake
    draft = case.trajectory.draft or {}
    conclusion = draft.get("conclusion")
    assert clean is not None and isinstance(conclusion, str)
    assert clean.root_cause is not None
    verdict = RULE_JUDGE.judge(clean.root_cause, conclusion, question=case.question)
    assert not verdict.states_root_cause, f"{case.id}: its wrong conclusion {conclusion!r} passes the judge"


@pytest.mark.parametrize("threshold", sorted(THRESHOLD_EFFECTS))
def test_off_the_default_threshold_only_real_effects_change_the_outcome(threshold: int) -> None:
    config = HarnessConfig(no_gain_threshold=threshold)
    failed = {}
    for case in CASES:
        run = run_case(case, config=config)
        assert run.verdicts.trajectory_passed is None, "the trajectory's bounds apply at the default settings only"
        if not run.verdicts.outcome_passed:
            failed[case.id] = "; ".join(run.verdicts.outcome_failures)
    expected = THRESHOLD_EFFECTS[threshold]
    unexpected = {k: v for k, v in failed.items() if k not in expected}
    assert not unexpected, f"threshold {threshold}: outcome failures that are no listed effect: {unexpected}"
    gone = sorted(set(expected) - set(failed))
    assert not gone, f"threshold {threshold}: listed effects whose outcome no longer changes (remove them): {gone}"


def test_every_missing_context_case_says_what_a_run_that_made_a_call_should_get() -> None:
    """A model forced to call first (or one that looks before it asks) cannot reach MISSING_REQUIRED_CONTEXT."""
    from harness.contracts import FallbackKind

    missing = [c.id for c in CASES if c.expect.fallback_kind is FallbackKind.MISSING_REQUIRED_CONTEXT
               and c.expect.after_a_call is None]  # fmt: skip
    assert not missing

"""The counterfactual of a stop policy on runs the tests write by hand, with a canned model driving the real Harness:
the races between rules at one request, a detector on a call left in a STOP_REQUIRED's message, a run stopped live
by a rule, the protocol's own stop, the verdict of a changed outcome, and what cannot be compared at all. Every
counterfactual here is checked against the live run under the policy."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from harness import (
    AssistantMessage,
    BudgetExhausted,
    BudgetKind,
    ChatRequest,
    HarnessConfig,
    ModelPurpose,
    ModelResponse,
    RejectionReason,
    ReleaseOutcome,
    RunContext,
    RunResult,
    StopReason,
    ToolCallRequest,
    ToolRequestRejected,
    Usage,
    run_diagnosis,
)
from harness.prompts import DiagnosisTask
from runners.decisions.compare_stops import (
    CompareStopsInputError,
    CutAt,
    CutKind,
    Effect,
    compare_stops,
    default_policies,
    run_under,
)
from runners.decisions.counterfactual import RunStatus, recorded_counts
from runners.domain.stop_rules import parse_rules
from runners.plan.bench_config import BenchHarnessConfig, live_settings, request_checks
from runners.store.replayable_runs import ReplayableRun
from tests.conftest import LINES, LookupTool, call

CITATION = {"tool_call_id": "c1", "excerpt": "db connection pool exhausted"}
DRAFT = json.dumps({"conclusion": "settlement db pool exhausted", "claims": [{"statement": "pool",
                                                                              "citations": [CITATION]}]})  # fmt: skip
"""A Draft citing c1 (a `pool` lookup)."""


@dataclass
class _Canned:
    """A model that answers with the turns it was given, in order (the SemanticGuard: SUPPORTED)."""

    turns: list[AssistantMessage]
    name: str = "canned"
    calls: list[ChatRequest] = field(default_factory=list)

    def complete(self, request: ChatRequest) -> ModelResponse:
        if request.purpose is ModelPurpose.SEMANTIC_GUARD:
            return ModelResponse(AssistantMessage('{"verdict": "SUPPORTED", "reason": "ok"}'), Usage(50, 5))
        self.calls.append(request)
        return ModelResponse(self.turns.pop(0), Usage(100, 10))


def _turn(*calls: ToolCallRequest) -> AssistantMessage:
    return AssistantMessage(None, tuple(calls))


def _live(turns: Sequence[AssistantMessage], config: HarnessConfig) -> RunResult:
    ctx = RunContext.create(config, request_checks=request_checks(config))
    return run_diagnosis(DiagnosisTask("why?"), [LookupTool(LINES)], _Canned(list(turns)), ctx=ctx)


def _stored(result: RunResult, config: HarnessConfig, *, expected: tuple[str, str | None], agent: str = "native",
            alternative: tuple[str, str | None] | None = None) -> ReplayableRun:  # fmt: skip
    d = result.decision
    kind = d.fallback_kind.value if d.fallback_kind else None
    passed = (d.outcome.value, kind) == expected or (alternative is not None and (d.outcome.value, kind) == alternative)
    return ReplayableRun(
        case_run_id=f"run-{result.run_id}", bench_run_id="br", case_id="case", epoch=1,
        no_gain_threshold=config.no_gain_threshold, protocol_violation_threshold=config.protocol_violation_threshold,
        max_tool_invocations=config.max_tool_invocations, max_model_calls=config.max_model_calls,
        max_total_tokens=config.max_total_tokens, outcome=d.outcome.value, transcripts=False, final_message=None,
        events=result.events, expected_outcome=expected[0], expected_fallback_kind=expected[1], fallback_kind=kind,
        outcome_passed=passed, agent=agent, alternative_outcome=alternative[0] if alternative else None,
        alternative_fallback_kind=alternative[1] if alternative else None,
    )  # fmt: skip


def _under(spec: str) -> BenchHarnessConfig:
    """The config that runs `spec` live."""
    return BenchHarnessConfig.model_validate(live_settings(parse_rules(spec)))


# c1 (evidence, pending) · c2 evaluates c1 NO_GAIN and asks `pool` again under another id (a repeat of c1's scope,
# which the Harness refuses as a duplicate: NO_GAIN) · c3 in the same message asks c1's scope a third time
TURNS = (
    _turn(call("c1", "pool")),
    _turn(call("c2", "timeout", prev=("c1", "NO_GAIN")), call("c3", "pool")),
    _turn(call("c4", "order", prev=("c2", "GAINED"))),
    AssistantMessage(DRAFT),
)


def test_a_detector_on_a_call_left_in_a_stop_requireds_message_ends_the_run_before_the_draft() -> None:
    """At threshold 1, c2's NO_GAIN evaluation of c1 saturates the run: c2 is refused with STOP_REQUIRED; c3, left
    in the same message, is refused too — but a repeat detector sees it first and ends the run: no Draft call."""
    recorded = _live(TURNS, HarnessConfig(no_gain_threshold=3))
    run = _stored(recorded, HarnessConfig(no_gain_threshold=3), expected=("SUCCESS", None))
    assert run.outcome == "SUCCESS"
    spec = "no-gain:1+repeat:k=2,w=4"
    cf = run_under(run, parse_rules(spec))
    assert cf.cut is not None and cf.cut.kind is CutKind.HARD and cf.cut.rule == "repeat:k=2,w=4"
    assert cf.cut.tool_call_id == "c3" and cf.cut.tool_requests == 1, "spent up to the STOP_REQUIRED at c2"
    live = _live(TURNS, _under(spec))
    assert recorded_counts(live.events) == cf.to_cut
    assert live.decision.outcome is cf.outcome is ReleaseOutcome.FALLBACK and cf.effect is Effect.LOST
    stop = next(e for e in live.events if isinstance(e, BudgetExhausted))
    assert (stop.budget, stop.tool_call_id) == (BudgetKind.STOP_RULE, "c3")
    # without the detector the STOP_REQUIRED cut leaves the Draft to the model: unknown, never guessed
    alone = run_under(run, parse_rules("no-gain:1"))
    assert alone.cut is not None and alone.cut.draft_call and alone.outcome is None and alone.effect is Effect.UNKNOWN


def test_a_detector_decides_before_the_contract_and_the_contract_before_the_tool_cap() -> None:
    """One request, three rules: the detector is consulted before admission, the tool budget after it."""
    turns = (_turn(call("c1", "pool")), _turn(call("c2", "pool", prev=("c1", "NO_GAIN"))), AssistantMessage(DRAFT))
    recorded = _live(turns, HarnessConfig(no_gain_threshold=3))
    run = _stored(recorded, HarnessConfig(no_gain_threshold=3), expected=("SUCCESS", None))
    for spec, rule, kind in (("tool-cap:1+no-gain:1+repeat:k=2,w=4", "repeat:k=2,w=4", CutKind.HARD),
                             ("tool-cap:1+no-gain:1", "no-gain:1", CutKind.STOP_REQUIRED)):  # fmt: skip
        cf = run_under(run, parse_rules(spec))
        assert cf.cut is not None and (cf.cut.rule, cf.cut.kind, cf.cut.tool_call_id) == (rule, kind, "c2"), spec
        live = _live(turns, _under(spec))
        refused = next(e for e in live.events if isinstance(e, ToolRequestRejected) and e.tool_call_id == "c2")
        want = RejectionReason.STOP_RULE if kind is CutKind.HARD else RejectionReason.SATURATED
        assert refused.rejection is want, spec


def test_a_run_stopped_live_by_a_rule_is_censored_for_a_policy_without_it() -> None:
    config = _under("repeat:k=2,w=4")
    recorded = _live(TURNS, config)
    run = _stored(recorded, config, expected=("FALLBACK", "INSUFFICIENT_EVIDENCE"))
    assert any(isinstance(e, BudgetExhausted) and e.budget is BudgetKind.STOP_RULE for e in run.events)
    same = run_under(run, parse_rules("repeat:k=2,w=4"))  # the rule it ran under fires where it fired: nothing saved
    assert same.cut is not None and same.saved is not None and same.cut.tool_call_id == "c3"
    assert same.saved.model_calls == same.saved.tool_invocations == same.saved.tokens == 0
    assert same.outcome is not None and same.outcome.value == run.outcome and same.effect is Effect.KEPT
    assert run_under(run, parse_rules("tool-cap:5")).status is RunStatus.CENSORED
    earlier = run_under(run, parse_rules("tool-cap:1"))  # a policy that stops it before the rule did: known
    assert earlier.status is RunStatus.CUT and earlier.cut is not None and earlier.cut.tool_call_id == "c2"


def test_the_protocol_threshold_stays_under_a_policy_without_the_contract() -> None:
    """Two malformed requests in a row saturate the run for PROGRESS_PROTOCOL_VIOLATED: a policy that turns the
    information-gain contract off keeps the envelope, so that stop is the policy's too (not censored)."""
    bad = ToolCallRequest("c2", "lookup", "{not json")
    turns = (_turn(call("c1", "order")), _turn(bad), _turn(ToolCallRequest("c3", "lookup", "{nope")),
             AssistantMessage(DRAFT))  # fmt: skip
    recorded = _live(turns, HarnessConfig())
    run = _stored(recorded, HarnessConfig(), expected=("FALLBACK", "INSUFFICIENT_EVIDENCE"))
    assert recorded.decision.stop_reason is StopReason.PROGRESS_PROTOCOL_VIOLATED
    cf = run_under(run, parse_rules("tool-cap:5"))
    assert cf.status is RunStatus.UNCHANGED
    live = _live(turns, _under("tool-cap:5"))
    assert live.decision.stop_reason == recorded.decision.stop_reason
    assert recorded_counts(live.events) == cf.to_cut


def test_a_turn_cap_that_leaves_no_room_for_the_guard_turns_the_draft_into_a_fallback() -> None:
    turns = (_turn(call("c1", "pool")), AssistantMessage(DRAFT))
    recorded = _live(turns, HarnessConfig())
    run = _stored(recorded, HarnessConfig(), expected=("SUCCESS", None))
    assert run.outcome == "SUCCESS"
    cf = run_under(run, parse_rules("turn-cap:2"))
    assert cf.cut is not None and cf.cut.at is CutAt.GUARD_CALL and cf.saved is not None
    assert (cf.saved.tool_invocations, cf.saved.model_calls, cf.saved.tokens) == (0, 0, 0)
    live = _live(turns, _under("turn-cap:2"))
    assert live.decision.outcome is cf.outcome is ReleaseOutcome.FALLBACK and cf.effect is Effect.LOST
    assert run_under(run, parse_rules("turn-cap:3")).status is RunStatus.UNCHANGED


def test_a_changed_outcome_is_judged_by_the_cases_alternative_too() -> None:
    """A case whose point is a mistake: it expects a FALLBACK for missing context, and accepts the FALLBACK of a
    model without the mistake (`without_mistake`). A run that published a SUCCESS failed it; a cap that ends the run
    with a verified fact publishes the FALLBACK the alternative accepts: gained, not kept failing."""
    turns = (_turn(call("c1", "pool")), _turn(call("c2", "order", prev=("c1", "GAINED"))), AssistantMessage(DRAFT))
    recorded = _live(turns, HarnessConfig())
    assert recorded.decision.outcome is ReleaseOutcome.SUCCESS
    primary = ("FALLBACK", "MISSING_REQUIRED_CONTEXT")
    alone = _stored(recorded, HarnessConfig(), expected=primary)
    with_alt = _stored(recorded, HarnessConfig(), expected=primary, alternative=("FALLBACK", "INSUFFICIENT_EVIDENCE"))
    assert not alone.outcome_passed and not with_alt.outcome_passed
    cap = parse_rules("tool-cap:1")
    assert run_under(alone, cap).effect is Effect.KEPT  # still failing its one expectation
    cut = run_under(with_alt, cap)
    assert cut.outcome is ReleaseOutcome.FALLBACK and cut.effect is Effect.GAINED
    live = _live(turns, _under("tool-cap:1"))
    assert (live.decision.outcome, live.decision.fallback_kind and live.decision.fallback_kind.value) == (
        ReleaseOutcome.FALLBACK, "INSUFFICIENT_EVIDENCE")  # fmt: skip


def test_plain_runs_refuse_the_contract_and_unjudged_runs_are_not_counted() -> None:
    recorded = _live(TURNS, HarnessConfig())
    plain = _stored(recorded, HarnessConfig(), expected=("SUCCESS", None), agent="plain")
    with pytest.raises(CompareStopsInputError, match="no information-gain contract"):
        compare_stops([plain], [parse_rules("tool-cap:2"), parse_rules("no-gain:1")])
    with pytest.raises(CompareStopsInputError, match="no case runs"):
        compare_stops([], [parse_rules("tool-cap:2")])
    imported = dataclasses.replace(plain, expected_outcome=None, outcome_passed=None, agent=None)
    (result,) = compare_stops([imported], [parse_rules("tool-cap:1")]).policies
    assert result.runs[0].effect is Effect.UNJUDGED and result.success_cases == 0 and result.recall_kept.mean is None


def test_the_pareto_front_and_the_default_policies() -> None:
    turns = (_turn(call("c1", "pool")), _turn(call("c2", "order", prev=("c1", "GAINED"))), AssistantMessage(DRAFT))
    runs = [_stored(_live(turns, HarnessConfig(no_gain_threshold=4)), HarnessConfig(no_gain_threshold=4),
                    expected=("SUCCESS", None))]  # fmt: skip
    policies = default_policies(runs)
    specs = [p.spec for p in policies]
    assert specs[:4] == ["no-gain:4", "no-gain:3", "no-gain:2", "no-gain:1"] and "no-gain:2+tool-cap:8" in specs
    result = compare_stops(runs, policies)
    points = {p.policy: (p.recall_kept.mean or 0.0, p.tool_invocations_saved.mean or 0.0) for p in result.policies}

    def beaten(name: str) -> bool:
        r, s = points[name]
        return any(r2 >= r and s2 >= s and (r2, s2) != (r, s) for r2, s2 in points.values())

    assert result.pareto and not any(beaten(name) for name in result.pareto)
    assert all(beaten(name) for name in set(points) - set(result.pareto))
    assert result.policies[0].runs[0].status is RunStatus.UNCHANGED  # the recorded threshold: the baseline

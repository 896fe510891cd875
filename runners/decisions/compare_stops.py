"""Which stop rule pays: each declared policy's counterfactual on stored runs, exact up to its cut, paired per case
against the runs as recorded.

A stop rule only stops a run; it never changes what the model saw before the stop. So up to the first place a policy
would stop a stored run, the run is the recorded run, and everything before that place is known exactly. Walking the
recorded events in order, as the live Harness decides them (runners/domain/stop_rules.py says what each rule does):

- a cap or a loop detector stops the run as a budget does (HARD): the request (or model call) it fires on does not
  run, no further model call is made, and what is published follows from what the run had at the cut — a FALLBACK
  (INSUFFICIENT_EVIDENCE) when a call completed before it, else FAILED; a plain-loop run (`--agent plain`) publishes
  FAILED on a limit. These cuts are exact, savings and outcome alike. A turn or token cap that leaves the diagnosis
  alone but leaves no room for the SemanticGuard's call (live, the guard counts against the same budgets) turns a
  Draft into that same fallback: a cut at the guard's call, with nothing saved but the outcome changed;
- the contract's `no-gain:T` delivers STOP_REQUIRED earlier (the replay through the real tracker,
  runners/decisions/counterfactual.py): the model gets one call for its Draft, whose content, tokens and outcome were
  never recorded (UNKNOWN; AT_RISK when the published Draft cites a record obtained after the cut) — unless the policy's
  caps or the recorded budgets leave no room for that call: then no Draft, and the outcome is the hard cut's;
- nothing fires before the run's recorded end: UNCHANGED;
- the recorded run was stopped where the policy would have let it go on — by the contract's INFORMATION_SATURATED (a
  policy without `no-gain`, or with a higher threshold), or by a live stop rule the policy does not fire at: CENSORED
  — what it would have done next was never recorded.

At one request the rules are decided in the live order: the token budget (a turn whose answer used the tokens up runs
none of its calls), the loop detectors (request checks, before admission), the contract's admission (a STOP_REQUIRED
that refuses the request), the tool budget; a STOP_REQUIRED delivered by the request's own result comes after it ran.

The recorded budgets hold under every policy (they are the last line of defence whatever the stop rule); so does the
protocol-violation threshold (a policy without `no-gain` turns the information-gain contract off, not the envelope).
The case is the unit: per case the runs' (epochs') effects are averaged, and intervals are 95% t intervals over
cases.

The walk of a stored trace, the tracker's replay and the interval are the counterfactual core's
(`runners.decisions.counterfactual`, `runners.decisions.intervals`), shared with `what-if`. Pure: stored runs in
(`runners.store.replayable_runs`), typed results out; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from harness import (
    BudgetExhausted,
    BudgetKind,
    CollectionStopped,
    DraftReceived,
    InvocationStatus,
    ModelCall,
    ModelPurpose,
    Released,
    ReleaseOutcome,
    SeenRequest,
    StopReason,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
    TraceEvent,
)
from runners.decisions._model import Frozen
from runners.decisions.counterfactual import (
    ConclusionRisk,
    Counts,
    RunStatus,
    draft_call_allowed,
    recorded_counts,
    replay_run,
    spent_before,
    unreplayable,
)
from runners.decisions.intervals import CONFIDENCE, Interval, t_interval
from runners.domain.stop_rules import StopRule, parse_rules
from runners.store.replayable_runs import ReplayableRun

__all__ = [
    "CONFIDENCE",
    "NOTES",
    "CompareStops",
    "CutAt",
    "CutKind",
    "Effect",
    "Interval",
    "PolicyResult",
    "RunUnderPolicy",
    "StopCut",
    "CompareStopsInputError",
    "compare_stops",
    "default_policies",
    "run_under",
]

NOTES = (
    "exact up to the cut: a stop rule changes nothing the model saw before it",
    "a cap or loop detector ends the run there (no further model call): its outcome and savings are exact; a turn"
    " or token cap that leaves no room for the SemanticGuard's call turns the Draft into a fallback (saves nothing)",
    "no-gain: the model writes its Draft after the earlier STOP_REQUIRED; that Draft, its tokens and its outcome"
    " were never recorded (unknown): model calls saved count that call once, tokens saved are at most the figure",
    "censored: the recorded run was stopped (by the contract, or a live stop rule) where the policy would have let"
    " it go on; what it would have done next was never recorded, so it is left out of the savings",
    "recall and honest fallback kept count only what is known to pass (unknown, at-risk and censored runs as"
    " lost); 'at most' counts them as kept",
    "the recorded budgets (model calls, tool invocations, tokens, deadline) and the protocol-violation threshold"
    " hold under every policy; a policy without no-gain turns the information-gain contract off",
)
"""What the comparison cannot know, said once (printed under the table, written into the JSON)."""


class CompareStopsInputError(ValueError):
    """A selection the comparison cannot answer: no runs, or runs without stored events (one line, exit 2)."""


class CutKind(StrEnum):
    """How a policy stops a run."""

    HARD = "HARD"
    """A cap or a loop detector: the run ends there, no further model call."""
    STOP_REQUIRED = "STOP_REQUIRED"
    """The contract: STOP_REQUIRED, then one model call for the Draft."""


class CutAt(StrEnum):
    """Where a cut falls."""

    TOOL_REQUEST = "TOOL_REQUEST"
    """A tool request (refused, or run: its result delivered STOP_REQUIRED)."""
    MODEL_CALL = "MODEL_CALL"
    """A diagnosis model call, not made."""
    GUARD_CALL = "GUARD_CALL"
    """The SemanticGuard's call after the Draft, not made."""


class Effect(StrEnum):
    """What a policy does to a run's outcome verdict."""

    KEPT = "KEPT"
    """The run's verdict is what it was (not cut, or cut to an outcome judged the same: known)."""
    LOST = "LOST"
    """A passing run that the cut makes fail (known)."""
    GAINED = "GAINED"
    """A failing run that the cut makes pass (known: a hard cut's FALLBACK where one is expected)."""
    AT_RISK = "AT_RISK"
    """A passing SUCCESS whose published conclusion cites a record obtained after a STOP_REQUIRED cut."""
    UNKNOWN = "UNKNOWN"
    """A STOP_REQUIRED cut: the Draft written there was never recorded."""
    CENSORED = "CENSORED"
    """Not known: the policy would have let the run go on past where it was stopped."""
    UNJUDGED = "UNJUDGED"
    """The run has no outcome verdict to keep or lose (imported from a trace, or stored before verdicts)."""


class StopCut(Frozen):
    """Where a policy stops a run."""

    rule: str
    """The rule that fired first (its spec)."""
    kind: CutKind
    """A hard stop, or STOP_REQUIRED."""
    at: CutAt
    """A tool request, a model call or the guard's call."""
    tool_call_id: str | None
    """The tool request it fired on (None: a model call)."""
    executed: bool
    """The request reached the backend (its result delivered STOP_REQUIRED), or it was refused."""
    model_calls: int
    """Diagnosis model calls made before the cut."""
    tool_requests: int
    """Tool requests decided before the cut (the request it fired on included when it ran)."""
    draft_call: bool
    """A STOP_REQUIRED cut: the model still gets its one call for the Draft (the budgets and caps allow it)."""


class RunUnderPolicy(Frozen):
    """One stored run under one policy."""

    case_run_id: str
    """The case run."""
    case_id: str
    """Its case."""
    epoch: int
    """Its epoch."""
    status: RunStatus
    """Cut, unchanged or censored."""
    cut: StopCut | None
    """Where it stops (CUT only)."""
    recorded: Counts
    """What the recorded run spent."""
    to_cut: Counts | None
    """What it spends before the cut (the recorded counts when unchanged; None: censored)."""
    saved: Counts | None
    """Recorded minus what the run spends under the policy (None: censored); a STOP_REQUIRED cut's Draft call is
    counted as a model call, its tokens are not known (left out)."""
    outcome: ReleaseOutcome | None
    """What it publishes under the policy (None: not known)."""
    effect: Effect
    """What the policy does to its outcome verdict."""
    expected_outcome: str | None
    """Its case's expected outcome."""


class Predicted(Frozen):
    """What the runs not censored spend under a policy, summed."""

    tool_invocations: int
    """Backend tool invocations."""
    model_calls: int
    """Diagnosis model calls (a STOP_REQUIRED cut's Draft call counted)."""
    tokens: int
    """Tokens (a STOP_REQUIRED cut's Draft call's tokens not known: a lower bound when `tokens_exact` is false)."""
    tokens_exact: bool
    """No cut left a Draft call's tokens unknown."""


class VerdictTally(Frozen):
    """The runs of one expected outcome (SUCCESS: recall; FALLBACK: honest fallback) by what a policy does to them."""

    runs: int
    """Runs expected to end so (judged ones)."""
    kept: int
    """Passed as recorded, and known to pass under the policy."""
    lost: int
    """Passed as recorded, known to fail under it."""
    gained: int
    """Failed as recorded, known to pass under it."""
    unknown: int
    """Not known under it (a Draft never recorded, a conclusion at risk, a censored run)."""


class PolicyResult(Frozen):
    """One policy over the selected runs."""

    policy: str
    """The policy's spec."""
    run_count: int
    """Runs."""
    runs_cut: int
    """Runs it stops earlier."""
    runs_censored: int
    """Runs it cannot answer."""
    success_cases: int
    """Cases expected to end in SUCCESS (the recall's denominator)."""
    recall_recorded: float | None
    """Recall as recorded (per case, then averaged; None: no such case)."""
    recall_kept: Interval
    """Recall under the policy, counting only what is known to pass."""
    recall_at_most: float | None
    """Recall under the policy if every unknown, at-risk and censored run kept its verdict's best."""
    fallback_cases: int
    """Cases expected to end in an honest FALLBACK."""
    honest_recorded: float | None
    """Honest fallback as recorded."""
    honest_kept: Interval
    """Honest fallback under the policy, known only."""
    honest_at_most: float | None
    """Honest fallback if every unknown, at-risk and censored run kept its best."""
    recall_runs: VerdictTally
    """The runs expected to end in SUCCESS: kept, lost, gained, unknown."""
    honest_runs: VerdictTally
    """The runs expected to end in an honest FALLBACK: kept, lost, gained, unknown."""
    effects: dict[Effect, int]
    """Runs per effect."""
    tool_invocations_saved: Interval
    """Tool invocations saved per run (per case, then averaged; censored runs left out)."""
    model_calls_saved: Interval
    """Model calls saved per run."""
    tokens_saved: Interval
    """Tokens saved per run (an upper bound where a STOP_REQUIRED cut's Draft call is not known)."""
    predicted: Predicted
    """What the runs not censored spend under the policy, summed."""
    runs: tuple[RunUnderPolicy, ...]
    """Every run under this policy, its cut or none."""


class CompareStops(Frozen):
    """Every policy over the selected runs."""

    policies: tuple[PolicyResult, ...]
    """One per policy, in the order given."""
    pareto: tuple[str, ...]
    """The policies no other beats on both recall kept and tool calls saved (their specs; ties kept)."""
    notes: tuple[str, ...] = NOTES
    """What cannot be known, and how it is counted."""


# -- one run --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Fire:
    seq: int
    """The event before which the run stops (events with a lower seq happened)."""
    rule: str
    kind: CutKind
    at: CutAt
    tool_call_id: str | None
    executed: bool = False
    spent_seq: int | None = None
    """Where the run's spending stopped, when earlier than `seq` (a detector firing on a request left in the message
    of a STOP_REQUIRED cut: the calls between were refused, not run)."""

    @property
    def spent_at(self) -> int:
        """The event before which the run spent what it spent."""
        return self.seq if self.spent_seq is None else self.spent_seq


_LOOP_ENDED = (DraftReceived, BudgetExhausted, CollectionStopped, Released)
"""Events after which no request or diagnosis call of the loop is decided."""


def _walk(events: Sequence[TraceEvent], policy: StopRule, harnessed: bool, contract: _Fire | None) -> _Fire | None:
    """The first place the policy stops the recorded loop, walking it in the live order of decisions: at a model
    call its caps; at a request the token budget (the Harness re-checks it before a turn's calls; the plain loop does
    not), the loop detectors (before admission), the contract's refusal (`contract`, from the tracker's replay), the
    tool cap. After a STOP_REQUIRED cut the rest of its message is still decided — refused, but seen by the
    detectors, which may end the run there before the Draft call."""
    seen: list[SeenRequest] = []
    executed = calls = tokens = 0
    detectors, tool_cap, token_cap = policy.detectors, policy.tool_cap, policy.token_cap
    stopped = False  # the contract's STOP_REQUIRED was delivered: the rest of the message is refused
    for e in events:
        if isinstance(e, ModelCall):
            if stopped:
                return contract
            if e.purpose is ModelPurpose.DIAGNOSIS:
                for rule in policy.call_rules:
                    if rule.stops_model_call(calls, tokens):
                        return _Fire(e.seq, rule.spec, CutKind.HARD, CutAt.MODEL_CALL, None)
                calls += 1
                tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
            continue
        if isinstance(e, _LOOP_ENDED):
            return contract if stopped else None
        if not isinstance(e, ToolInvocation | ToolRequestRejected):
            continue
        if harnessed and not stopped and token_cap is not None and token_cap.stops_model_call(calls, tokens):
            return _Fire(e.seq, token_cap.spec, CutKind.HARD, CutAt.TOOL_REQUEST, e.tool_call_id)
        request = SeenRequest(e.tool_call_id, e.tool, e.scope or None)
        for detector in detectors:
            if detector.stop_before(seen, request) is not None:
                spent = contract.seq if stopped and contract is not None else None
                return _Fire(e.seq, detector.spec, CutKind.HARD, CutAt.TOOL_REQUEST, e.tool_call_id, spent_seq=spent)
        if stopped or (contract is not None and e.seq == contract.seq and not contract.executed):
            seen.append(request)  # refused: by STOP_REQUIRED, or after it in the same message
            stopped = True
            continue
        ran = isinstance(e, ToolInvocation)
        if ran and tool_cap is not None and tool_cap.stops_invocation(executed):
            return _Fire(e.seq, tool_cap.spec, CutKind.HARD, CutAt.TOOL_REQUEST, e.tool_call_id)
        seen.append(SeenRequest(e.tool_call_id, e.tool, e.scope or None,
                                failed=ran and e.invocation_status is InvocationStatus.FAILED))  # fmt: skip
        executed += ran
        stopped = contract is not None and contract.executed and contract.tool_call_id == e.tool_call_id
    return contract if stopped else None


def _guard_refused(events: Sequence[TraceEvent], policy: StopRule) -> _Fire | None:
    """The SemanticGuard's recorded call, when the policy's turn or token cap leaves it no room (live, the guard
    counts against the same budgets as the diagnosis loop)."""
    calls = tokens = 0
    for e in events:
        if not isinstance(e, ModelCall):
            continue
        if e.purpose is ModelPurpose.SEMANTIC_GUARD:
            for rule in policy.call_rules:
                if rule.stops_model_call(calls, tokens):
                    return _Fire(e.seq, rule.spec, CutKind.HARD, CutAt.GUARD_CALL, None)
            return None
        calls += 1
        tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
    return None


def _request_seq(events: Sequence[TraceEvent], tool_call_id: str | None) -> int | None:
    """The seq of the first request event of `tool_call_id`."""
    return next((e.seq for e in events if isinstance(e, ToolInvocation | ToolRequestRejected)
                 and e.tool_call_id == tool_call_id), None)  # fmt: skip


def _stopped_by_contract(events: Sequence[TraceEvent]) -> int | None:
    """Where the recorded run was stopped by the information-gain contract: the seq of the request whose decision
    delivered STOP_REQUIRED for INFORMATION_SATURATED (None: it was not)."""
    first = next((e for e in events if isinstance(e, StopRequiredDelivered)), None)
    if first is None or first.stop_reason is not StopReason.INFORMATION_SATURATED:
        return None
    return _request_seq(events, first.tool_call_id)


def _stopped_by_rule(events: Sequence[TraceEvent]) -> int | None:
    """Where the recorded run was stopped by a live stop rule (None: it was not): the seq of the request it was
    refused at (the stop's own event in a plain-loop trace, which records no refused request)."""
    stop = next((e for e in events if isinstance(e, BudgetExhausted) and e.budget is BudgetKind.STOP_RULE), None)
    if stop is None:
        return None
    at = _request_seq(events, stop.tool_call_id)
    return stop.seq if at is None else at


def _judge(run: ReplayableRun, outcome: ReleaseOutcome, fallback_kind: str | None) -> bool | None:
    """The outcome verdict of a run that publishes `outcome` (a fallback or FAILED: no conclusion to read) instead
    of what it published (None: the run is held to no expectation)."""
    if outcome.value == run.outcome and fallback_kind == run.fallback_kind:
        return run.outcome_passed
    if run.expected_outcome is None or run.outcome_passed is None:
        return None
    return any(outcome.value == want and fallback_kind == kind for want, kind in run.passing_outcomes())


def _effect(was: bool | None, now: bool | None) -> Effect:
    if was is None or now is None:
        return Effect.UNJUDGED
    return Effect.KEPT if now == was else (Effect.LOST if was else Effect.GAINED)


def run_under(run: ReplayableRun, policy: StopRule) -> RunUnderPolicy:
    """One stored run under `policy` (see the module docstring)."""
    events = run.events
    recorded = recorded_counts(events)
    base = {"case_run_id": run.case_run_id, "case_id": run.case_id, "epoch": run.epoch, "recorded": recorded,
            "expected_outcome": run.expected_outcome}  # fmt: skip
    harnessed = run.agent != "plain"
    diverges = [_stopped_by_rule(events)]  # where the recorded run was stopped by what the policy does not do
    no_gain = policy.no_gain
    contract: _Fire | None = None
    risk: ConclusionRisk | None = None
    if harnessed and no_gain is not None:
        replayed = replay_run(run, no_gain.threshold)
        if replayed.status is RunStatus.CUT and replayed.cut is not None:
            at = _request_seq(events, replayed.cut.tool_call_id)
            assert at is not None
            ran = replayed.cut.executed
            contract = _Fire(at + 1 if ran else at, no_gain.spec, CutKind.STOP_REQUIRED, CutAt.TOOL_REQUEST,
                             replayed.cut.tool_call_id, ran)  # fmt: skip
            risk = replayed.conclusion
        elif replayed.status is RunStatus.CENSORED:
            diverges.append(_stopped_by_contract(events))
    elif harnessed:
        diverges.append(_stopped_by_contract(events))
    fire = _walk(events, policy, harnessed, contract)
    first_divergence = min((d for d in diverges if d is not None), default=None)
    if first_divergence is not None and (fire is None or fire.spent_at > first_divergence):
        return RunUnderPolicy(**base, status=RunStatus.CENSORED, cut=None, to_cut=None, saved=None, outcome=None,
                              effect=Effect.CENSORED)  # fmt: skip
    if fire is None and harnessed:
        fire = _guard_refused(events, policy)
    if fire is None:
        zero = Counts(tool_invocations=0, model_calls=0, tokens=0)
        return RunUnderPolicy(**base, status=RunStatus.UNCHANGED, cut=None, to_cut=recorded, saved=zero,
                              outcome=ReleaseOutcome(run.outcome),
                              effect=_effect(run.outcome_passed, run.outcome_passed))  # fmt: skip
    spent = spent_before(events, fire.spent_at)
    draft_call = fire.kind is CutKind.STOP_REQUIRED and draft_call_allowed(run, spent.counts, policy)
    cut = StopCut(rule=fire.rule, kind=fire.kind, at=fire.at, tool_call_id=fire.tool_call_id,
                  executed=fire.executed, model_calls=spent.counts.model_calls, tool_requests=spent.requests,
                  draft_call=draft_call)  # fmt: skip
    saved = Counts(tool_invocations=recorded.tool_invocations - spent.counts.tool_invocations,
                   model_calls=recorded.model_calls - spent.counts.model_calls - int(draft_call),
                   tokens=recorded.tokens - spent.counts.tokens)  # fmt: skip
    if draft_call:  # the Draft written after STOP_REQUIRED was never recorded
        effect = Effect.AT_RISK if run.outcome_passed and risk is ConclusionRisk.AT_RISK else Effect.UNKNOWN
        return RunUnderPolicy(**base, status=RunStatus.CUT, cut=cut, to_cut=spent.counts, saved=saved, outcome=None,
                              effect=effect)  # fmt: skip
    # no Draft follows: Release publishes from what the run verified before the cut (the plain loop: FAILED); a
    # Draft refused its guard call passed EvidenceGuard, so it cited completed calls
    facts = True if fire.at is CutAt.GUARD_CALL else spent.facts
    outcome = ReleaseOutcome.FALLBACK if harnessed and facts else ReleaseOutcome.FAILED
    kind = "INSUFFICIENT_EVIDENCE" if outcome is ReleaseOutcome.FALLBACK else None
    effect = _effect(run.outcome_passed, _judge(run, outcome, kind))
    return RunUnderPolicy(**base, status=RunStatus.CUT, cut=cut, to_cut=spent.counts, saved=saved, outcome=outcome,
                          effect=effect)  # fmt: skip


# -- over runs ------------------------------------------------------------------------------------------------------
def _by_case(runs: Sequence[RunUnderPolicy], value: Callable[[RunUnderPolicy], float | None]) -> list[float]:
    """Per case, the mean of `value` over its runs (epochs); runs where it is None left out."""
    groups: dict[str, list[float]] = {}
    for r in runs:
        v = value(r)
        if v is not None:
            groups.setdefault(r.case_id, []).append(float(v))
    return [sum(vs) / len(vs) for vs in groups.values()]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


_KNOWN = {Effect.GAINED: 1.0, Effect.LOST: 0.0, Effect.AT_RISK: 0.0, Effect.UNKNOWN: 0.0, Effect.CENSORED: 0.0}
"""Whether a run is known to pass under the policy, by effect (KEPT: as recorded)."""
_BEST = {Effect.GAINED: 1.0, Effect.LOST: 0.0, Effect.AT_RISK: 1.0, Effect.UNKNOWN: 1.0, Effect.CENSORED: 1.0}
"""Whether it passes if everything not known went its best way."""


def _tally(runs: Sequence[RunUnderPolicy], passed: dict[str, bool | None]) -> VerdictTally:
    judged = [(r.effect, passed[r.case_run_id]) for r in runs if passed[r.case_run_id] is not None]
    return VerdictTally(
        runs=len(judged),
        kept=sum(e is Effect.KEPT and bool(was) for e, was in judged),
        lost=sum(e is Effect.LOST for e, _ in judged),
        gained=sum(e is Effect.GAINED for e, _ in judged),
        unknown=sum(e in (Effect.UNKNOWN, Effect.AT_RISK, Effect.CENSORED) for e, _ in judged),
    )


def _policy(runs: Sequence[ReplayableRun], policy: StopRule) -> PolicyResult:
    per_run = tuple(run_under(r, policy) for r in runs)
    passed = {r.case_run_id: r.outcome_passed for r in runs}

    def scored(table: dict[Effect, float]) -> Callable[[RunUnderPolicy], float | None]:
        def score(r: RunUnderPolicy) -> float | None:
            was = passed[r.case_run_id]
            if was is None:
                return None
            return float(was) if r.effect is Effect.KEPT else table.get(r.effect)

        return score

    def was(r: RunUnderPolicy) -> float | None:
        value = passed[r.case_run_id]
        return None if value is None else float(value)

    success = [r for r in per_run if r.expected_outcome == ReleaseOutcome.SUCCESS.value]
    fallback = [r for r in per_run if r.expected_outcome == ReleaseOutcome.FALLBACK.value]
    effects: dict[Effect, int] = {}
    for r in per_run:
        effects[r.effect] = effects.get(r.effect, 0) + 1
    answered = [r for r in per_run if r.saved is not None]

    def saving(count: Callable[[Counts], int]) -> Interval:
        return t_interval(_by_case(answered, lambda r: None if r.saved is None else count(r.saved)))

    spent = [(r.recorded, r.saved) for r in answered if r.saved is not None]
    return PolicyResult(
        policy=policy.spec,
        run_count=len(per_run),
        runs_cut=sum(r.status is RunStatus.CUT for r in per_run),
        runs_censored=sum(r.status is RunStatus.CENSORED for r in per_run),
        success_cases=len({r.case_id for r in success}),
        recall_recorded=_mean(_by_case(success, was)),
        recall_kept=t_interval(_by_case(success, scored(_KNOWN))),
        recall_at_most=_mean(_by_case(success, scored(_BEST))),
        fallback_cases=len({r.case_id for r in fallback}),
        honest_recorded=_mean(_by_case(fallback, was)),
        honest_kept=t_interval(_by_case(fallback, scored(_KNOWN))),
        honest_at_most=_mean(_by_case(fallback, scored(_BEST))),
        recall_runs=_tally(success, passed),
        honest_runs=_tally(fallback, passed),
        effects={e: effects[e] for e in Effect if e in effects},
        tool_invocations_saved=saving(lambda c: c.tool_invocations),
        model_calls_saved=saving(lambda c: c.model_calls),
        tokens_saved=saving(lambda c: c.tokens),
        predicted=Predicted(
            tool_invocations=sum(rec.tool_invocations - s.tool_invocations for rec, s in spent),
            model_calls=sum(rec.model_calls - s.model_calls for rec, s in spent),
            tokens=sum(rec.tokens - s.tokens for rec, s in spent),
            tokens_exact=not any(r.cut is not None and r.cut.draft_call for r in per_run),
        ),
        runs=per_run,
    )


def _pareto(results: Sequence[PolicyResult]) -> tuple[str, ...]:
    """The policies no other beats on both recall kept and tool calls saved (a missing mean counts as 0)."""
    points = [(p.policy, p.recall_kept.mean or 0.0, p.tool_invocations_saved.mean or 0.0) for p in results]
    return tuple(
        name for name, r, s in points
        if not any(r2 >= r and s2 >= s and (r2 > r or s2 > s) for _, r2, s2 in points)
    )  # fmt: skip


def compare_stops(runs: Sequence[ReplayableRun], policies: Sequence[StopRule]) -> CompareStops:
    """Every policy over `runs` (each policy's runs paired per case with the runs as recorded)."""
    problem = unreplayable(runs, "to compare stop rules on")
    if problem is not None:
        raise CompareStopsInputError(problem)
    plain = next((r.case_run_id for r in runs if r.agent == "plain"), None)
    contract = next((p.spec for p in policies if p.no_gain is not None), None)
    if plain is not None and contract is not None:
        raise CompareStopsInputError(
            f"--policy {contract}: case run {plain} ran the plain loop (--agent plain), which has no information-gain"
            " contract to replay; compare caps and loop detectors on plain runs"
        )
    results = tuple(_policy(runs, p) for p in policies)
    return CompareStops(policies=results, pareto=_pareto(results))


def default_policies(runs: Sequence[ReplayableRun]) -> tuple[StopRule, ...]:
    """The policies a report compares when none is given: the contract at the runs' threshold (their baseline) and
    each lower one, tool and turn caps at a few levels below the runs' budgets, the loop detectors at the peers'
    settings, and the contract at 2 or a cap of 8 (plain-loop runs, which have no contract: the caps and detectors
    only)."""
    top = max((r.no_gain_threshold for r in runs), default=2)
    tools = max((r.max_tool_invocations for r in runs), default=10)
    calls = max((r.max_model_calls for r in runs), default=12)
    plain = any(r.agent == "plain" for r in runs)  # no contract to replay: caps and detectors only
    specs = [] if plain else [f"no-gain:{t}" for t in range(top, 0, -1)]
    specs += [f"tool-cap:{n}" for n in (4, 6, 8) if n < tools]
    specs += [f"turn-cap:{n}" for n in (4, 6, 8) if n < calls]
    specs += ["repeat:k=3,w=10", "repeat:k=5,w=10", "error-cycle:k=2", "alternation:k=2"]
    specs += ["tool-cap:8"] if plain else ["no-gain:2+tool-cap:8"]
    return tuple(parse_rules(s) for s in dict.fromkeys(specs))

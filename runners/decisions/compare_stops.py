"""Which stop rule pays: each declared policy's counterfactual on stored runs, exact up to its cut, paired per case
against the runs as recorded.

A stop rule only stops a run; it never changes what the model saw before the stop. So up to the first place a policy
would stop a stored run, the run is the recorded run, and everything before that place is known exactly:

- a cap or a loop detector (runners/domain/stop_rules.py) stops the run as a budget does: the request (or model
  call) it fires on does not run, no further model call is made, and what is published follows from what the run had
  at the cut — a FALLBACK (INSUFFICIENT_EVIDENCE) when a call completed before it, else FAILED; a plain-loop run
  (`--agent plain`) publishes nothing on a limit: FAILED. These cuts are exact, savings and outcome alike;
- the contract's `no-gain:T` delivers STOP_REQUIRED earlier (the what-if's replay through the real tracker,
  runners/decisions/whatif.py): the model gets one call for its Draft, whose content, tokens and outcome were never
  recorded (UNKNOWN); a published conclusion citing a record obtained after the cut is AT_RISK;
- nothing fires before the run's recorded end: UNCHANGED;
- the recorded run was stopped by the contract (STOP_REQUIRED) where the policy would have let it go on (a policy
  without `no-gain`, or with a higher threshold): CENSORED — what it would have done next was never recorded.

The recorded budgets hold under every policy (they are the last line of defence whatever the stop rule). The case is
the unit: per case the runs' (epochs') effects are averaged, and intervals are 95% t intervals over cases.

Pure: stored runs in (`runners.store.whatif_runs`), typed results out; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict
from scipy import stats

from harness import (
    InvocationStatus,
    ModelCall,
    ModelPurpose,
    ReleaseOutcome,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
    TraceEvent,
)
from runners.decisions.whatif import ConclusionRisk, Counts, RunStatus, recorded_counts, replay_run
from runners.domain.stop_rules import CallRule, NoGain, Request, RequestRule, StopRule, TokenCap, ToolCap
from runners.store.whatif_runs import ReplayableRun

__all__ = [
    "NOTES",
    "CompareStops",
    "CutKind",
    "Effect",
    "Interval",
    "PolicyResult",
    "RunUnderPolicy",
    "StopCut",
    "compare_stops",
    "run_under",
]

CONFIDENCE = 0.95
"""The level of the intervals over cases."""

NOTES = (
    "exact up to the cut: a stop rule changes nothing the model saw before it",
    "a cap or loop detector ends the run there (no further model call): its outcome and savings are exact",
    "no-gain: the model writes its Draft after the earlier STOP_REQUIRED; that Draft, its tokens and its outcome"
    " were never recorded (unknown): model calls saved count that call once, tokens saved are at most the figure",
    "censored: the recorded run was stopped by STOP_REQUIRED where the policy would have let it go on; what it"
    " would have done next was never recorded, so it is left out of the savings and counted apart",
    "the recorded budgets (model calls, tool invocations, tokens, deadline) hold under every policy",
)
"""What the comparison cannot know, said once (printed under the table, written into the JSON)."""


class CutKind(StrEnum):
    """How a policy stops a run."""

    HARD = "HARD"
    """A cap or a loop detector: the run ends there, no further model call."""
    STOP_REQUIRED = "STOP_REQUIRED"
    """The contract: STOP_REQUIRED, then one model call for the Draft."""


class Effect(StrEnum):
    """What a policy does to a run's verdict."""

    KEPT = "KEPT"
    """The run publishes what it published (not cut, or cut after nothing that mattered: known)."""
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


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StopCut(_Model):
    """Where a policy stops a run."""

    rule: str
    """The rule that fired first (its spec)."""
    kind: CutKind
    """A hard stop, or STOP_REQUIRED."""
    model_calls: int
    """Diagnosis model calls made before the cut."""
    tool_requests: int
    """Tool requests answered before the cut (the request it fired on is not one of them unless it ran)."""
    tool_call_id: str | None
    """The tool request it fired on (None: it fired before a model call)."""


class RunUnderPolicy(_Model):
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
    saved: Counts | None
    """Recorded minus what the run spends under the policy (None: censored)."""
    outcome: ReleaseOutcome | None
    """What it publishes under the policy (None: not known)."""
    effect: Effect
    """What the policy does to its outcome verdict."""
    expected_outcome: str | None
    """Its case's expected outcome."""


class Interval(_Model):
    """A mean over cases with its 95% t interval."""

    mean: float | None
    """The mean (None: no case)."""
    low: float | None
    """Lower end (None: under two cases)."""
    high: float | None
    """Upper end (None: under two cases)."""
    cases: int
    """Cases it is over."""


class PolicyResult(_Model):
    """One policy over the selected runs."""

    policy: str
    """The policy's spec."""
    runs: int
    """Runs."""
    runs_cut: int
    """Runs it stops earlier."""
    runs_censored: int
    """Runs it cannot answer."""
    success_cases: int
    """Cases expected to end in SUCCESS (the recall's denominator)."""
    recall_recorded: float | None
    """Recall as recorded (per case, then averaged)."""
    recall_kept: Interval
    """Recall under the policy, counting only what is known to pass (unknown and at-risk runs as lost)."""
    recall_at_most: float | None
    """Recall under the policy if every unknown and at-risk run kept its SUCCESS."""
    honest_recorded: float | None
    """Honest fallback as recorded (cases expected to end in FALLBACK)."""
    honest_kept: Interval
    """Honest fallback under the policy, known only."""
    effects: dict[str, int]
    """Runs per effect."""
    tool_invocations_saved: Interval
    """Tool invocations saved per run (per case, then averaged)."""
    model_calls_saved: Interval
    """Model calls saved per run."""
    tokens_saved: Interval
    """Tokens saved per run (an upper bound where a STOP_REQUIRED cut's Draft call is not known)."""
    predicted: Counts
    """What the runs not censored spend under the policy, summed."""
    per_run: tuple[RunUnderPolicy, ...]
    """Every run under this policy."""


class CompareStops(_Model):
    """Every policy over the selected runs."""

    policies: tuple[PolicyResult, ...]
    """One per policy, in the order given."""
    notes: tuple[str, ...] = NOTES
    """What cannot be known, and how it is counted."""

    def pareto(self) -> tuple[str, ...]:
        """The policies no other beats on both recall kept and tool invocations saved (ties kept)."""
        points = [(p.policy, p.recall_kept.mean or 0.0, p.tool_invocations_saved.mean or 0.0) for p in self.policies]
        return tuple(
            name for name, r, s in points
            if not any((r2 >= r and s2 >= s) and (r2 > r or s2 > s) for _, r2, s2 in points)
        )  # fmt: skip


# -- one run --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Fire:
    seq: int
    """The event before which the run stops (events with a lower seq happened)."""
    rule: str
    kind: CutKind
    tool_call_id: str | None


def _first_hard(events: Sequence[TraceEvent], request_rules: Sequence[RequestRule], call_rules: Sequence[CallRule],
                ) -> _Fire | None:  # fmt: skip
    """The first place a cap or detector fires, walking the recorded events in order."""
    requests: list[Request] = []
    executed = calls = tokens = 0
    for e in events:
        if isinstance(e, ModelCall) and e.purpose is ModelPurpose.DIAGNOSIS:
            for rule in call_rules:
                if rule.stops_model_call(calls, tokens):
                    return _Fire(e.seq, rule.spec, CutKind.HARD, None)
            calls += 1
            tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
            continue
        if not isinstance(e, ToolInvocation | ToolRequestRejected):
            continue
        for call_rule in call_rules:  # a turn whose answer used the tokens up runs none of its tool calls
            if isinstance(call_rule, TokenCap) and call_rule.stops_model_call(calls, tokens):
                return _Fire(e.seq, call_rule.spec, CutKind.HARD, e.tool_call_id)
        failed = isinstance(e, ToolInvocation) and e.invocation_status is InvocationStatus.FAILED
        request = Request(e.tool, e.scope or None, failed=failed)
        for request_rule in request_rules:
            if isinstance(request_rule, ToolCap) and not isinstance(e, ToolInvocation):
                continue  # a request refused before the backend is no backend call
            if request_rule.stops_request(executed, requests, request):
                return _Fire(e.seq, request_rule.spec, CutKind.HARD, e.tool_call_id)
        requests.append(request)
        executed += isinstance(e, ToolInvocation)
    return None


def _spent_before(events: Sequence[TraceEvent], seq: int) -> tuple[Counts, int]:
    tools = calls = tokens = requests = 0
    for e in events:
        if e.seq >= seq:
            break
        if isinstance(e, ModelCall) and e.purpose is ModelPurpose.DIAGNOSIS:
            calls += 1
            tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
        elif isinstance(e, ToolInvocation):
            tools += 1
            requests += 1
        elif isinstance(e, ToolRequestRejected):
            requests += 1
    return Counts(tool_invocations=tools, model_calls=calls, tokens=tokens), requests


def _passes(run: ReplayableRun, outcome: ReleaseOutcome, fallback_kind: str | None) -> bool:
    """Whether a hard cut's outcome passes the case's outcome expectation (a FALLBACK or FAILED needs no words)."""
    return outcome.value == run.expected_outcome and (
        outcome is not ReleaseOutcome.FALLBACK or fallback_kind == run.expected_fallback_kind
    )


def run_under(run: ReplayableRun, policy: StopRule) -> RunUnderPolicy:
    """One stored run under `policy` (see the module docstring)."""
    events = run.events
    recorded = recorded_counts(events)
    base = {"case_run_id": run.case_run_id, "case_id": run.case_id, "epoch": run.epoch, "recorded": recorded,
            "expected_outcome": run.expected_outcome}  # fmt: skip
    passed = bool(run.outcome_passed)
    harnessed = run.agent != "plain"
    hard = _first_hard(events, policy.request_rules, policy.call_rules)
    contract: _Fire | None = None
    no_gain: NoGain | None = policy.no_gain
    stop_seq = next((e.seq for e in events if isinstance(e, StopRequiredDelivered)), None)
    if harnessed and no_gain is not None:
        replayed = replay_run(run, no_gain.threshold)
        if replayed.status is RunStatus.CUT and replayed.cut is not None:
            at = next(e for e in events if isinstance(e, ToolInvocation | ToolRequestRejected)
                      and e.tool_call_id == replayed.cut.tool_call_id)  # fmt: skip
            contract = _Fire(at.seq + (1 if replayed.cut.executed else 0), no_gain.spec, CutKind.STOP_REQUIRED,
                             replayed.cut.tool_call_id)  # fmt: skip
        elif replayed.status is RunStatus.CENSORED and (hard is None or stop_seq is None or hard.seq > stop_seq):
            return RunUnderPolicy(**base, status=RunStatus.CENSORED, cut=None, saved=None, outcome=None,
                                  effect=Effect.CENSORED)  # fmt: skip
    elif harnessed and stop_seq is not None and (hard is None or hard.seq > stop_seq):
        # the contract stopped the recorded run where this policy would not have
        return RunUnderPolicy(**base, status=RunStatus.CENSORED, cut=None, saved=None, outcome=None,
                              effect=Effect.CENSORED)  # fmt: skip
    fire = min((f for f in (hard, contract) if f is not None), key=lambda f: f.seq, default=None)
    if fire is None:
        return RunUnderPolicy(**base, status=RunStatus.UNCHANGED, cut=None,
                              saved=Counts(tool_invocations=0, model_calls=0, tokens=0),
                              outcome=ReleaseOutcome(run.outcome), effect=Effect.KEPT)  # fmt: skip
    spent, requests = _spent_before(events, fire.seq)
    cut = StopCut(rule=fire.rule, kind=fire.kind, model_calls=spent.model_calls, tool_requests=requests,
                  tool_call_id=fire.tool_call_id)  # fmt: skip
    if fire.kind is CutKind.HARD:
        facts = spent.tool_invocations > 0 and any(
            isinstance(e, ToolInvocation) and e.seq < fire.seq and e.invocation_status is InvocationStatus.COMPLETED
            for e in events
        )  # fmt: skip
        outcome = ReleaseOutcome.FALLBACK if harnessed and facts else ReleaseOutcome.FAILED
        kind = "INSUFFICIENT_EVIDENCE" if outcome is ReleaseOutcome.FALLBACK else None
        now = _passes(run, outcome, kind)
        effect = Effect.KEPT if now == passed else (Effect.LOST if passed else Effect.GAINED)
        saved = Counts(tool_invocations=recorded.tool_invocations - spent.tool_invocations,
                       model_calls=recorded.model_calls - spent.model_calls,
                       tokens=recorded.tokens - spent.tokens)  # fmt: skip
        return RunUnderPolicy(**base, status=RunStatus.CUT, cut=cut, saved=saved, outcome=outcome, effect=effect)
    # STOP_REQUIRED: the Draft call follows (if the budgets allow), its answer never recorded
    draft_call = spent.model_calls < run.max_model_calls and spent.tokens < run.max_total_tokens
    saved = Counts(tool_invocations=recorded.tool_invocations - spent.tool_invocations,
                   model_calls=max(recorded.model_calls - spent.model_calls - int(draft_call), 0),
                   tokens=recorded.tokens - spent.tokens)  # fmt: skip
    risk = replay_run(run, no_gain.threshold).conclusion if no_gain is not None else None
    effect = Effect.AT_RISK if passed and risk is ConclusionRisk.AT_RISK else Effect.UNKNOWN
    return RunUnderPolicy(**base, status=RunStatus.CUT, cut=cut, saved=saved, outcome=None, effect=effect)


# -- over runs ------------------------------------------------------------------------------------------------------
def _interval(values: Sequence[float]) -> Interval:
    if not values:
        return Interval(mean=None, low=None, high=None, cases=0)
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return Interval(mean=mean, low=None, high=None, cases=n)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1)) * sd / math.sqrt(n)
    return Interval(mean=mean, low=mean - half, high=mean + half, cases=n)


def _by_case(runs: Sequence[RunUnderPolicy], value: Callable[[RunUnderPolicy], float | None]) -> list[float]:
    """Per case, the mean of `value` over its runs (epochs); runs where it is None left out."""
    groups: dict[str, list[float]] = {}
    for r in runs:
        v = value(r)
        if v is not None:
            groups.setdefault(r.case_id, []).append(float(v))
    return [sum(vs) / len(vs) for vs in groups.values()]


def _policy(runs: Sequence[ReplayableRun], policy: StopRule) -> PolicyResult:
    per_run = tuple(run_under(r, policy) for r in runs)
    by_id = {r.case_run_id: r for r in runs}
    known = [r for r in per_run if r.status is not RunStatus.CENSORED]

    def was(r: RunUnderPolicy) -> float:
        return float(bool(by_id[r.case_run_id].outcome_passed))

    def passes_now(r: RunUnderPolicy) -> float | None:
        """Known to pass under the policy (an unknown or at-risk run counted as failing)."""
        known_pass = {Effect.KEPT: was(r), Effect.GAINED: 1.0, Effect.LOST: 0.0, Effect.AT_RISK: 0.0,
                      Effect.UNKNOWN: 0.0}  # fmt: skip
        return known_pass.get(r.effect)

    def passes_at_most(r: RunUnderPolicy) -> float | None:
        """Passes if every unknown and at-risk run went its best way."""
        best = {Effect.KEPT: was(r), Effect.GAINED: 1.0, Effect.LOST: 0.0, Effect.AT_RISK: 1.0, Effect.UNKNOWN: 1.0}
        return best.get(r.effect)

    success = [r for r in per_run if r.expected_outcome == ReleaseOutcome.SUCCESS.value]
    fallback = [r for r in per_run if r.expected_outcome == ReleaseOutcome.FALLBACK.value]
    recorded_recall = _by_case(success, was)
    recorded_honest = _by_case(fallback, was)
    at_most = _by_case(success, passes_at_most)
    effects: dict[str, int] = {}
    for r in per_run:
        effects[r.effect.value] = effects.get(r.effect.value, 0) + 1
    saved = [(r, r.saved) for r in known if r.saved is not None]
    answered = [r for r, _ in saved]
    by_run = {r.case_run_id: s for r, s in saved}
    return PolicyResult(
        policy=policy.spec,
        runs=len(per_run),
        runs_cut=sum(r.status is RunStatus.CUT for r in per_run),
        runs_censored=sum(r.status is RunStatus.CENSORED for r in per_run),
        success_cases=len({r.case_id for r in success}),
        recall_recorded=sum(recorded_recall) / len(recorded_recall) if recorded_recall else None,
        recall_kept=_interval(_by_case(success, passes_now)),
        recall_at_most=sum(at_most) / len(at_most) if at_most else None,
        honest_recorded=sum(recorded_honest) / len(recorded_honest) if recorded_honest else None,
        honest_kept=_interval(_by_case(fallback, passes_now)),
        effects=dict(sorted(effects.items())),
        tool_invocations_saved=_interval(_by_case(answered, lambda r: by_run[r.case_run_id].tool_invocations)),
        model_calls_saved=_interval(_by_case(answered, lambda r: by_run[r.case_run_id].model_calls)),
        tokens_saved=_interval(_by_case(answered, lambda r: by_run[r.case_run_id].tokens)),
        predicted=Counts(
            tool_invocations=sum(r.recorded.tool_invocations - s.tool_invocations for r, s in saved),
            model_calls=sum(r.recorded.model_calls - s.model_calls for r, s in saved),
            tokens=sum(r.recorded.tokens - s.tokens for r, s in saved),
        ),
        per_run=per_run,
    )


def compare_stops(runs: Sequence[ReplayableRun], policies: Sequence[StopRule]) -> CompareStops:
    """Every policy over `runs` (each policy's runs paired per case with the runs as recorded)."""
    return CompareStops(policies=tuple(_policy(runs, p) for p in policies))

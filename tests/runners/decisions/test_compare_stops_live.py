"""`compare-stops` is validated where the truth is known: for every scripted behaviour profile and every kind of
stop rule, the counterfactual computed from runs stored at the default settings equals a live run under the policy
(the loop detectors as the Harness's request checks, `--stop-rule`; the caps as the budgets; the contract as the
threshold) in every count up to the cut — the cut request or model call, every request before it, the tool
invocations, model calls and tokens spent there — and, for a hard cut, the published outcome and its verdict exactly.

What cannot be equal is not compared as equal: after a STOP_REQUIRED cut the live run's Draft was never recorded
(its model calls are the cut's plus that one call); a censored run is compared only up to where the recorded run was
stopped; a run the policy leaves alone must be the recorded run, request for request. Each test counts what it
exercised: a policy that cut nothing would prove nothing."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb
import pytest

from harness import (
    BudgetExhausted,
    BudgetKind,
    ModelCall,
    ModelPurpose,
    RejectionReason,
    StopReason,
    StopRequiredDelivered,
    ToolInvocation,
    ToolRequestRejected,
    TraceEvent,
)
from runners.cli import main
from runners.decisions.compare_stops import CutAt, CutKind, Effect, RunUnderPolicy, run_under
from runners.decisions.counterfactual import Counts, RunStatus, recorded_counts
from runners.domain.profiles import PROFILES
from runners.domain.stop_rules import RuleKind, StopRule, parse_rules
from runners.plan.bench_config import live_settings
from runners.plan.settings import declaration
from runners.store.connection import connect
from runners.store.replayable_runs import ReplayableRun, runs_of_label

CASES = (
    "tool_failures_failing_logs_retried_until_budget_t14",
    "duplicate_scopes_log_field_order_gateway_pool_t1",
    "multi_call_turns_parallel_model_within_tool_budget_t5",
    "budget_exhaustion_retrying_failed_log_scope_acme_pay",
    "diagnosable_late_settlement_cutoff_t2",
    "generic_kb_refund_policy_gained_then_generic_northwind",
)
"""The fewest cases on which every kind of rule cuts some run of every profile (an error cycle needs a failing
backend, an alternation two calls asked in turn, a turn cap a Draft the SemanticGuard checks) and every way a cut can
fall is met: unchanged, censored, STOP_REQUIRED with and without the Draft call, hard at a request, a model call or
the guard's call, each with the verdict kept, lost or gained — as a wider set of fourteen cases met them."""

POLICIES = {
    RuleKind.NO_GAIN: "no-gain:1",
    RuleKind.TOOL_CAP: "tool-cap:2",
    RuleKind.TURN_CAP: "turn-cap:3",
    RuleKind.TOKEN_CAP: "token-cap:6000",
    RuleKind.REPEAT: "repeat:k=2,w=4",
    RuleKind.ERROR_CYCLE: "error-cycle:k=2",
    RuleKind.ALTERNATION: "alternation:k=2",
}
"""One policy per kind, with parameters that cut runs of these cases."""

_BUDGET = {RuleKind.TOOL_CAP: BudgetKind.TOOL_INVOCATIONS, RuleKind.TURN_CAP: BudgetKind.MODEL_CALLS,
           RuleKind.TOKEN_CAP: BudgetKind.TOKENS, RuleKind.REPEAT: BudgetKind.STOP_RULE,
           RuleKind.ERROR_CYCLE: BudgetKind.STOP_RULE, RuleKind.ALTERNATION: BudgetKind.STOP_RULE}  # fmt: skip
"""The budget a live run records when a hard rule stops it."""


def _run(db: Path, label: str, profile: str, flags: Sequence[str], agent: str = "native") -> None:
    argv = ["run", "--model", f"scripted:{profile}", "--db", str(db), "--label", label, "--agent", agent, *flags,
            *(a for c in CASES for a in ("--case", c))]  # fmt: skip
    assert main(argv) == 0


def _flags(policy: StopRule) -> list[str]:
    """The run flags of `policy` live (runners/plan/bench_config.py says which setting each rule is)."""
    decl = declaration()
    return [a for name, value in live_settings(policy).items() if value is not None
            for a in (decl[name].flag, str(value))]  # fmt: skip


class _Store:
    """One database for the module's runs, the recorded ones under their profile's label and each live run under its
    own, with a connection held open for the module: every `harness-bench run` here opens the same file, and DuckDB
    hands a process's later connections to a file it holds open the same database instead of building a new one
    (about 15 ms a connection, two a live run); the runs are read over the held connection."""

    def __init__(self, db: Path, con: duckdb.DuckDBPyConnection) -> None:
        self.db, self.con = db, con
        self._recorded: dict[str, dict[tuple[str, int], ReplayableRun]] = {}
        self._live = itertools.count(1)

    def read(self, label: str) -> dict[tuple[str, int], ReplayableRun]:
        runs = runs_of_label(self.con, str(self.db), label)
        assert len({r.bench_run_id for r in runs}) == 1, label  # one run's, not another's under the same label
        return {(r.case_id, r.epoch): r for r in runs}

    def recorded(self, label: str) -> dict[tuple[str, int], ReplayableRun]:
        """The recorded runs of a label, read once: only the fixture writes them, and each label is compared with
        a dozen live runs."""
        if label not in self._recorded:
            self._recorded[label] = self.read(label)
        return self._recorded[label]

    def live_label(self, agent: str, profile: str) -> str:
        """A label no other run of the module has."""
        return f"live/{agent}/{profile}/{next(self._live)}"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Store]:
    """Every profile's runs at the default settings (the contract at 2, the default budgets), the Harness's and the
    plain loop's, in the module's database (each test adds its live run there, under a label of its own)."""
    db = tmp_path_factory.mktemp("stops") / "stops.duckdb"
    first, *others = PROFILES
    _run(db, first, first, [])  # the file made, and its schema, as a run makes them
    con = connect(db)
    try:
        for profile in others:
            _run(db, profile, profile, [])
        for profile in ("reference", "parallel"):
            _run(db, f"plain/{profile}", profile, [], agent="plain")
        yield _Store(db, con)
    finally:
        con.close()


# -- the comparison of one run ------------------------------------------------------------------------------------
def _requests(events: Sequence[TraceEvent]) -> list[tuple[object, ...]]:
    """Every tool request as the loop decided it."""
    out: list[tuple[object, ...]] = []
    for e in events:
        if isinstance(e, ToolInvocation):
            out.append((e.tool_call_id, e.tool, e.scope, e.invocation_status, e.evidence_status))
        elif isinstance(e, ToolRequestRejected):
            out.append((e.tool_call_id, e.tool, e.scope, e.rejection, e.violation))
    return out


def _index(events: Sequence[TraceEvent], call_id: str | None) -> int:
    """The position of request `call_id` among the run's requests."""
    return next(i for i, r in enumerate(_requests(events)) if r[0] == call_id)


def _before(events: Sequence[TraceEvent], seq_of: TraceEvent | None) -> Counts:
    """Tool invocations, diagnosis model calls and tokens before event `seq_of` (all of them when None)."""
    tools = calls = tokens = 0
    for e in events:
        if seq_of is not None and e.seq >= seq_of.seq:
            break
        if isinstance(e, ModelCall) and e.purpose is ModelPurpose.DIAGNOSIS:
            calls += 1
            tokens += (e.input_tokens or 0) + (e.output_tokens or 0)
        elif isinstance(e, ToolInvocation):
            tools += 1
    return Counts(tool_invocations=tools, model_calls=calls, tokens=tokens)


def _request_event(events: Sequence[TraceEvent], call_id: str | None) -> TraceEvent:
    return next(e for e in events if isinstance(e, ToolInvocation | ToolRequestRejected) and e.tool_call_id == call_id)


def _stops(events: Sequence[TraceEvent]) -> list[tuple[object, ...]]:
    """Every stop the run recorded: STOP_REQUIRED deliveries and budget stops."""
    return [(type(e).__name__, getattr(e, "budget", None), getattr(e, "stop_reason", None), e.tool_call_id)
            for e in events if isinstance(e, StopRequiredDelivered | BudgetExhausted)]  # fmt: skip


def _verdict_matches(cf: RunUnderPolicy, recorded: ReplayableRun, live: ReplayableRun) -> None:
    expected = {Effect.KEPT: recorded.outcome_passed, Effect.LOST: False, Effect.GAINED: True}[cf.effect]
    assert live.outcome_passed is expected, cf.case_id


def _compare(cf: RunUnderPolicy, recorded: ReplayableRun, live: ReplayableRun) -> str:
    """The counterfactual of `recorded` against the `live` run under the policy; returns what was compared."""
    where = f"{cf.case_id} ({cf.status.value}{'/' + cf.cut.at.value if cf.cut else ''})"
    rec, got = recorded.events, live.events
    if cf.status is RunStatus.UNCHANGED:  # the live run is the recorded run
        assert _requests(got) == _requests(rec), where
        assert _stops(got) == _stops(rec), where
        assert recorded_counts(got) == cf.recorded == cf.to_cut, where
        assert (live.outcome, live.fallback_kind, live.outcome_passed) == (
            recorded.outcome, recorded.fallback_kind, recorded.outcome_passed), where  # fmt: skip
        return "unchanged"
    if cf.status is RunStatus.CENSORED:  # the same run up to where the recorded one was stopped
        stop = next(
            e
            for e in rec
            if (isinstance(e, BudgetExhausted) and e.budget is BudgetKind.STOP_RULE)
            or (isinstance(e, StopRequiredDelivered) and e.stop_reason is StopReason.INFORMATION_SATURATED)
        )
        n = _index(rec, stop.tool_call_id)
        assert _requests(got)[:n] == _requests(rec)[:n], where
        at = _request_event(rec, stop.tool_call_id)
        assert _before(got, _request_event(got, stop.tool_call_id)) == _before(rec, at), where
        return "censored"
    cut = cf.cut
    assert cut is not None and cf.to_cut is not None, where
    if cut.kind is CutKind.STOP_REQUIRED:
        stops = [e for e in got if isinstance(e, StopRequiredDelivered)]
        assert stops and stops[0].tool_call_id == cut.tool_call_id, where
        same = cut.tool_requests  # (refused: the live run rejected what the recorded one ran)
        assert same == _index(rec, cut.tool_call_id) + int(cut.executed), where
        assert _requests(got)[:same] == _requests(rec)[:same], where
        live_at = _request_event(got, cut.tool_call_id)
        spent = _before(got, None if cut.executed else live_at)
        assert spent.tool_invocations == recorded_counts(got).tool_invocations == cf.to_cut.tool_invocations, where
        assert _before(got, live_at).model_calls == cf.to_cut.model_calls, where
        assert _before(got, live_at).tokens == cf.to_cut.tokens, where
        assert recorded_counts(got).model_calls == cf.to_cut.model_calls + int(cut.draft_call), where
        if not cut.draft_call:
            assert cf.outcome is not None and live.outcome == cf.outcome.value, where
        return "stop-required"
    # a hard cut: the live run stopped there, spent exactly that, and published the predicted outcome
    assert recorded_counts(got) == cf.to_cut, where
    assert cf.outcome is not None and live.outcome == cf.outcome.value, where
    assert live.fallback_kind == ("INSUFFICIENT_EVIDENCE" if cf.outcome.value == "FALLBACK" else None), where
    _verdict_matches(cf, recorded, live)
    budget = next(e for e in got if isinstance(e, BudgetExhausted))
    fired = parse_rules(cut.rule).rules[0].kind
    assert budget.budget is _BUDGET[fired], where
    if cut.at is CutAt.TOOL_REQUEST:
        n = cut.tool_requests  # (a detector firing after a STOP_REQUIRED in its message: the requests before it)
        assert _requests(got)[:n] == _requests(rec)[:n], where
        refused = _request_event(got, cut.tool_call_id) if live.agent != "plain" else None
        if refused is not None:  # the Harness traces the request it refused (the plain loop runs nothing)
            assert isinstance(refused, ToolRequestRejected), where
            reason = RejectionReason.STOP_RULE if budget.budget is BudgetKind.STOP_RULE else RejectionReason.BUDGET
            assert refused.rejection is reason, where
        if fired is not RuleKind.TOKEN_CAP:
            assert budget.tool_call_id == cut.tool_call_id, where
    elif cut.at is CutAt.MODEL_CALL:
        assert budget.tool_call_id is None and cut.model_calls == cf.to_cut.model_calls, where
        assert _requests(got) == _requests(rec)[: len(_requests(got))], where
    else:  # the SemanticGuard's call: the whole diagnosis as recorded, no guard call
        assert _requests(got) == _requests(rec), where
        assert not any(isinstance(e, ModelCall) and e.purpose is ModelPurpose.SEMANTIC_GUARD for e in got), where
    return f"hard at {cut.at.value.lower()}"


def _check(store: _Store, label: str, profile: str, spec: str, agent: str) -> Counter[str]:
    policy = parse_rules(spec)
    live_label = store.live_label(agent, profile)
    _run(store.db, live_label, profile, _flags(policy), agent=agent)
    stored, live = store.recorded(label), store.read(live_label)
    assert set(stored) == set(live) and len(stored) == len(CASES)
    seen: Counter[str] = Counter()
    for key, run in stored.items():
        seen[_compare(run_under(run, policy), run, live[key])] += 1
    return seen


@pytest.mark.parametrize("kind", list(POLICIES), ids=[k.value for k in POLICIES])
@pytest.mark.parametrize("profile", PROFILES)
def test_the_counterfactual_of_each_rule_equals_a_live_run_under_it(
    recorded: _Store, profile: str, kind: RuleKind
) -> None:
    seen = _check(recorded, profile, profile, POLICIES[kind], "native")
    cut = sum(n for what, n in seen.items() if what not in ("unchanged", "censored"))
    assert cut, f"{POLICIES[kind]} cut no run of {profile}: the comparison proved nothing ({dict(seen)})"


@pytest.mark.parametrize("kind", [k for k in POLICIES if k is not RuleKind.NO_GAIN], ids=lambda k: k.value)
@pytest.mark.parametrize("profile", ["reference", "parallel"])
def test_the_plain_loops_counterfactual_equals_a_live_plain_run(recorded: _Store, profile: str, kind: RuleKind) -> None:
    """The plain loop stops on the same rules (FAILED, as peers raise on a limit), and nothing censors its runs:
    it has no contract."""
    seen = _check(recorded, f"plain/{profile}", profile, POLICIES[kind], "plain")
    assert "censored" not in seen
    if kind is not RuleKind.ALTERNATION:  # (no scripted plain run asks two calls in turn: repeats run again)
        assert sum(n for what, n in seen.items() if what.startswith("hard")) >= 1, dict(seen)


COMBINATIONS = (
    "no-gain:1+repeat:k=2,w=4",
    "no-gain:1+turn-cap:3",
    "no-gain:1+tool-cap:2",
    "repeat:k=2,w=4+error-cycle:k=2+alternation:k=2",
    "tool-cap:2+turn-cap:3+token-cap:6000",
)
"""Policies whose rules race: the first to fire, in the live order, decides (a detector before the contract at one
request, the contract before the tool cap; a detector on a call left in a STOP_REQUIRED's message; a cap that takes
the Draft call away from a STOP_REQUIRED)."""


@pytest.mark.parametrize("spec", COMBINATIONS)
@pytest.mark.parametrize("profile", ["reference", "parallel", "sloppy"])
def test_the_counterfactual_of_a_combination_equals_a_live_run_under_it(
    recorded: _Store, profile: str, spec: str
) -> None:
    seen = _check(recorded, profile, profile, spec, "native")
    assert sum(n for what, n in seen.items() if what not in ("unchanged", "censored")), dict(seen)

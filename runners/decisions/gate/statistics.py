"""The gate's statistics: per-case means, the sign-flip permutation test, Holm's weighted correction, the power of
each test, and the fixed-epoch and group-sequential verdicts.

Statistical design (docs/gate.md):

- **The case is the unit.** A case's epochs are repeated measurements of one case, so each label's
  case runs are first averaged per case (pass rate, tool invocations, model calls, tokens); every
  test works on the per-case differences `candidate − baseline`. Copying epochs changes nothing.
- **One paired test for everything: the sign-flip permutation test** on the mean per-case
  difference (`scipy.stats.permutation_test`, `permutation_type="samples"`). Under "the candidate
  behaves like the baseline" a case's two sets of runs are exchangeable, so flipping the sign of
  each case's difference is exactly the null distribution — no normal approximation, no assumption
  that epochs are independent. Exact when at most 13 cases differ, else 9,999 seeded resamples.
  Unlike a sign test it weighs a case lost in 3 of 3 epochs more than one lost in 1 of 3.
- **Family-wise error control.** The hypotheses — overall pass rate, each family's pass rate, each
  cost metric — are adjusted together with Holm's weighted step-down procedure: the overall pass
  rate carries 80% of α (`OVERALL_WEIGHT`: it is the most powerful test against a model that is a
  little worse everywhere), the families and cost metrics share the other 20%. Holm controls the
  probability of *any* false alarm at α whatever the true state, so the whole gate's false-alarm
  rate is ≤ α.
- A test fails when its adjusted p ≤ α **and** the observed change exceeds the allowed margin
  (`--max-recall-drop` points of pass rate, `--max-cost-increase` relative cost); the margin only
  removes failures, so it cannot raise the false-alarm rate.

Exit code, Markdown verdict line and JUnit failures all come from `GateResult.failures`.
Exit 0 pass, 1 regression, 2 unusable input, 3 inconclusive.

**Power** (runners/decisions/power.py): every test reports its minimum detectable effect (MDE) at 80% and
90% power at its first Holm level, simulated from this comparison's own per-case noise. A gate
whose overall test cannot be significant at all, or whose overall MDE exceeds `max_mde`, is
INCONCLUSIVE rather than PASS, with a line saying how many cases or epochs would make it conclusive.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import scipy.stats

from runners.decisions import power
from runners.decisions.gate.result import (
    COST_METRICS,
    Cost,
    CostChange,
    FamilyResult,
    GateInputError,
    GateResult,
    Hypothesis,
    Measure,
    Pair,
    SequentialLook,
)
from runners.decisions.gate_thresholds import DEFAULTS, MAX_LOOKS, GateThresholds
from runners.plan.rules import MAX_EPOCHS

__all__ = [
    "ALL",
    "ALPHA",
    "MAX_MDE",
    "OVERALL_WEIGHT",
    "PERMUTATION_RESAMPLES",
    "PERMUTATION_SEED",
    "CaseMeans",
    "evaluate",
    "evaluate_sequential",
    "holm_weighted",
    "paired_p_value",
    "pass_hat_k",
    "per_case",
    "sequential_looks",
    "validate_flags",
]

ALPHA = DEFAULTS.alpha
"""Default `--alpha`: the false-alarm rate of the whole gate."""
OVERALL_WEIGHT = 0.8
"""Share of α carried by the overall pass-rate test; the rest is split over families and costs."""
PERMUTATION_RESAMPLES = 9_999
PERMUTATION_SEED = 20_261_130
ALL = "(all)"
MAX_MDE = DEFAULTS.max_mde
"""Default `--max-mde`: a pass must be able to see a 10-point pass-rate drop with 80% probability."""


@dataclass(frozen=True)
class CaseMeans:
    """One case, its epochs averaged: the unit every test works on."""

    case_id: str
    """Case."""
    family: str
    """Family."""
    epochs: int
    """Paired epochs of this case."""
    base_passes: int
    """Baseline epochs that passed."""
    cand_passes: int
    """Candidate epochs that passed."""
    base_cost: Cost
    """Baseline mean (tool invocations, model calls, tokens) over the epochs."""
    cand_cost: Cost
    """Candidate mean (tool invocations, model calls, tokens) over the epochs."""

    @property
    def pass_diff(self) -> float:
        """Candidate minus baseline pass rate of this case."""
        return (self.cand_passes - self.base_passes) / self.epochs


def _mean_cost(costs: Sequence[Cost]) -> Cost:
    """The mean of each cost metric."""
    n = len(costs)
    return (sum(c[0] for c in costs) / n, sum(c[1] for c in costs) / n, sum(c[2] for c in costs) / n)


def per_case(pairs: Sequence[Pair]) -> list[CaseMeans]:
    """Average each case's paired epochs (sorted by case id)."""
    groups: dict[str, list[Pair]] = {}
    for p in pairs:
        groups.setdefault(p.case_id, []).append(p)
    return [
        CaseMeans(
            cid,
            ps[0].family,
            len(ps),
            sum(p.base_pass for p in ps),
            sum(p.cand_pass for p in ps),
            _mean_cost([p.base_cost for p in ps]),
            _mean_cost([p.cand_cost for p in ps]),
        )
        for cid, ps in sorted(groups.items())
    ]


def pass_hat_k(passes_per_case: dict[str, tuple[int, int]], k: int) -> float:
    """tau-bench pass^k: mean over cases of C(c, k) / C(n, k) (k ≤ every case's n; the CLI refuses more)."""
    vals = [math.comb(c, k) / math.comb(n, k) for c, n in passes_per_case.values() if n >= k]
    return float(sum(vals) / len(vals)) if vals else float("nan")


def paired_p_value(diffs: Sequence[int], *, worse: Literal["less", "greater"]) -> float:
    """One-sided sign-flip permutation p for "the candidate is worse" on per-case differences.

    `diffs` are integers (per-case differences scaled by a common denominator, see `_scale`) so that
    tied sums in the permutation distribution compare exactly — with floats, 1/3 + 1/3 ≠ 2/3 and
    ties would be missed, making p too small. `worse="less"` for pass rates, `"greater"` for costs.
    Cases with no difference carry no sign information and are dropped.
    """
    d = np.asarray([x for x in diffs if x != 0], dtype=np.int64)
    if d.size == 0:
        return 1.0
    if d.size == 1:  # two equally likely signs; scipy needs two observations
        return 0.5 if (d[0] < 0) == (worse == "less") else 1.0
    res = scipy.stats.permutation_test(
        (d,),
        lambda x, axis: np.sum(x, axis=axis),
        vectorized=True,
        permutation_type="samples",
        alternative=worse,
        n_resamples=PERMUTATION_RESAMPLES,
        rng=np.random.default_rng(PERMUTATION_SEED),
    )
    return float(res.pvalue)


def _scale(cases: list[CaseMeans]) -> int:
    """A common denominator of the per-case means: the lcm of the epoch counts."""
    return math.lcm(*(c.epochs for c in cases))


def holm_weighted(p_values: list[float], weights: list[float]) -> list[float]:
    """Holm's weighted step-down adjusted p-values (Holm 1979); reject where adjusted ≤ α.

    Order by p/w; the j-th adjusted p is the running max of (p/w) × (sum of the weights not yet
    rejected). With equal weights this is the ordinary Holm procedure.
    """
    total = sum(weights)
    w = [x / total for x in weights]
    order = sorted(range(len(p_values)), key=lambda i: p_values[i] / w[i])
    remaining = 1.0
    running = 0.0
    adjusted = [1.0] * len(p_values)
    for i in order:
        running = max(running, min(1.0, p_values[i] / w[i] * remaining))
        adjusted[i] = running
        remaining -= w[i]
    return adjusted


def _pass_rates(name: str, kind: Measure, cases: list[CaseMeans], k: int, max_drop: float) -> FamilyResult:
    runs = sum(c.epochs for c in cases)
    base_rate = sum(c.base_passes for c in cases) / runs
    cand_rate = sum(c.cand_passes for c in cases) / runs
    # the change is the mean of per-case rate differences (= the pooled change when epochs are equal)
    change = float(np.mean([c.pass_diff for c in cases]))
    scale = _scale(cases)
    diffs = [(c.cand_passes - c.base_passes) * (scale // c.epochs) for c in cases]
    test = Hypothesis(name, kind, len(cases), change, -change > max_drop, paired_p_value(diffs, worse="less"))
    return FamilyResult(
        name,
        len(cases),
        runs,
        base_rate,
        cand_rate,
        pass_hat_k({c.case_id: (c.base_passes, c.epochs) for c in cases}, k),
        pass_hat_k({c.case_id: (c.cand_passes, c.epochs) for c in cases}, k),
        sum(c.pass_diff < 0 for c in cases),
        sum(c.pass_diff > 0 for c in cases),
        test,
    )


def validate_flags(
    *, k: int, max_recall_drop: float, max_cost_increase: float, alpha: float, max_mde: float = DEFAULTS.max_mde
) -> None:
    """Refuse out-of-range flags before anything is computed or written (exit 2)."""
    for flag, value, name in (
        ("--max-mde", max_mde, "max_mde"), ("--k", k, "k"), ("--max-recall-drop", max_recall_drop, "max_recall_drop"),
        ("--max-cost-increase", max_cost_increase, "max_cost_increase"), ("--alpha", alpha, "alpha"),
    ):  # fmt: skip
        bounds = GateThresholds.bounds(name)
        if not bounds.inside(value):
            raise GateInputError(f"{flag} {value:g}: {bounds.refusal()}")


def evaluate(
    pairs: Sequence[Pair],
    baseline: str,
    candidate: str,
    *,
    k: int = DEFAULTS.k,
    max_recall_drop: float = DEFAULTS.max_recall_drop,
    max_cost_increase: float = DEFAULTS.max_cost_increase,
    alpha: float = DEFAULTS.alpha,
    max_mde: float = DEFAULTS.max_mde,
    mde: bool = True,
    mde_replicates: int = power.MDE_REPLICATES,
) -> GateResult:
    """Compute the gate verdict from paired case runs (`mde=False`: skip the power simulation, never inconclusive)."""
    validate_flags(
        k=k, max_recall_drop=max_recall_drop, max_cost_increase=max_cost_increase, alpha=alpha, max_mde=max_mde
    )
    if not pairs:
        raise GateInputError("no paired case runs")
    cases = per_case(pairs)
    epochs = min(c.epochs for c in cases)
    if k > epochs:
        raise GateInputError(
            f"--k {k}: the cases have only {epochs} epoch(s) each; pass^k needs k <= epochs "
            f"(use --k {epochs} or run both labels with --epochs {k})"
        )
    by_family: dict[str, list[CaseMeans]] = {}
    for c in cases:
        by_family.setdefault(c.family, []).append(c)
    families = [_pass_rates(f, Measure.FAMILY, cs, k, max_recall_drop) for f, cs in sorted(by_family.items())]
    overall = _pass_rates(ALL, Measure.OVERALL, cases, k, max_recall_drop)
    cost: dict[str, CostChange] = {}
    cost_tests: list[Hypothesis] = []
    for i, metric in enumerate(COST_METRICS):
        b = sum(c.base_cost[i] * c.epochs for c in cases) / overall.pairs
        c_ = sum(c.cand_cost[i] * c.epochs for c in cases) / overall.pairs
        rel = (c_ - b) / b if b else (0.0 if c_ == 0 else float("inf"))
        cost[metric] = CostChange(b, c_, rel)
        diffs = [round((c.cand_cost[i] - c.base_cost[i]) * _scale(cases)) for c in cases]  # means of integers
        cost_tests.append(
            Hypothesis(
                metric, Measure.COST, len(cases), rel, rel > max_cost_increase, paired_p_value(diffs, worse="greater")
            )
        )
    tests = [overall.test, *(f.test for f in families), *cost_tests]  # report order: overall, families, costs
    share = (1.0 - OVERALL_WEIGHT) / (len(tests) - 1)
    weights = [OVERALL_WEIGHT, *([share] * (len(tests) - 1))]
    adjusted = [
        replace(t, weight=w, p_adjusted=adj, alpha=alpha)
        for t, w, adj in zip(tests, weights, holm_weighted([t.p_value for t in tests], weights), strict=True)
    ]
    if mde:
        adjusted = _with_mde(adjusted, cases, by_family, max_recall_drop, max_cost_increase, mde_replicates)
    overall_test, family_tests = adjusted[0], adjusted[1 : 1 + len(families)]
    result = GateResult(
        baseline,
        candidate,
        k,
        alpha,
        tuple(replace(f, test=t) for f, t in zip(families, family_tests, strict=True)),
        replace(overall, test=overall_test),
        cost,
        tuple(adjusted[1 + len(families) :]),
        max_mde=max_mde,
        pairs=tuple(pairs),
    )
    if mde:
        # a regression is decided whatever power was left: it carries no reason to be inconclusive
        result = replace(result, inconclusive=None if result.failures else _inconclusive(result))
    return result


def _with_mde(
    tests: list[Hypothesis],
    cases: list[CaseMeans],
    by_family: dict[str, list[CaseMeans]],
    max_recall_drop: float,
    max_cost_increase: float,
    replicates: int,
) -> list[Hypothesis]:
    """Each test (in report order) with its MDE at its first Holm level (α × its weight), from this comparison's
    own cases."""

    def rate_mde(cs: list[CaseMeans], t: Hypothesis) -> power.Mde:
        return power.pass_rate_mde(
            [c.epochs for c in cs], [c.base_passes for c in cs], [c.cand_passes for c in cs],
            level=t.alpha * t.weight, margin=max_recall_drop, replicates=replicates,
        )  # fmt: skip

    def cost_mde(i: int, t: Hypothesis) -> power.Mde:
        return power.cost_mde(
            [c.base_cost[i] for c in cases], [c.cand_cost[i] for c in cases],
            level=t.alpha * t.weight, margin=max_cost_increase, replicates=replicates,
        )  # fmt: skip

    overall, *rest = tests
    families, costs = rest[: len(by_family)], rest[len(by_family) :]
    return [
        replace(overall, mde=rate_mde(cases, overall)),
        *(replace(t, mde=rate_mde(by_family[t.name], t)) for t in families),
        *(replace(t, mde=cost_mde(i, t)) for i, t in enumerate(costs)),
    ]


def _inconclusive(result: GateResult) -> str | None:
    """Why a gate without a failure may not pass, and what would make it conclusive; None when it may."""
    t = result.overall.test
    m = t.mde
    if m is None:
        return None
    n, epochs = result.overall.cases, result.epochs
    if not m.reachable:
        need = power.min_cases(m.level)
        return (
            f"the overall test cannot be significant: with {n} case(s) its smallest p is 1/{2**n:,} > its level "
            f"{m.level:.2g} (α × {t.weight:.0%}); it needs at least {need} cases — more epochs do not help"
        )
    if m.at_80 is None:
        return (
            f"no drop is detected with 80% probability at its level {m.level:.2g}, not even losing every passing"
            f" candidate run: too few of these {n} cases pass under both labels; run more cases both pass"
        )
    if m.at_80 > result.max_mde:
        more = power.epochs_for(m.at_80, epochs, result.max_mde)
        cases = power.cases_for(m.at_80, n, result.max_mde)
        return (
            f"the overall test detects only a drop of {m.at_80 * 100:.1f} points with 80% probability, above "
            f"--max-mde {result.max_mde * 100:g} points; ≈ {more} epochs (or ≈ {cases} cases at {epochs} epochs) "
            f"would bring it to {result.max_mde * 100:g} points"
        )
    return None


def sequential_looks(budget: int, stage: int) -> tuple[int, ...]:
    """The planned looks: every `stage` epochs, and the budget."""
    if not (GateThresholds.bounds("stage").inside(stage) and GateThresholds.bounds("budget").inside(budget)):
        raise GateInputError(f"--stage {stage} / --budget {budget}: both must be >= 1 and <= {MAX_EPOCHS}")
    if stage > budget:
        raise GateInputError(f"--stage {stage}: more than the --budget of {budget} epochs")
    if -(-budget // stage) > MAX_LOOKS:  # the time of the looks' levels grows with their square
        raise GateInputError(
            f"--budget {budget} / --stage {stage}: {-(-budget // stage)} looks; at most {MAX_LOOKS}"
            f" (give --stage {-(-budget // MAX_LOOKS)} or more)"
        )
    looks = list(range(stage, budget + 1, stage))
    if looks[-1] != budget:
        looks.append(budget)
    return tuple(looks)


def evaluate_sequential(
    pairs: Sequence[Pair],
    baseline: str,
    candidate: str,
    *,
    budget: int,
    stage: int,
    target_mde: float | None = None,
    k: int = DEFAULTS.k,
    max_recall_drop: float = DEFAULTS.max_recall_drop,
    max_cost_increase: float = DEFAULTS.max_cost_increase,
    alpha: float = DEFAULTS.alpha,
    max_mde: float = DEFAULTS.max_mde,
    mde: bool = True,
    mde_replicates: int = power.MDE_REPLICATES,
) -> GateResult:
    """The group-sequential gate over the epochs present: look after every `stage` epochs up to `budget`.

    Each look runs the whole gate (Holm over all its tests) at its nominal α from Lan–DeMets
    O'Brien–Fleming spending, so looking after each stage keeps the whole procedure's false-alarm
    rate at α. It stops at the first look that fails (regression), at a look whose overall MDE at 90%
    power is ≤ `target_mde` (pass), or at the budget (pass, or inconclusive by `max_mde`). A look that
    decides nothing before the budget is INCONCLUSIVE, naming the epochs of the next look. It is a
    function of the case runs present only, so it resumes and works on merged shards like every run.
    """
    looks = sequential_looks(budget, stage)
    target = GateThresholds.bounds("target_mde")
    if target_mde is not None and not target.inside(target_mde):
        raise GateInputError(f"--target-mde {target_mde:g}: {target.refusal()}")
    have = min(c.epochs for c in per_case(pairs)) if pairs else 0
    done = [e for e in looks if e <= have]
    if not done:
        raise GateInputError(
            f"the labels have {have} paired epoch(s); the first look of --stage {stage} needs {looks[0]}: "
            f"run both labels with --epochs {looks[0]}"
        )
    levels = power.sequential_levels(tuple(e / budget for e in looks), alpha)
    result: GateResult | None = None
    for i, e in enumerate(done):
        fixed = evaluate(
            [p for p in pairs if p.epoch <= e], baseline, candidate, k=min(k, e), max_recall_drop=max_recall_drop,
            max_cost_increase=max_cost_increase, alpha=levels[i], max_mde=max_mde, mde=mde,
            mde_replicates=mde_replicates,
        )  # fmt: skip
        look = SequentialLook(i + 1, e, looks, levels[i], power.obf_spent(e / budget, alpha), target_mde)
        result = replace(fixed, look=look)
        if result.failures:
            return result
        m = result.overall.test.mde
        if target_mde is not None and m is not None and m.at_90 is not None and m.at_90 <= target_mde:
            return replace(result, inconclusive=None)
        if e == looks[-1]:
            return result
        if i == len(done) - 1:
            return replace(
                result,
                inconclusive=f"look {i + 1} of {len(looks)} at {e} epochs decides nothing yet (nominal α "
                f"{levels[i]:.2g}); run both labels with --epochs {looks[i + 1]} and gate again",
            )
    assert result is not None  # `done` is not empty and its last look returns
    return result

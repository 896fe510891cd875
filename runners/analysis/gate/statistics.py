"""The model-upgrade gate: a candidate label against a baseline label on the same cases and epochs.

Statistical design (README "The model-upgrade gate"):

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
  rate carries half of α (it is the most powerful test against a model that is a little worse
  everywhere), the families and cost metrics share the other half. Holm controls the probability
  of *any* false alarm at α whatever the true state, so the whole gate's false-alarm rate is ≤ α.
- A test fails when its adjusted p ≤ α **and** the observed change exceeds the allowed margin
  (`--max-recall-drop` points of pass rate, `--max-cost-increase` relative cost); the margin only
  removes failures, so it cannot raise the false-alarm rate.

Exit code, Markdown verdict line and JUnit failures all come from `GateResult.failures`.
Exit 0 pass, 1 regression, 2 unusable input, 3 inconclusive.

**Power** (runners/analysis/power.py): every test reports its minimum detectable effect (MDE) at 80% and
90% power at its first Holm level, simulated from this comparison's own per-case noise. A gate
whose overall test cannot be significant at all, or whose overall MDE exceeds `max_mde`, is
INCONCLUSIVE rather than PASS, with a line saying how many cases or epochs would make it conclusive.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import duckdb
import numpy as np
import scipy.stats

from runners.analysis import power
from runners.analysis._gate_flags import (
    ALPHA_RANGE,
    COST_RANGE,
    DROP_RANGE,
    EPOCHS_RANGE,
    K_RANGE,
    MAX_LOOKS,
    MDE_RANGE,
    TARGET_MDE_RANGE,
)
from runners.analysis._safe_text import MarkdownText, xml
from runners.analysis._safe_text import markdown as md
from runners.analysis._safe_text import markdown_code as md_code
from runners.analysis.show import diff_command
from runners.plan.rules import MAX_EPOCHS

ALPHA = 0.05
OVERALL_WEIGHT = 0.8
"""Share of α carried by the overall pass-rate test; the rest is split over families and costs."""
PERMUTATION_RESAMPLES = 9_999
PERMUTATION_SEED = 20_261_130
COST_METRICS = ("tool_invocations", "model_calls", "tokens")
ALL = "(all)"
MAX_MDE = 0.10
"""Default `--max-mde`: a pass must be able to see a 10-point pass-rate drop with 80% probability."""


class GateInputError(ValueError):
    """The two labels cannot be compared, or a flag is out of range (exit 2)."""


class Measure(StrEnum):
    """What a gate test measures."""

    OVERALL = "overall pass rate"
    FAMILY = "family pass rate"
    COST = "cost"


class Verdict(StrEnum):
    """The gate's one verdict."""

    PASS = "pass"
    REGRESSION = "regression"
    INCONCLUSIVE = "inconclusive"


class RowVerdict(StrEnum):
    """How a row of the summary reads."""

    REGRESSED = "❌ regressed"
    NOT_SIGNIFICANT = "worse, not significant"
    WITHIN_MARGIN = "worse, within margin"
    OK = "ok"


@dataclass(frozen=True)
class Pair:
    """One case run of each label for the same (case, epoch)."""

    case_id: str
    """Case."""
    family: str
    """Family."""
    epoch: int
    """Epoch."""
    base_pass: bool
    """Baseline passed."""
    cand_pass: bool
    """Candidate passed."""
    base_cost: tuple[float, float, float]
    """Baseline (tool invocations, model calls, tokens)."""
    cand_cost: tuple[float, float, float]
    """Candidate (tool invocations, model calls, tokens)."""


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
    base_cost: tuple[float, float, float]
    """Baseline mean (tool invocations, model calls, tokens) over the epochs."""
    cand_cost: tuple[float, float, float]
    """Candidate mean (tool invocations, model calls, tokens) over the epochs."""

    @property
    def pass_diff(self) -> float:
        """Candidate minus baseline pass rate of this case."""
        return (self.cand_passes - self.base_passes) / self.epochs


def per_case(pairs: list[Pair]) -> list[CaseMeans]:
    """Average each case's paired epochs (sorted by case id)."""
    groups: dict[str, list[Pair]] = {}
    for p in pairs:
        groups.setdefault(p.case_id, []).append(p)
    out = []
    for cid, ps in sorted(groups.items()):
        n = len(ps)
        out.append(
            CaseMeans(
                cid,
                ps[0].family,
                n,
                sum(p.base_pass for p in ps),
                sum(p.cand_pass for p in ps),
                tuple(sum(p.base_cost[i] for p in ps) / n for i in range(3)),  # type: ignore[arg-type]
                tuple(sum(p.cand_cost[i] for p in ps) / n for i in range(3)),  # type: ignore[arg-type]
            )
        )
    return out


def pass_hat_k(passes_per_case: dict[str, tuple[int, int]], k: int) -> float:
    """tau-bench pass^k: mean over cases of C(c, k) / C(n, k) (k ≤ every case's n; the CLI refuses more)."""
    vals = [math.comb(c, k) / math.comb(n, k) for c, n in passes_per_case.values() if n >= k]
    return float(sum(vals) / len(vals)) if vals else float("nan")


def paired_p_value(diffs: list[int], *, worse: str) -> float:
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


@dataclass
class Hypothesis:
    """One hypothesis of the gate: its raw and Holm-adjusted p-value and its verdict."""

    name: str
    """`(all)`, a family name or a cost metric."""
    kind: Measure
    """What it measures."""
    cases: int
    """Cases (the unit of analysis)."""
    change: float
    """Observed change: pass-rate points (cand − base) or relative cost increase."""
    material: bool
    """The change is worse than the allowed margin."""
    p_value: float
    """One-sided sign-flip permutation p on per-case differences."""
    weight: float = 0.0
    """Share of α given to this test by weighted Holm."""
    p_adjusted: float = 1.0
    """Holm-adjusted p."""
    alpha: float = ALPHA
    """Family-wise α of the gate."""
    mde: power.Mde | None = None
    """Minimum detectable effect at 80% / 90% power at this test's first Holm level (None: not computed)."""

    @property
    def failed(self) -> bool:
        """Significant after Holm and beyond the margin."""
        return self.material and self.p_adjusted <= self.alpha

    @property
    def verdict(self) -> RowVerdict:
        """How the row reads."""
        worse = self.change < 0 if self.kind is not Measure.COST else self.change > 0
        if self.failed:
            return RowVerdict.REGRESSED
        if not worse:
            return RowVerdict.OK
        return RowVerdict.NOT_SIGNIFICANT if self.material else RowVerdict.WITHIN_MARGIN

    def describe(self) -> str:
        """One line: what changed and how sure we are."""
        if self.kind is Measure.COST:
            what = f"{self.name} {self.change:+.0%} per case run"
        else:
            what = f"{'pass rate' if self.kind is Measure.OVERALL else self.name} {self.change * 100:+.1f} points"
        return f"{what} over {self.cases} cases, p = {self.p_value:.2g}, Holm-adjusted p = {self.p_adjusted:.2g}"

    def mde_text(self, which: float = power.POWERS[0]) -> str:
        """The MDE at 80% (or 90%) power in this test's unit: '4.2 pts', '+31%', 'unreachable' (never
        significant), 'undetectable' (not with that probability) or '—' (not computed)."""
        if self.mde is None:
            return "—"
        v = self.mde.at(which)
        if v is None:
            return self.mde.status(which).value
        return f"+{v:.0%}" if self.kind is Measure.COST else f"{v * 100:.1f} pts"


@dataclass
class FamilyResult:
    """Pass rates of one family (or of all cases) under both labels, and its test."""

    family: str
    """Family, or `(all)`."""
    cases: int
    """Cases."""
    pairs: int
    """Paired case runs (cases × epochs)."""
    base_rate: float
    """Baseline pass rate."""
    cand_rate: float
    """Candidate pass rate."""
    base_pass_k: float
    """Baseline pass^k."""
    cand_pass_k: float
    """Candidate pass^k."""
    cases_worse: int
    """Cases whose candidate pass rate is below the baseline's."""
    cases_better: int
    """Cases whose candidate pass rate is above the baseline's."""
    test: Hypothesis
    """Its hypothesis test."""

    @property
    def regressed(self) -> bool:
        """The family's verdict."""
        return self.test.failed


@dataclass(frozen=True)
class SequentialLook:
    """Where a group-sequential gate stands: this look, its nominal α and what comes next."""

    index: int
    """1-based look number."""
    epochs: int
    """Epochs this look uses."""
    looks: tuple[int, ...]
    """The planned looks (epochs), the last one the budget."""
    level: float
    """Nominal α of the whole gate at this look (Lan–DeMets O'Brien–Fleming spending)."""
    spent: float
    """α spent up to and including this look."""
    target_mde: float | None
    """Stop with a pass once the overall MDE at 90% power is at most this (None: run to the budget)."""

    @property
    def last(self) -> bool:
        """This look is the budget."""
        return self.epochs >= self.looks[-1]

    @property
    def next_epochs(self) -> int | None:
        """Epochs of the next look (None after the last)."""
        return next((e for e in self.looks if e > self.epochs), None)


@dataclass
class GateResult:
    """Everything the gate decided."""

    baseline: str
    """Baseline label."""
    candidate: str
    """Candidate label."""
    k: int
    """k of pass^k."""
    alpha: float
    """Family-wise error rate of the whole gate."""
    families: list[FamilyResult]
    """Per-family results."""
    overall: FamilyResult
    """All cases together."""
    cost: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    """metric -> (baseline mean, candidate mean, relative change) per case run."""
    cost_tests: list[Hypothesis] = field(default_factory=list)
    """One test per cost metric."""
    max_mde: float = MAX_MDE
    """A pass needs the overall test's MDE at 80% power to be at most this (pass-rate fraction)."""
    inconclusive: str | None = None
    """Why the gate cannot pass and what would make it conclusive (None: it is conclusive)."""
    look: SequentialLook | None = None
    """The group-sequential look this result is (None: a fixed-epoch gate)."""

    @property
    def verdict(self) -> Verdict:
        """Regression beats inconclusive: a significant drop is a regression however little power was left."""
        if self.failures:
            return Verdict.REGRESSION
        return Verdict.INCONCLUSIVE if self.inconclusive else Verdict.PASS

    @property
    def epochs(self) -> int:
        """Paired epochs per case (the smallest over cases)."""
        return self.overall.pairs // max(1, self.overall.cases)

    pairs: list[Pair] = field(default_factory=list)
    """The paired case runs the tests were computed on (the summary names the cases that got worse)."""
    db: str = "bench.duckdb"
    """The database the pairs came from (in the printed `harness-bench diff` commands)."""

    @property
    def tests(self) -> list[Hypothesis]:
        """Every hypothesis, in report order: overall, families, costs."""
        return [self.overall.test, *(f.test for f in self.families), *self.cost_tests]

    @property
    def failures(self) -> list[Hypothesis]:
        """The failed tests: the single source of the exit code, the verdict line and JUnit."""
        return [t for t in self.tests if t.failed]

    @property
    def regressed_families(self) -> list[str]:
        """Families that regressed."""
        return [f.family for f in self.families if f.regressed]

    @property
    def cost_regressions(self) -> list[str]:
        """Cost metrics that regressed."""
        return [t.name for t in self.cost_tests if t.failed]

    @property
    def passed(self) -> bool:
        """No test failed."""
        return not self.failures


def _bench_run_of(con: duckdb.DuckDBPyConnection, label: str, picked: str | None, role: str) -> str:
    """The one bench run a label's case runs come from: `picked`, or the label's only bench run."""
    rows = con.execute(
        "SELECT bench_run_id, count(*), max(epoch), min(finished_at) FROM case_runs WHERE label = ?"
        " GROUP BY bench_run_id ORDER BY min(finished_at)",
        [label],
    ).fetchall()
    ids = [str(r[0]) for r in rows]
    if picked is not None:
        if picked not in ids:
            raise GateInputError(
                f"--bench-run {picked}: no case runs of {role} label {label!r} in it; its bench runs: {', '.join(ids)}"
            )
        return picked
    if len(ids) > 1:
        runs = ", ".join(f"{r[0]} ({r[1]} case runs, {r[2]} epoch(s))" for r in rows)
        raise GateInputError(
            f"{role} label {label!r} is used by {len(ids)} bench runs ({runs}); pooling them would mix different runs:"
            f" pick one with --bench-run ID"
        )
    return ids[0]


def load_pairs(
    con: duckdb.DuckDBPyConnection,
    baseline: str,
    candidate: str,
    *,
    baseline_run: str | None = None,
    candidate_run: str | None = None,
    cases: Collection[str] | None = None,
) -> list[Pair]:
    """Pair the two labels' case runs on (case_id, epoch); refuse differing case sets, a label compared with
    itself, and a label spread over several bench runs (unless `baseline_run` / `candidate_run` pick one).
    `cases`: pair only these (runs of other cases are left out on both sides)."""
    labels = {r[0] for r in con.execute("SELECT DISTINCT label FROM case_runs WHERE label IS NOT NULL").fetchall()}
    for lab in (baseline, candidate):
        if lab not in labels:
            raise GateInputError(
                f"unknown label {lab!r}; labels in the database: {', '.join(sorted(labels)) or 'none'}"
            )
    base_run = _bench_run_of(con, baseline, baseline_run, "baseline")
    cand_run = _bench_run_of(con, candidate, candidate_run, "candidate")
    if base_run == cand_run:
        raise GateInputError(
            f"--baseline {baseline!r} and --candidate {candidate!r} are the same bench run ({base_run}): a run"
            " compared with itself always passes; give two different labels (or two --bench-run IDs)"
        )

    def runs(label: str, bench_run: str) -> dict[tuple[str, int], tuple[str, bool, tuple[float, float, float]]]:
        rows = con.execute(
            """
            SELECT case_id, epoch, family, passed, tool_invocations, model_calls, input_tokens + output_tokens
            FROM (SELECT *, row_number() OVER (PARTITION BY case_id, epoch ORDER BY finished_at DESC) AS rn
                  FROM case_runs WHERE label = ? AND bench_run_id = ?)
            WHERE rn = 1
            """,
            [label, bench_run],
        ).fetchall()
        return {
            (r[0], int(r[1])): (r[2], bool(r[3]), (float(r[4]), float(r[5]), float(r[6])))
            for r in rows
            if cases is None or r[0] in cases
        }

    base, cand = runs(baseline, base_run), runs(candidate, cand_run)
    base_cases = {c for c, _ in base}
    cand_cases = {c for c, _ in cand}
    if base_cases != cand_cases:
        only_b = sorted(base_cases - cand_cases)
        only_c = sorted(cand_cases - base_cases)
        parts = []
        if only_b:
            parts.append(f"only in {baseline}: {', '.join(only_b[:10])}" + (" …" if len(only_b) > 10 else ""))
        if only_c:
            parts.append(f"only in {candidate}: {', '.join(only_c[:10])}" + (" …" if len(only_c) > 10 else ""))
        raise GateInputError("the two labels cover different cases — " + "; ".join(parts))
    if set(base) != set(cand):
        missing = sorted(set(base) ^ set(cand))[:5]
        raise GateInputError(f"the two labels cover different epochs, e.g. {missing}; run both with the same --epochs")
    return [
        Pair(
            cid, base[(cid, ep)][0], ep, base[(cid, ep)][1], cand[(cid, ep)][1], base[(cid, ep)][2], cand[(cid, ep)][2]
        )
        for cid, ep in sorted(base)
    ]


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
    *, k: int, max_recall_drop: float, max_cost_increase: float, alpha: float, max_mde: float = MAX_MDE
) -> None:
    """Refuse out-of-range flags before anything is computed or written (exit 2)."""
    for flag, value, bounds in (
        ("--max-mde", max_mde, MDE_RANGE), ("--k", k, K_RANGE), ("--max-recall-drop", max_recall_drop, DROP_RANGE),
        ("--max-cost-increase", max_cost_increase, COST_RANGE), ("--alpha", alpha, ALPHA_RANGE),
    ):  # fmt: skip
        if not bounds.inside(value):
            raise GateInputError(f"{flag} {value:g}: {bounds.refusal()}")


def evaluate(
    pairs: list[Pair],
    baseline: str,
    candidate: str,
    *,
    k: int = 3,
    max_recall_drop: float = 0.0,
    max_cost_increase: float = 0.25,
    alpha: float = ALPHA,
    max_mde: float = MAX_MDE,
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
    result = GateResult(baseline, candidate, k, alpha, families, overall)
    result.pairs = list(pairs)
    for i, metric in enumerate(COST_METRICS):
        b = sum(c.base_cost[i] * c.epochs for c in cases) / overall.pairs
        c_ = sum(c.cand_cost[i] * c.epochs for c in cases) / overall.pairs
        rel = (c_ - b) / b if b else (0.0 if c_ == 0 else float("inf"))
        result.cost[metric] = (b, c_, rel)
        diffs = [round((c.cand_cost[i] - c.base_cost[i]) * _scale(cases)) for c in cases]  # means of integers
        result.cost_tests.append(
            Hypothesis(
                metric, Measure.COST, len(cases), rel, rel > max_cost_increase, paired_p_value(diffs, worse="greater")
            )
        )
    tests = result.tests
    share = (1.0 - OVERALL_WEIGHT) / (len(tests) - 1)
    weights = [OVERALL_WEIGHT, *([share] * (len(tests) - 1))]
    for t, w, adj in zip(tests, weights, holm_weighted([t.p_value for t in tests], weights), strict=True):
        t.weight, t.p_adjusted, t.alpha = w, adj, alpha
    result.max_mde = max_mde
    if mde:
        _add_mde(result, cases, by_family, max_recall_drop, max_cost_increase, mde_replicates)
        # a regression is decided whatever power was left: it carries no reason to be inconclusive
        result.inconclusive = None if result.failures else _inconclusive(result)
    return result


def _add_mde(
    result: GateResult,
    cases: list[CaseMeans],
    by_family: dict[str, list[CaseMeans]],
    max_recall_drop: float,
    max_cost_increase: float,
    replicates: int,
) -> None:
    """Each test's MDE at its first Holm level (α × its weight), from this comparison's own cases."""

    def rate_mde(cs: list[CaseMeans], t: Hypothesis) -> power.Mde:
        return power.pass_rate_mde(
            [c.epochs for c in cs], [c.base_passes for c in cs], [c.cand_passes for c in cs],
            level=t.alpha * t.weight, margin=max_recall_drop, replicates=replicates,
        )  # fmt: skip

    result.overall.test.mde = rate_mde(cases, result.overall.test)
    for f in result.families:
        f.test.mde = rate_mde(by_family[f.family], f.test)
    for i, t in enumerate(result.cost_tests):
        t.mde = power.cost_mde(
            [c.base_cost[i] for c in cases], [c.cand_cost[i] for c in cases],
            level=t.alpha * t.weight, margin=max_cost_increase, replicates=replicates,
        )  # fmt: skip


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
    if not (EPOCHS_RANGE.inside(stage) and EPOCHS_RANGE.inside(budget)):
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
    pairs: list[Pair],
    baseline: str,
    candidate: str,
    *,
    budget: int,
    stage: int,
    target_mde: float | None = None,
    k: int = 3,
    max_recall_drop: float = 0.0,
    max_cost_increase: float = 0.25,
    alpha: float = ALPHA,
    max_mde: float = MAX_MDE,
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
    if target_mde is not None and not TARGET_MDE_RANGE.inside(target_mde):
        raise GateInputError(f"--target-mde {target_mde:g}: {TARGET_MDE_RANGE.refusal()}")
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
        result = evaluate(
            [p for p in pairs if p.epoch <= e], baseline, candidate, k=min(k, e), max_recall_drop=max_recall_drop,
            max_cost_increase=max_cost_increase, alpha=levels[i], max_mde=max_mde, mde=mde,
            mde_replicates=mde_replicates,
        )  # fmt: skip
        result.look = SequentialLook(i + 1, e, looks, levels[i], power.obf_spent(e / budget, alpha), target_mde)
        if result.failures:
            return result
        m = result.overall.test.mde
        if target_mde is not None and m is not None and m.at_90 is not None and m.at_90 <= target_mde:
            result.inconclusive = None
            return result
        if e == looks[-1]:
            return result
        if i == len(done) - 1:
            result.inconclusive = (
                f"look {i + 1} of {len(looks)} at {e} epochs decides nothing yet (nominal α {levels[i]:.2g}); "
                f"run both labels with --epochs {looks[i + 1]} and gate again"
            )
    assert result is not None
    return result


def verdict_line(result: GateResult) -> str:
    """The one-line verdict: which tests regressed, with their p-values (or why it passed)."""
    if result.failures:
        line = "❌ **REGRESSION** — " + "; ".join(t.describe() for t in result.failures) + f" (α = {result.alpha:g})."
        if result.overall.regressed and not result.regressed_families:
            worst = min(result.families, key=lambda f: f.test.change)
            line += (
                f" Largest family drop: {worst.family} {worst.test.change * 100:+.1f} points "
                f"({worst.cases_worse} of {worst.cases} cases worse; not significant on its own)."
            )
        return line
    best = min(result.tests, key=lambda t: t.p_adjusted)
    if result.inconclusive:
        return (
            f"⚠️ **INCONCLUSIVE** — no test is significant (smallest adjusted p = {best.p_adjusted:.2g}, "
            f"{best.name}), but {result.inconclusive}.{_mde_sentence(result)}{_look_text(result)}"
        )
    return (
        f"✅ **PASS** — no test is significant after Holm's correction at α = {result.alpha:g} "
        f"(smallest adjusted p = {best.p_adjusted:.2g}, {best.name}).{_mde_sentence(result)}{_look_text(result)}"
    )


def _mde_sentence(result: GateResult) -> str:
    """What this comparison could have caught, or why no drop size can be named."""
    t = result.overall.test
    m = t.mde
    if m is None:
        return " Its MDE was not computed."
    at_80, at_90 = (m.status(p) for p in power.POWERS)
    if at_80 is power.MdeStatus.UNREACHABLE:
        return f" Its MDE: unreachable (its smallest p {m.min_p:.2g} is above its level {m.level:.2g})."
    if at_80 is power.MdeStatus.UNDETECTABLE:
        return (
            " Its MDE: undetectable (not even losing every passing candidate run is caught with 80% probability at"
            f" its level {m.level:.2g})."
        )
    at_90_text = f"{t.mde_text(0.9)} with 90%" if at_90 is power.MdeStatus.FOUND else "none with 90%"
    return (
        f" It would have caught a pass-rate drop of {t.mde_text(0.8)} with 80% probability "
        f"({at_90_text}) at its level {m.level:.2g}."
    )


def _look_text(result: GateResult) -> str:
    look = result.look
    if look is None:
        return ""
    return (
        f" Sequential look {look.index} of {len(look.looks)} at {look.epochs} epochs (budget {look.looks[-1]}; "
        f"nominal α {look.level:.2g}, α spent {look.spent:.2g})."
    )


def verdict_line_with_power(result: GateResult) -> str:
    """`verdict_line` plus, for a regression, the MDE sentence (a pass or inconclusive line carries it already):
    every verdict line says what the comparison could have caught, or why no drop size can be named."""
    line = verdict_line(result)
    return line + _mde_sentence(result) + _look_text(result) if result.failures else line


def markdown(result: GateResult) -> str:
    """A summary fit for a pull-request comment."""
    lines = [
        f"## Model gate: {md(result.candidate)} vs {md(result.baseline)}",
        "",
        verdict_line_with_power(result),
        "",
        f"Unit: the case ({result.overall.cases} cases × {result.overall.pairs // result.overall.cases} epochs). "
        f"p: one-sided sign-flip permutation test on per-case differences (exact up to 13 differing cases, else "
        f"{PERMUTATION_RESAMPLES:,} resamples: floor {1 / (PERMUTATION_RESAMPLES + 1):.4f}); "
        f"adj. p: Holm's weighted step-down over all {len(result.tests)} tests "
        f"(overall pass rate {OVERALL_WEIGHT:.0%} of α), so the whole gate's "
        f"false-alarm rate is ≤ α = {result.alpha:g}. pass^{result.k}: tau-bench, mean over cases of "
        f"C(passes, {result.k}) / C(epochs, {result.k}).{_mde_legend(result)}",
        "",
        f"| family | cases | pass rate (base → cand) | change | pass^{result.k} (base → cand) | cases worse / better "
        "| p | adj. p | MDE 80% / 90% | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for f in [result.overall, *result.families]:
        t = f.test
        lines.append(
            f"| {md(f.family)} | {f.cases} | {f.base_rate:.0%} → {f.cand_rate:.0%} | {t.change * 100:+.1f} pts | "
            f"{f.base_pass_k:.2f} → {f.cand_pass_k:.2f} | {f.cases_worse} / {f.cases_better} | {t.p_value:.2g} | "
            f"{t.p_adjusted:.2g} | {t.mde_text(0.8)} / {t.mde_text(0.9)} | {t.verdict.value} |"
        )
    lines += [
        "",
        "| cost per case run | baseline | candidate | change | p | adj. p | MDE 80% / 90% | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in result.cost_tests:
        b, c, rel = result.cost[t.name]
        lines.append(
            f"| {md(t.name)} | {b:.1f} | {c:.1f} | {rel:+.0%} | {t.p_value:.2g} | {t.p_adjusted:.2g} | "
            f"{t.mde_text(0.8)} / {t.mde_text(0.9)} | {t.verdict.value} |"
        )
    return "\n".join(lines) + "\n" + markdown_section(result, result.db)


def _mde_legend(result: GateResult) -> str:
    if result.overall.test.mde is None:
        return ""
    return (
        " MDE: the smallest pass-rate drop (points; costs: relative increase) the test detects with 80% / 90% "
        "probability at its first Holm level (α × its share), simulated from these cases' own noise; "
        "'unreachable': too few cases for its smallest p to reach its level; 'undetectable': it can be significant,"
        " but not even the largest change simulated (every passing candidate run lost; a 100-fold cost) is caught"
        f" with that probability. A pass needs the overall MDE at 80% ≤ "
        f"{result.max_mde * 100:g} points (--max-mde), else the verdict is INCONCLUSIVE."
    )


def junit(result: GateResult, *, allow_inconclusive: bool = False) -> str:
    """JUnit XML: one test case for the whole set, one per family, one per cost metric, each with its MDE.

    INCONCLUSIVE marks the whole-set test case `<error type="inconclusive">` (errors="1": CI fails, as the
    exit code 3 does), or `<skipped>` with `allow_inconclusive` (exit 0)."""
    cases = []
    inconclusive = result.verdict is Verdict.INCONCLUSIVE
    for t in result.tests:
        classname = {Measure.OVERALL: "gate.overall", Measure.FAMILY: "gate.family", Measure.COST: "gate.cost"}
        body = ""
        if t.failed:
            # the message stays the verdict line's text; the cases and their diff commands are the failure's body
            body = f'<failure message="{xml(t.describe())}">{xml(junit_text(result, t, result.db))}</failure>'
        if inconclusive and t.kind is Measure.OVERALL:  # an error without --allow-inconclusive, else skipped
            tag = "skipped" if allow_inconclusive else 'error type="inconclusive"'
            body = f'<{tag} message="{xml("INCONCLUSIVE: " + (result.inconclusive or ""))}"/>'
        name = "all cases" if t.kind is Measure.OVERALL else t.name
        cases.append(f'<testcase classname="{classname[t.kind]}" name="{xml(name)}">{body}{_properties(t)}</testcase>')
    errors = int(inconclusive and not allow_inconclusive)
    skipped = int(inconclusive and allow_inconclusive)
    suite_props = [("verdict", result.verdict.value), ("max_mde", f"{result.max_mde:g}")]
    if result.look is not None:
        suite_props += [("sequential_look", str(result.look.index)), ("sequential_epochs", str(result.look.epochs)),
                        ("sequential_level", f"{result.look.level:.6g}")]  # fmt: skip
    props = "".join(f'<property name="{n}" value="{xml(v)}"/>' for n, v in suite_props)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="harness-bench gate {xml(result.candidate)} vs {xml(result.baseline)}" '
        f'tests="{len(cases)}" failures="{len(result.failures)}" errors="{errors}" skipped="{skipped}">\n'
        f"  <properties>{props}</properties>\n  " + "\n  ".join(cases) + "\n</testsuite>\n"
    )


def _finite(value: object) -> object:
    """JSON has no infinity: an infinite relative change (a cost up from 0) is written as null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def plan(result: GateResult, target_mde: float) -> str:
    """How many epochs (or cases) bring the overall MDE to `target_mde`, estimated from this pilot."""
    t = result.overall.test
    m = t.mde
    n, e = result.overall.cases, result.epochs
    head = f"Plan from a pilot of {n} cases × {e} epochs, target MDE {target_mde * 100:g} points at 80% power:"
    if m is None or not m.reachable:
        need = power.min_cases(t.alpha * t.weight)
        return f"{head}\n  the overall test cannot be significant with {n} cases: it needs at least {need} cases.\n"
    if m.at_80 is None or m.at_90 is None:
        return (
            f"{head}\n  no drop is detected with {'80' if m.at_80 is None else '90'}% probability, not even losing"
            " every passing candidate run: too few cases pass under both labels; run more cases both pass.\n"
        )
    last = power.sequential_levels(tuple(x / 20 for x in sequential_looks(20, 4)), result.alpha)[-1]
    z = scipy.stats.norm.ppf
    factor = float(
        ((z(1 - last * t.weight) + z(power.POWERS[0])) / (z(1 - result.alpha * t.weight) + z(power.POWERS[0]))) ** 2
    )
    lines = [
        head,
        f"  now: MDE {m.at_80 * 100:.1f} points at 80%, {m.at_90 * 100:.1f} at 90% (level {m.level:.2g}).",
        f"  epochs for {target_mde * 100:g} points: {power.epochs_for(m.at_80, e, target_mde)} at 80% power, "
        f"{power.epochs_for(m.at_90, e, target_mde)} at 90% (or {power.cases_for(m.at_80, n, target_mde)} cases at "
        f"{e} epochs, 80%).",
        "  predicted MDE at 80% by epochs (noise falls with 1/√epochs): "
        + ", ".join(f"{x}: {m.at_80 * math.sqrt(e / x) * 100:.1f}" for x in sorted({e, 5, 10, 20, 40}) if x >= e),
        f"  a sequential gate (--sequential --budget 20 --stage 4) runs its last look at nominal α {last:.3g} instead "
        f"of {result.alpha:g}: give it a budget of ≈ {factor:.2f} × these epochs; it stops earlier when a drop is "
        "large.",
    ]
    return "\n".join(lines) + "\n"


def _properties(t: Hypothesis) -> str:
    """A test case's MDE as JUnit properties (fractions; an empty value: none, `mde_80_status` says why)."""
    if t.mde is None:
        return ""
    vals = [("mde_80", t.mde.at_80), ("mde_90", t.mde.at_90)]
    items = [f'<property name="{n}" value="{"" if v is None else f"{v:.6g}"}"/>' for n, v in vals]
    items.append(f'<property name="mde_level" value="{t.mde.level:.6g}"/>')
    items += [f'<property name="mde_{p * 100:.0f}_status" value="{t.mde.status(p).value}"/>' for p in power.POWERS]
    return "<properties>" + "".join(items) + "</properties>"


def to_json(result: GateResult, *, allow_inconclusive: bool = False) -> dict[str, object]:
    """The gate's result as plain data: verdict, every test with its p, adjusted p and MDE."""

    def test(t: Hypothesis) -> dict[str, object]:
        return {
            "name": t.name, "kind": t.kind.name.lower(), "cases": t.cases, "change": t.change,
            "p": t.p_value, "p_adjusted": t.p_adjusted, "weight": t.weight, "failed": t.failed,
            "mde_80": t.mde.at_80 if t.mde else None, "mde_90": t.mde.at_90 if t.mde else None,
            "mde_level": t.mde.level if t.mde else None, "mde_reachable": t.mde.reachable if t.mde else None,
            # why mde_80 / mde_90 is null: unreachable (never significant) or undetectable (not that likely)
            "mde_80_status": t.mde.status(power.POWERS[0]).value if t.mde else None,
            "mde_90_status": t.mde.status(power.POWERS[1]).value if t.mde else None,
        }  # fmt: skip

    look = result.look
    return {
        "baseline": result.baseline, "candidate": result.candidate, "verdict": result.verdict.value,
        "passes": result.verdict is Verdict.PASS or (result.verdict is Verdict.INCONCLUSIVE and allow_inconclusive),
        "alpha": result.alpha, "max_mde": result.max_mde, "inconclusive": result.inconclusive,
        "cases": result.overall.cases, "epochs": result.epochs, "tests": [test(t) for t in result.tests],
        "sequential": None if look is None else {
            "look": look.index, "epochs": look.epochs, "looks": list(look.looks), "level": look.level,
            "spent": look.spent, "target_mde": look.target_mde, "next_epochs": look.next_epochs,
        },
    }  # fmt: skip


def write_outputs(
    result: GateResult,
    summary_path: Path,
    junit_path: Path,
    *,
    json_path: Path | None = None,
    allow_inconclusive: bool = False,
) -> None:
    """Write the Markdown summary and the JUnit XML (and the JSON result when asked), each whole or not at all
    (OutputWriteError names the path)."""
    from runners.store._files import write_text

    write_text(summary_path, markdown(result))
    write_text(junit_path, junit(result, allow_inconclusive=allow_inconclusive))
    if json_path is not None:
        text = json.dumps(_finite(to_json(result, allow_inconclusive=allow_inconclusive)), indent=1, allow_nan=False)
        write_text(json_path, text + "\n")


# The cases behind a verdict: per failed test the cases that got worse, each with the exact
# `harness-bench diff` command that opens both transcripts; per recommended configuration its failing
# case runs with the `harness-bench show` command.

CASE_LIMIT = 10
"""Cases listed per failed test; the rest are counted (`and N more`)."""


@dataclass(frozen=True, slots=True)
class WorseCase:
    """One case that got worse under the candidate, and how to look at it."""

    case_id: str
    """The case."""
    epoch: int
    """The epoch to open (a flipped one for pass rates, the costliest for costs)."""
    what: str
    """How it got worse (`passed 3/3 → 1/3`, `tokens 1,200 → 2,400`)."""
    command: str
    """The exact diff command."""


def _cost_index(name: str) -> int:
    return list(COST_METRICS).index(name)


def worse_cases(result: GateResult, test: Hypothesis, pairs: Sequence[Pair], db: str) -> list[WorseCase]:
    """The cases that got worse for one test, worst first."""
    groups: dict[str, list[Pair]] = {}
    for p in pairs:
        if test.kind is Measure.FAMILY and p.family != test.name:
            continue
        groups.setdefault(p.case_id, []).append(p)
    ranked: list[tuple[float, WorseCase]] = []
    for case_id, ps in groups.items():
        ps = sorted(ps, key=lambda p: p.epoch)
        if test.kind is Measure.COST:
            i = _cost_index(test.name)
            base = sum(p.base_cost[i] for p in ps) / len(ps)
            cand = sum(p.cand_cost[i] for p in ps) / len(ps)
            if cand <= base:
                continue
            worst = max(ps, key=lambda p: p.cand_cost[i] - p.base_cost[i])
            what, score, epoch = f"{test.name} {base:,.1f} → {cand:,.1f} per epoch", cand - base, worst.epoch
        else:
            b, c = sum(p.base_pass for p in ps), sum(p.cand_pass for p in ps)
            if c >= b:
                continue
            flipped = next((p for p in ps if p.base_pass and not p.cand_pass), ps[0])
            what, score, epoch = f"passed {b}/{len(ps)} → {c}/{len(ps)}", float(b - c), flipped.epoch
        command = diff_command(db, result.baseline, result.candidate, case_id, epoch)
        ranked.append((score, WorseCase(case_id, epoch, what, command)))
    ranked.sort(key=lambda x: (-x[0], x[1].case_id))
    return [w for _, w in ranked]


def _lines(cases: list[WorseCase], limit: int, fmt: str) -> list[str]:
    out = [fmt.format(c=c) for c in cases[:limit]]
    if len(cases) > limit:
        out.append(f"and {len(cases) - limit} more")
    return out


def markdown_section(result: GateResult, db: str, *, limit: int = CASE_LIMIT) -> str:
    """`### Cases that got worse`: per failed test its cases, each with its diff command (empty: no failure)."""
    failures = result.failures
    if not failures:
        return ""
    lines = ["", "### Cases that got worse", ""]
    for test in failures:
        cases = worse_cases(result, test, result.pairs, db)
        lines.append(f"**{test.describe()}** — {len(cases)} case(s) worse:")
        lines.append("")
        if not cases:
            lines.append("- (no single case is worse on its own; the change is spread over many)")
        lines.extend(f"- {md_code(c.case_id)} (epoch {c.epoch}): {md(c.what)} — {md_code(c.command)}"
                     for c in cases[:limit])  # fmt: skip
        if len(cases) > limit:
            lines.append(f"- and {len(cases) - limit} more")
        lines.append("")
    return "\n".join(lines)


def junit_text(result: GateResult, test: Hypothesis, db: str, *, limit: int = CASE_LIMIT) -> str:
    """The same list for one failed JUnit testcase (plain lines)."""
    cases = worse_cases(result, test, result.pairs, db)
    head = f"{len(cases)} case(s) worse:"
    return "\n".join([head, *_lines(cases, limit, "{c.case_id} (epoch {c.epoch}): {c.what}: {c.command}")])


def failing_case_lines(
    con: duckdb.DuckDBPyConnection, db: str, where: str, params: Sequence[object], *, limit: int = CASE_LIMIT
) -> list[str]:
    """Failing case runs of one configuration (`where` over `case_runs c JOIN bench_runs b`), each with the
    `harness-bench show` command that opens its transcript (Markdown: ids and commands in code spans)."""
    rows = con.execute(
        f"SELECT c.case_run_id, c.case_id, c.epoch, c.outcome, c.stop_reason FROM case_runs c JOIN bench_runs b"
        f" USING (bench_run_id) WHERE {where} AND NOT c.passed ORDER BY c.case_id, c.epoch",
        list(params),
    ).fetchall()
    out: list[str] = [
        MarkdownText(f"{md_code(case_id)} (epoch {epoch}): {md(outcome)}, stop {md(stop or 'NONE')} — "
                     + md_code(f"harness-bench show --db {shlex.quote(db)} {shlex.quote(str(run_id))}"))
        for run_id, case_id, epoch, outcome, stop in rows[:limit]
    ]  # fmt: skip
    if len(rows) > limit:
        out.append(f"and {len(rows) - limit} more")
    return out

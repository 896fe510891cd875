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
Exit 0 pass, 1 regression, 2 unusable input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from xml.sax.saxutils import escape

import duckdb
import numpy as np
import scipy.stats

ALPHA = 0.05
OVERALL_WEIGHT = 0.8
"""Share of α carried by the overall pass-rate test; the rest is split over families and costs."""
PERMUTATION_RESAMPLES = 9_999
PERMUTATION_SEED = 20_261_130
COST_METRICS = ("tool_invocations", "model_calls", "tokens")
ALL = "(all)"


class GateInputError(ValueError):
    """The two labels cannot be compared, or a flag is out of range (exit 2)."""


class Measure(StrEnum):
    """What a gate test measures."""

    OVERALL = "overall pass rate"
    FAMILY = "family pass rate"
    COST = "cost"


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


def load_pairs(con: duckdb.DuckDBPyConnection, baseline: str, candidate: str) -> list[Pair]:
    """Pair the two labels' case runs on (case_id, epoch); refuse differing case sets."""
    labels = {r[0] for r in con.execute("SELECT DISTINCT label FROM case_runs WHERE label IS NOT NULL").fetchall()}
    for lab in (baseline, candidate):
        if lab not in labels:
            raise GateInputError(
                f"unknown label {lab!r}; labels in the database: {', '.join(sorted(labels)) or 'none'}"
            )

    def runs(label: str) -> dict[tuple[str, int], tuple[str, bool, tuple[float, float, float]]]:
        rows = con.execute(
            """
            SELECT case_id, epoch, family, passed, tool_invocations, model_calls, input_tokens + output_tokens
            FROM (SELECT *, row_number() OVER (PARTITION BY case_id, epoch ORDER BY finished_at DESC) AS rn
                  FROM case_runs WHERE label = ?)
            WHERE rn = 1
            """,
            [label],
        ).fetchall()
        return {(r[0], int(r[1])): (r[2], bool(r[3]), (float(r[4]), float(r[5]), float(r[6]))) for r in rows}

    base, cand = runs(baseline), runs(candidate)
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


def validate_flags(*, k: int, max_recall_drop: float, max_cost_increase: float, alpha: float) -> None:
    """Refuse out-of-range flags before anything is computed or written (exit 2)."""
    if k < 1:
        raise GateInputError(f"--k {k}: must be >= 1")
    if not 0.0 <= max_recall_drop <= 1.0:
        raise GateInputError(f"--max-recall-drop {max_recall_drop:g}: a pass-rate drop must be within [0, 1]")
    if not max_cost_increase >= 0.0:
        raise GateInputError(f"--max-cost-increase {max_cost_increase:g}: a relative increase must be >= 0")
    if not 0.0 < alpha < 1.0:
        raise GateInputError(f"--alpha {alpha:g}: must be within (0, 1)")


def evaluate(
    pairs: list[Pair],
    baseline: str,
    candidate: str,
    *,
    k: int = 3,
    max_recall_drop: float = 0.0,
    max_cost_increase: float = 0.25,
    alpha: float = ALPHA,
) -> GateResult:
    """Compute the gate verdict from paired case runs."""
    validate_flags(k=k, max_recall_drop=max_recall_drop, max_cost_increase=max_cost_increase, alpha=alpha)
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
    return (
        f"✅ **PASS** — no test is significant after Holm's correction at α = {result.alpha:g} "
        f"(smallest adjusted p = {best.p_adjusted:.2g}, {best.name})."
    )


def markdown(result: GateResult) -> str:
    """A summary fit for a pull-request comment."""
    lines = [
        f"## Model gate: {result.candidate} vs {result.baseline}",
        "",
        verdict_line(result),
        "",
        f"Unit: the case ({result.overall.cases} cases × {result.overall.pairs // result.overall.cases} epochs). "
        f"p: one-sided sign-flip permutation test on per-case differences (exact up to 13 differing cases, else "
        f"{PERMUTATION_RESAMPLES:,} resamples: floor {1 / (PERMUTATION_RESAMPLES + 1):.4f}); "
        f"adj. p: Holm's weighted step-down over all {len(result.tests)} tests "
        f"(overall pass rate {OVERALL_WEIGHT:.0%} of α), so the whole gate's "
        f"false-alarm rate is ≤ α = {result.alpha:g}. pass^{result.k}: tau-bench, mean over cases of "
        f"C(passes, {result.k}) / C(epochs, {result.k}).",
        "",
        f"| family | cases | pass rate (base → cand) | change | pass^{result.k} (base → cand) | cases worse / better "
        "| p | adj. p | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for f in [result.overall, *result.families]:
        t = f.test
        lines.append(
            f"| {f.family} | {f.cases} | {f.base_rate:.0%} → {f.cand_rate:.0%} | {t.change * 100:+.1f} pts | "
            f"{f.base_pass_k:.2f} → {f.cand_pass_k:.2f} | {f.cases_worse} / {f.cases_better} | {t.p_value:.2g} | "
            f"{t.p_adjusted:.2g} | {t.verdict.value} |"
        )
    lines += [
        "",
        "| cost per case run | baseline | candidate | change | p | adj. p | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in result.cost_tests:
        b, c, rel = result.cost[t.name]
        lines.append(
            f"| {t.name} | {b:.1f} | {c:.1f} | {rel:+.0%} | {t.p_value:.2g} | {t.p_adjusted:.2g} | {t.verdict.value} |"
        )
    from runners.gate_cases import markdown_section

    return "\n".join(lines) + "\n" + markdown_section(result, result.db)


def junit(result: GateResult) -> str:
    """JUnit XML: one test case for the whole set, one per family, one per cost metric."""
    cases = []
    for t in result.tests:
        classname = {Measure.OVERALL: "gate.overall", Measure.FAMILY: "gate.family", Measure.COST: "gate.cost"}
        body = ""
        if t.failed:
            from runners.gate_cases import junit_text

            # the message stays the verdict line's text; the cases and their diff commands are the failure's body
            cases_text = junit_text(result, t, result.db)
            message = escape(t.describe(), {chr(34): "&quot;"})
            body = f'<failure message="{message}">{escape(cases_text)}</failure>'
        name = "all cases" if t.kind is Measure.OVERALL else t.name
        cases.append(f'<testcase classname="{classname[t.kind]}" name="{escape(name)}">{body}</testcase>')
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="harness-bench gate {escape(result.candidate)} vs {escape(result.baseline)}" '
        f'tests="{len(cases)}" failures="{len(result.failures)}">\n  ' + "\n  ".join(cases) + "\n</testsuite>\n"
    )


def write_outputs(result: GateResult, summary_path: Path, junit_path: Path) -> None:
    """Write the Markdown summary and the JUnit XML."""
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    junit_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(markdown(result), encoding="utf-8")
    junit_path.write_text(junit(result), encoding="utf-8")

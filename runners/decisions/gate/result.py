"""What the gate works on and what it decides: the paired case runs, each hypothesis with its p-values and MDE,
the per-family pass rates, the sequential look, and the frozen `GateResult` every output is rendered from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from runners.decisions import power
from runners.decisions.gate_thresholds import DEFAULTS
from runners.plan.rules import DEFAULT_DB

__all__ = [
    "COST_METRICS",
    "CostChange",
    "FamilyResult",
    "GateInputError",
    "GateResult",
    "Hypothesis",
    "Measure",
    "Pair",
    "RowVerdict",
    "SequentialLook",
    "Verdict",
]

COST_METRICS = ("tool_invocations", "model_calls", "tokens")
"""The cost metrics, in the order of a pair's cost triple."""

Cost = tuple[float, float, float]
"""(tool invocations, model calls, tokens), in the order of COST_METRICS."""


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
    base_cost: Cost
    """Baseline (tool invocations, model calls, tokens)."""
    cand_cost: Cost
    """Candidate (tool invocations, model calls, tokens)."""


class CostChange(NamedTuple):
    """One cost metric under both labels, per case run."""

    baseline: float
    """Baseline mean."""
    candidate: float
    """Candidate mean."""
    relative: float
    """Relative change (inf: up from 0)."""


@dataclass(frozen=True)
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
    alpha: float = DEFAULTS.alpha
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class GateResult:
    """Everything the gate decided (frozen: a changed field is a new result, `dataclasses.replace`)."""

    baseline: str
    """Baseline label."""
    candidate: str
    """Candidate label."""
    k: int
    """k of pass^k."""
    alpha: float
    """Family-wise error rate of the whole gate."""
    families: tuple[FamilyResult, ...]
    """Per-family results."""
    overall: FamilyResult
    """All cases together."""
    cost: Mapping[str, CostChange] = field(default_factory=dict)
    """metric -> (baseline mean, candidate mean, relative change) per case run."""
    cost_tests: tuple[Hypothesis, ...] = ()
    """One test per cost metric."""
    max_mde: float = DEFAULTS.max_mde
    """A pass needs the overall test's MDE at 80% power to be at most this (pass-rate fraction)."""
    inconclusive: str | None = None
    """Why the gate cannot pass and what would make it conclusive (None: it is conclusive)."""
    look: SequentialLook | None = None
    """The group-sequential look this result is (None: a fixed-epoch gate)."""
    pairs: tuple[Pair, ...] = ()
    """The paired case runs the tests were computed on (the summary names the cases that got worse)."""
    db: str = str(DEFAULT_DB)
    """The database the pairs came from (in the printed `harness-bench diff` commands)."""

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

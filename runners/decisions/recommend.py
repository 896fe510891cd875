"""From a sweep's measured table to a recommended configuration, with an explicit decision rule.

**The case is the unit of analysis.** A case's epochs are repeated measurements of one case, so
every metric is first averaged per case, then over cases: copying epochs changes no number, no
interval and no pick.

- Rates (diagnosis recall, honest fallback): the mean of per-case rates with a Wilson score
  interval whose n is the number of *cases*. Exact Wilson when every case is deterministic; when a
  case's epochs disagree the interval is conservative (a [0, 1] variable's variance is at most
  p(1 − p)).
- Means (wasted invocations, tokens, model calls): the mean of per-case means with a percentile
  bootstrap that resamples cases (`scipy.stats.bootstrap`, seeded so reports are reproducible).

**Decision rule** (`Rule`, printed with every recommendation):

- `non-inferiority` (default, margin 2 points): a configuration is eligible when it is shown to be
  at most `margin` below the best on recall *and* on honest fallback — the one-sided 95% upper
  bound of its per-case paired deficit (bootstrap over cases) is ≤ margin. The cheapest eligible
  configuration by the objective is recommended. Sweep points share each case's trajectory, so
  paired differences are exactly 0 where a setting does not matter.
- `max-recall`: the highest recall, then the highest honest fallback, then the cheapest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import duckdb
import numpy as np
import scipy.stats

from harness import FallbackKind, ReleaseOutcome
from runners.decisions.choices import DEFAULT_MARGIN as DEFAULT_MARGIN
from runners.decisions.choices import Objective as Objective
from runners.decisions.choices import RecommendInputError as RecommendInputError
from runners.decisions.choices import Rule as Rule
from runners.decisions.choices import check_margin
from runners.decisions.intervals import Interval as Interval
from runners.domain.evalset import Family
from runners.plan.settings import SettingValue, swept_names
from runners.store.report_reads import SweepCaseRun, sweep_case_runs

NO_EVIDENCE_FAMILIES = (Family.EMPTY_LOGS, Family.GENERIC_KB, Family.MISSING_CONTEXT)


def config_columns() -> tuple[str, ...]:
    """The swept settings in declaration order — from the one settings declaration, so a setting declared
    sweepable later (schema_mode, say) is a configuration column here with no other edit."""
    return tuple(swept_names())


RESOLUTION_LIMIT = 0.10
"""The recall difference the advice for a too-small sweep plans for (the gate's default --max-mde)."""
CONFIDENCE = 0.95
BOOTSTRAP_RESAMPLES = 2_000
BOOTSTRAP_SEED = 20_261_130

METRIC_DEFINITIONS = {
    "recall": "diagnosis recall — share of cases expected to end in SUCCESS that did, with the root cause as the judge "
    "reads it"
    " (per case, then averaged)",
    "honest fallback": "share of no-evidence cases (empty_logs, generic_kb, missing_context) that ended in the "
    "expected FALLBACK and fallback kind",
    "wasted": "tool invocations after the first NO_GAIN on no-evidence cases, per case run",
    "tokens": "input + output tokens per case run (every case)",
    "model calls": "model calls per case run (every case)",
    "pass rate": "share of case runs meeting every expectation of their case",
}
"""One line per metric, shown by `recommend` and the report."""


_NO_CASE = Interval(mean=None, low=None, high=None, cases=0)
"""An interval over no case."""


def wilson(successes: float, n: int, z: float = 1.96) -> Interval:
    """Wilson score interval; `successes` may be fractional (a sum of per-case rates over n cases)."""
    if n == 0:
        return _NO_CASE
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denom
    return Interval(mean=p, low=max(0.0, centre - half), high=min(1.0, centre + half), cases=n)


def case_bootstrap_mean(values: list[float]) -> Interval:
    """Mean of per-case values with a percentile bootstrap interval resampling cases (seeded)."""
    if not values:
        return _NO_CASE
    arr = np.asarray(values, dtype=float)
    if len(arr) == 1 or np.all(arr == arr[0]):
        mean = float(arr.mean())
        return Interval(mean=mean, low=mean, high=mean, cases=len(arr))
    res = scipy.stats.bootstrap(
        (arr,),
        np.mean,
        confidence_level=CONFIDENCE,
        method="percentile",
        n_resamples=BOOTSTRAP_RESAMPLES,
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    ci = res.confidence_interval
    return Interval(mean=float(arr.mean()), low=float(ci.low), high=float(ci.high), cases=len(arr))


def deficit_upper_bound(deficits: list[float]) -> float:
    """One-sided 95% upper bound of the mean per-case deficit (best − this), bootstrap over cases."""
    if not deficits:
        return 0.0
    arr = np.asarray(deficits, dtype=float)
    if len(arr) == 1 or np.all(arr == arr[0]):
        return float(arr[0])
    res = scipy.stats.bootstrap(
        (arr,),
        np.mean,
        confidence_level=CONFIDENCE,
        alternative="less",
        method="percentile",
        n_resamples=BOOTSTRAP_RESAMPLES,
        rng=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return float(res.confidence_interval.high)


@dataclass(frozen=True)
class ConfigStats:
    """The measured table row of one configuration (grid point)."""

    config: tuple[SettingValue, ...]
    """Values of the swept settings, in `config_columns()` order."""
    cases: int
    """Cases measured."""
    case_runs: int
    """Case runs measured (cases × epochs)."""
    recall_by_case: dict[str, float]
    """Per expected-SUCCESS case: share of its epochs that ended in SUCCESS."""
    honest_by_case: dict[str, float]
    """Per no-evidence case: share of its epochs that ended in the expected fallback."""
    recall: Interval
    """Diagnosis recall over cases."""
    honest_fallback: Interval
    """Honest-fallback rate over no-evidence cases."""
    wasted: Interval
    """Wasted tool invocations per no-evidence case run."""
    tokens: Interval
    """Tokens per case run."""
    model_calls: Interval
    """Model calls per case run."""
    tool_invocations: Interval
    """Tool invocations per case run."""
    pass_rate: float
    """Mean per-case share of case runs meeting all expectations."""
    recall_epochs: dict[str, tuple[float, ...]] = field(default_factory=dict)
    """Per expected-SUCCESS case: 1.0 / 0.0 per epoch (in epoch order) — the pairing across grid points."""
    epochs: int = 1
    """Fewest epochs of any case."""

    def setting(self, column: str) -> SettingValue:
        """The value of one swept setting."""
        return self.config[config_columns().index(column)]

    def label(self, columns: tuple[str, ...] | None = None) -> str:
        """`no_gain_threshold=2 max_tool_invocations=10` for the given (swept) columns (default: all)."""
        names = config_columns()
        shown = names if columns is None else columns
        return " ".join(f"{k}={v}" for k, v in zip(names, self.config, strict=True) if k in shown)

    def cost(self, objective: Objective) -> float:
        """The objective's point estimate."""
        return {
            Objective.TOKENS: self.tokens.value,
            Objective.TOOL_INVOCATIONS: self.tool_invocations.value,
            Objective.MODEL_CALLS: self.model_calls.value,
            Objective.WASTED: self.wasted.value if self.wasted.n else 0.0,
        }[objective]


@dataclass(frozen=True, slots=True)
class _SweepCaseRun:
    """One case run of a sweep grid point, as `measure` reads it from case_runs."""

    family: str
    """The case's evaluation family (a built-in one or its suite's)."""
    expected_outcome: ReleaseOutcome
    """The outcome the case expects."""
    expected_fallback_kind: FallbackKind | None
    """The fallback kind the case expects (None unless a fallback)."""
    outcome: ReleaseOutcome
    """The outcome the run released."""
    fallback_kind: FallbackKind | None
    """The fallback kind it released (None unless a fallback)."""
    wasted_invocations: float
    """Tool invocations after the first NO_GAIN."""
    tokens: float
    """Input plus output tokens."""
    model_calls: float
    """Model calls."""
    tool_invocations: float
    """Tool invocations."""
    passed: bool
    """Whether it met all of the case's expectations."""
    epoch: int
    """The epoch, from 1."""
    outcome_passed: bool | None = None
    """The outcome verdict (None: stored before there were two verdicts)."""

    @classmethod
    def of(cls, row: SweepCaseRun) -> _SweepCaseRun:
        """The record of one stored case run, its vocabularies read."""
        expected_kind = row.expected_fallback_kind
        return cls(
            family=row.family,
            expected_outcome=ReleaseOutcome(row.expected_outcome),
            expected_fallback_kind=None if expected_kind is None else FallbackKind(expected_kind),
            outcome=ReleaseOutcome(row.outcome),
            fallback_kind=None if row.fallback_kind is None else FallbackKind(row.fallback_kind),
            wasted_invocations=_number(row.wasted_invocations),
            tokens=_number(row.tokens),
            model_calls=_number(row.model_calls),
            tool_invocations=_number(row.tool_invocations),
            passed=row.passed,
            epoch=int(_number(row.epoch)),
            outcome_passed=row.outcome_passed,
        )

    @property
    def diagnosed(self) -> bool:
        """Whether the run released the diagnosis: SUCCESS with the root cause (the outcome verdict; a run stored
        before there were two verdicts counts its SUCCESS)."""
        if self.outcome_passed is not None:
            return self.outcome is ReleaseOutcome.SUCCESS and self.outcome_passed
        return self.outcome is ReleaseOutcome.SUCCESS

    @property
    def honest(self) -> bool:
        """Whether it ended in exactly the expected outcome and fallback kind (and kept the Harness's invariants)."""
        expected = self.outcome is self.expected_outcome and self.fallback_kind is self.expected_fallback_kind
        return expected and self.outcome_passed is not False


def _number(value: object) -> float:
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"case_runs holds {value!r} where a number belongs")


def measure(con: duckdb.DuckDBPyConnection, sweep_id: str) -> list[ConfigStats]:
    """One ConfigStats per grid point of the sweep, from case_runs, with the case as the unit."""
    groups: dict[tuple[SettingValue, ...], dict[str, list[_SweepCaseRun]]] = {}
    for r in sweep_case_runs(con, sweep_id):
        groups.setdefault(r.config, {}).setdefault(r.case_id, []).append(_SweepCaseRun.of(r))
    out: list[ConfigStats] = []
    for cfg, by_case in groups.items():
        recall: dict[str, float] = {}
        recall_epochs: dict[str, tuple[float, ...]] = {}
        honest: dict[str, float] = {}
        wasted: list[float] = []
        tokens: list[float] = []
        calls: list[float] = []
        tools: list[float] = []
        passed: list[float] = []
        for case_id, runs in by_case.items():
            family, expected = runs[0].family, runs[0].expected_outcome
            if expected is ReleaseOutcome.SUCCESS:
                recall[case_id] = float(np.mean([r.diagnosed for r in runs]))
                recall_epochs[case_id] = tuple(float(r.diagnosed) for r in sorted(runs, key=lambda r: r.epoch))
            if family in NO_EVIDENCE_FAMILIES and expected is ReleaseOutcome.FALLBACK:
                honest[case_id] = float(np.mean([r.honest for r in runs]))
                wasted.append(float(np.mean([r.wasted_invocations for r in runs])))
            tokens.append(float(np.mean([r.tokens for r in runs])))
            calls.append(float(np.mean([r.model_calls for r in runs])))
            tools.append(float(np.mean([r.tool_invocations for r in runs])))
            passed.append(float(np.mean([r.passed for r in runs])))
        out.append(
            ConfigStats(
                config=cfg,
                cases=len(by_case),
                case_runs=sum(len(r) for r in by_case.values()),
                recall_by_case=recall,
                honest_by_case=honest,
                recall=wilson(sum(recall.values()), len(recall)),
                honest_fallback=wilson(sum(honest.values()), len(honest)),
                wasted=case_bootstrap_mean(wasted),
                tokens=case_bootstrap_mean(tokens),
                model_calls=case_bootstrap_mean(calls),
                tool_invocations=case_bootstrap_mean(tools),
                pass_rate=float(np.mean(passed)),
                recall_epochs=recall_epochs,
                epochs=min(len(r) for r in by_case.values()),
            )
        )
    return out


def resolution(stats: list[ConfigStats], best: ConfigStats) -> float:
    """Smallest recall difference the rule resolves with these cases and epochs (fraction).

    The larger of the granularity — one case run of the recall cases, 1 / (cases × epochs) — and
    the difference a paired comparison with the best detects with 80% power at the one-sided 95%
    level, (z₀.₉₅ + z₀.₈₀) × its standard error. The error comes from the epochs' own disagreement:
    per case, the variance over epochs of the (epoch-paired) difference to the best, over the epochs
    (median over the configurations; 0 for a deterministic sweep, not estimable from one epoch).
    """
    n = len(best.recall_by_case)
    if n == 0:
        return 1.0
    grain = 1.0 / (n * best.epochs)
    ses = []
    for s in stats:
        if s is best:
            continue
        shared = sorted(best.recall_epochs.keys() & s.recall_epochs.keys())
        v = 0.0
        for c in shared:
            d = np.subtract(best.recall_epochs[c], s.recall_epochs[c]) if len(best.recall_epochs[c]) == len(
                s.recall_epochs[c]) else np.asarray([])  # fmt: skip
            if d.size > 1:
                v += float(np.var(d, ddof=1)) / d.size
        if shared:
            ses.append(math.sqrt(v) / len(shared))
    z = float(scipy.stats.norm.ppf(CONFIDENCE) + scipy.stats.norm.ppf(0.8))
    return max(grain, z * float(np.median(ses)) if ses else 0.0)


def _recall(s: ConfigStats) -> float:
    return s.recall.value if s.recall.n else 1.0


def _honest(s: ConfigStats) -> float:
    return s.honest_fallback.value if s.honest_fallback.n else 1.0


def pareto_front(stats: list[ConfigStats], objective: Objective) -> list[ConfigStats]:
    """Configurations no other configuration beats on recall, honest fallback and cost at once."""

    def dominates(a: ConfigStats, b: ConfigStats) -> bool:
        ge = _recall(a) >= _recall(b) and _honest(a) >= _honest(b) and a.cost(objective) <= b.cost(objective)
        gt = _recall(a) > _recall(b) or _honest(a) > _honest(b) or a.cost(objective) < b.cost(objective)
        return ge and gt

    return [s for s in stats if not any(dominates(o, s) for o in stats if o is not s)]


def config_key(config: tuple[SettingValue, ...]) -> tuple[tuple[int, float, str], ...]:
    """A total order on configurations: numbers by value, text settings (schema_mode) by name."""
    return tuple((0, float(v), "") if isinstance(v, int | float) else (1, 0.0, str(v)) for v in config)


def swept_columns(stats: list[ConfigStats]) -> tuple[str, ...]:
    """The config columns that vary across the sweep (all of them if none varies)."""
    names = config_columns()
    varying = tuple(c for i, c in enumerate(names) if len({s.config[i] for s in stats}) > 1)
    return varying or names


def paired_deficit(best: dict[str, float], this: dict[str, float]) -> list[float]:
    """Per-case `best − this` on the cases both measured."""
    return [best[c] - this[c] for c in sorted(best.keys() & this.keys())]


@dataclass(frozen=True)
class Eligibility:
    """Why a configuration is (not) eligible under the non-inferiority rule."""

    recall_deficit: float
    """One-sided 95% upper bound of the recall deficit to the best (per case, paired)."""
    honest_deficit: float
    """The same for the honest-fallback rate."""
    eligible: bool
    """Both bounds are within the margin."""


@dataclass(frozen=True)
class Recommendation:
    """The chosen configuration and why."""

    chosen: ConfigStats
    """The recommended configuration."""
    best_recall: ConfigStats
    """The configuration with the highest recall (then honest fallback, then lowest cost)."""
    best_honest: ConfigStats
    """The configuration with the highest honest-fallback rate."""
    eligible: list[ConfigStats]
    """Configurations the rule allows; the cheapest of them is chosen."""
    front: list[ConfigStats]
    """The Pareto front."""
    objective: Objective
    """What "cheapest" meant."""
    rule: Rule
    """The decision rule."""
    margin: float
    """Non-inferiority margin (rate points as a fraction)."""
    columns: tuple[str, ...]
    """The swept settings (the ones that vary)."""
    checks: dict[tuple[SettingValue, ...], Eligibility] = field(default_factory=dict)
    """Per configuration: its non-inferiority bounds (empty under max-recall)."""
    paragraphs: tuple[str, ...] = ()
    """The reasoning, one paragraph per item."""
    resolution: float = 0.0
    """Smallest recall difference the rule resolves with these cases and epochs (fraction)."""
    separable: bool = True
    """No configuration's recall is within (0, resolution) of the pick's; otherwise nothing is recommended."""

    @property
    def rule_text(self) -> str:
        """The rule in one sentence."""
        if self.rule is Rule.MAX_RECALL:
            return (
                "Rule: maximum recall first — the highest diagnosis recall, then the highest honest-fallback "
                f"rate, then the lowest {self.objective.value} per case run."
            )
        return (
            f"Rule: non-inferiority with a margin of {self.margin * 100:g} points — a configuration is eligible "
            "when the one-sided 95% upper bound of its per-case deficit to the best (paired, bootstrap over "
            f"cases) is at most {self.margin * 100:g} points on recall and on honest fallback; the cheapest "
            f"eligible one by {self.objective.value} is recommended."
        )

    @property
    def reasoning(self) -> str:
        """The paragraphs, separated by blank lines."""
        return "\n\n".join(self.paragraphs)


def recommend(
    stats: list[ConfigStats],
    objective: Objective = Objective.TOKENS,
    *,
    rule: Rule = Rule.NON_INFERIORITY,
    margin: float = DEFAULT_MARGIN,
) -> Recommendation:
    """Pick a configuration by the rule; every number it uses is a per-case aggregate."""
    check_margin(margin)
    if not stats:
        raise RecommendInputError("the sweep has no case runs")
    cols = swept_columns(stats)
    # ties go to the cheaper, then the smaller configuration
    best = min(stats, key=lambda s: (-_recall(s), -_honest(s), s.cost(objective), config_key(s.config)))
    best_honest = min(stats, key=lambda s: (-_honest(s), -_recall(s), s.cost(objective), config_key(s.config)))
    checks: dict[tuple[SettingValue, ...], Eligibility] = {}
    eligible: list[ConfigStats] = []
    fallback_note = ""
    if rule is Rule.NON_INFERIORITY:
        for s in stats:
            r = deficit_upper_bound(paired_deficit(best.recall_by_case, s.recall_by_case))
            h = deficit_upper_bound(paired_deficit(best_honest.honest_by_case, s.honest_by_case))
            checks[s.config] = Eligibility(r, h, r <= margin + 1e-12 and h <= margin + 1e-12)
        eligible = [s for s in stats if checks[s.config].eligible]
        if not eligible:  # the best-recall and best-honest configurations disagree by more than the margin
            fallback_note = (
                "No configuration is within the margin of the best on both rates, so maximum recall first applies."
            )
    if rule is Rule.MAX_RECALL or not eligible:
        top = [s for s in stats if math.isclose(_recall(s), _recall(best))]
        top_honest = max(_honest(s) for s in top)
        eligible = [s for s in top if math.isclose(_honest(s), top_honest)]
    chosen = min(eligible, key=lambda s: (s.cost(objective), s.wasted.value if s.wasted.n else 0.0, s.config))
    front = pareto_front(stats, objective)
    rec = Recommendation(chosen, best, best_honest, eligible, front, objective, rule, margin, cols, checks)
    paragraphs = [
        f"Recommended: {chosen.label(cols)} — recall {chosen.recall.fmt(pct=True)}, honest fallback "
        f"{chosen.honest_fallback.fmt(pct=True)}, {objective.value} {chosen.cost(objective):.1f} per case run "
        f"({chosen.cases} cases, {chosen.case_runs} case runs; intervals are 95% over cases)."
        + (" It is on the Pareto front." if chosen in front else ""),
        rec.rule_text,
        f"The best recall is {best.recall.fmt(pct=True)} at {best.label(cols)}; the best honest-fallback rate is "
        f"{best_honest.honest_fallback.fmt(pct=True)} at {best_honest.label(cols)}. "
        f"{len(eligible)} of {len(stats)} configurations are eligible."
        + (f" {fallback_note}" if fallback_note else ""),
    ]
    res = resolution(stats, best)
    n_recall = len(best.recall_by_case)
    paragraphs.append(
        f"Resolution: with {n_recall} recall cases × {best.epochs} epoch(s) the rule resolves recall differences "
        f"of {res * 100:.1f} points or more (one case run is {100 / max(1, n_recall * best.epochs):.1f} points; "
        "80% power at the one-sided 95% level against the epochs' own disagreement); configurations closer than "
        "that to each other are not told apart."
        + (" One epoch shows no disagreement: run ≥ 2 epochs to measure the noise." if best.epochs == 1 else "")
    )
    close = [s for s in stats if 0 < abs(_recall(s) - _recall(chosen)) < res - 1e-12]
    if close:
        need = max(
            math.ceil(1 / (RESOLUTION_LIMIT * max(1, n_recall)) - 1e-9),
            math.ceil(best.epochs * (res / RESOLUTION_LIMIT) ** 2 - 1e-9),
        )
        other = min(close, key=lambda s: abs(_recall(s) - _recall(chosen)))
        paragraphs[0] = (
            f"No recommendation: this sweep is too small to separate its configurations — it resolves only recall "
            f"differences of {res * 100:.1f} points or more, and {other.label(cols)} differs from the rule's pick "
            f"{chosen.label(cols)} by {abs(_recall(other) - _recall(chosen)) * 100:.1f}; run more cases or epochs "
            f"(about --epochs {max(need, best.epochs + 1)} for {RESOLUTION_LIMIT * 100:g} points) and recommend again."
        )
        unresolved = True
    else:
        unresolved = False
    cheaper = [s for s in stats if s not in eligible and s.cost(objective) < chosen.cost(objective)]
    if cheaper:
        c = min(cheaper, key=lambda s: s.cost(objective))
        why = (
            f"its recall deficit bound is {checks[c.config].recall_deficit * 100:.1f} points and its honest-fallback "
            f"deficit bound {checks[c.config].honest_deficit * 100:.1f} points"
            if c.config in checks
            else f"its recall is {c.recall.fmt(pct=True)}"
        )
        paragraphs.append(
            f"The cheapest configuration, {c.label(cols)} ({c.cost(objective):.1f} {objective.value} per case run), "
            f"is not eligible: {why}."
        )
    return Recommendation(
        chosen, best, best_honest, eligible, front, objective, rule, margin, cols, checks, tuple(paragraphs), res,
        not unresolved,
    )  # fmt: skip


def table_rows(rec: Recommendation, stats: list[ConfigStats]) -> tuple[list[str], list[list[str]]]:
    """The per-configuration table (header, rows) shared by `recommend` and the report."""
    header = ["", *rec.columns, "recall", "honest fallback", "wasted", "tokens", "model calls", "pass rate"]
    if rec.checks:
        header.append("deficit bound recall / honest")
    rows = []
    for s in sorted(stats, key=lambda s: s.config):
        mark = "★" if s is rec.chosen else ("◆" if s in rec.front else "")
        row = [
            mark,
            *(str(s.setting(c)) for c in rec.columns),
            s.recall.fmt(pct=True),
            s.honest_fallback.fmt(pct=True),
            s.wasted.fmt(),
            s.tokens.fmt(digits=0),
            s.model_calls.fmt(),
            f"{s.pass_rate:.0%}",
        ]
        if rec.checks:
            ch = rec.checks[s.config]
            row.append(
                f"{ch.recall_deficit * 100:.1f} / {ch.honest_deficit * 100:.1f} pts {'✓' if ch.eligible else ''}"
            )
        rows.append(row)
    return header, rows

"""From a sweep's measured table to a recommended configuration (issue 5).

Per configuration: diagnosis recall (expected SUCCESS and got it), honest-fallback rate on the
no-evidence families, wasted tool invocations (invocations after the first NO_GAIN on cases
without evidence), tokens and model calls — rates with Wilson intervals, means with bootstrap
intervals over all case runs (cases × epochs). The recommendation is the cheapest configuration
(by the chosen objective) whose recall and honest-fallback rate are not significantly below the
best (one-sided two-proportion z-test, α = 0.05).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

import duckdb
import numpy as np

NO_EVIDENCE_FAMILIES = ("empty_logs", "generic_kb", "missing_context")
CONFIG_COLUMNS = (
    "no_gain_threshold",
    "protocol_violation_threshold",
    "max_tool_calls",
    "max_model_calls",
    "max_tokens",
)
Z_ONE_SIDED_95 = 1.6449


class Objective(StrEnum):
    """What "cheapest" means."""

    TOKENS = "tokens"
    TOOL_INVOCATIONS = "tool_invocations"
    MODEL_CALLS = "model_calls"
    WASTED = "wasted"


@dataclass(frozen=True)
class Interval:
    """A point estimate with a 95% interval."""

    value: float
    """Point estimate."""
    low: float
    """Lower bound."""
    high: float
    """Upper bound."""
    n: int
    """Sample size."""

    def fmt(self, pct: bool = False) -> str:
        """`0.83 [0.71, 0.91]`."""
        if self.n == 0:
            return "n/a"
        if pct:
            return f"{self.value:.0%} [{self.low:.0%}, {self.high:.0%}]"
        return f"{self.value:.2f} [{self.low:.2f}, {self.high:.2f}]"


def wilson(successes: int, n: int, z: float = 1.96) -> Interval:
    """Wilson score interval for a proportion."""
    if n == 0:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n)


def bootstrap_mean(values: list[float], *, resamples: int = 2000, seed: int = 0) -> Interval:
    """Percentile bootstrap interval of the mean (seeded, so reports are reproducible)."""
    if not values:
        return Interval(float("nan"), float("nan"), float("nan"), 0)
    arr = np.asarray(values, dtype=float)
    if np.all(arr == arr[0]):
        return Interval(float(arr[0]), float(arr[0]), float(arr[0]), len(arr))
    rng = np.random.default_rng(seed)
    means = rng.choice(arr, size=(resamples, len(arr)), replace=True).mean(axis=1)
    return Interval(float(arr.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)), len(arr))


def significantly_below(a_succ: int, a_n: int, b_succ: int, b_n: int) -> bool:
    """One-sided two-proportion z-test: is rate A significantly below rate B?"""
    if a_n == 0 or b_n == 0:
        return False
    pa, pb = a_succ / a_n, b_succ / b_n
    if pa >= pb:
        return False
    pooled = (a_succ + b_succ) / (a_n + b_n)
    se = math.sqrt(pooled * (1 - pooled) * (1 / a_n + 1 / b_n))
    if se == 0:
        return True
    return (pb - pa) / se > Z_ONE_SIDED_95


@dataclass(frozen=True)
class ConfigStats:
    """The measured table row of one configuration."""

    config: tuple[int, ...]
    """Values of CONFIG_COLUMNS."""
    case_runs: int
    """Case runs measured."""
    recall_hits: int
    """Expected-SUCCESS case runs that got SUCCESS."""
    recall_n: int
    """Expected-SUCCESS case runs."""
    honest_hits: int
    """No-evidence case runs that got the expected fallback."""
    honest_n: int
    """No-evidence case runs."""
    recall: Interval
    """Diagnosis recall."""
    honest_fallback: Interval
    """Honest-fallback rate on no-evidence families."""
    wasted: Interval
    """Wasted tool invocations per no-evidence case run."""
    tokens: Interval
    """Tokens per case run."""
    model_calls: Interval
    """Model calls per case run."""
    tool_invocations: Interval
    """Tool invocations per case run."""
    pass_rate: float
    """Share of case runs meeting all expectations."""

    def label(self, columns: tuple[str, ...] = CONFIG_COLUMNS) -> str:
        """`no_gain_threshold=2 max_tool_calls=10` for the given (swept) columns."""
        return " ".join(f"{k}={v}" for k, v in zip(CONFIG_COLUMNS, self.config, strict=True) if k in columns)

    def cost(self, objective: Objective) -> float:
        """The objective's point estimate."""
        return {
            Objective.TOKENS: self.tokens.value,
            Objective.TOOL_INVOCATIONS: self.tool_invocations.value,
            Objective.MODEL_CALLS: self.model_calls.value,
            Objective.WASTED: self.wasted.value if self.wasted.n else 0.0,
        }[objective]


def measure(con: duckdb.DuckDBPyConnection, sweep_id: str) -> list[ConfigStats]:
    """One ConfigStats per grid point of the sweep, from case_runs."""
    cols = ", ".join(f"c.{c}" for c in CONFIG_COLUMNS)
    rows = con.execute(
        f"""
        SELECT {cols}, c.family, c.expected_outcome, c.expected_fallback_kind, c.outcome, c.fallback_kind,
               c.wasted_invocations, c.input_tokens + c.output_tokens, c.model_calls, c.tool_invocations, c.passed
        FROM case_runs c JOIN bench_runs b USING (bench_run_id)
        WHERE b.sweep_id = ?
        ORDER BY {cols}
        """,
        [sweep_id],
    ).fetchall()
    groups: dict[tuple[int, ...], list[tuple[object, ...]]] = {}
    for r in rows:
        groups.setdefault(tuple(int(v) for v in r[:5]), []).append(r[5:])
    out: list[ConfigStats] = []
    for cfg, runs in groups.items():
        rec = [r for r in runs if r[1] == "SUCCESS"]
        noev = [r for r in runs if r[0] in NO_EVIDENCE_FAMILIES and r[1] == "FALLBACK"]
        rec_hits = sum(1 for r in rec if r[3] == "SUCCESS")
        honest_hits = sum(1 for r in noev if r[3] == r[1] and r[4] == r[2])
        out.append(
            ConfigStats(
                config=cfg, case_runs=len(runs), recall_hits=rec_hits, recall_n=len(rec), honest_hits=honest_hits,
                honest_n=len(noev), recall=wilson(rec_hits, len(rec)), honest_fallback=wilson(honest_hits, len(noev)),
                wasted=bootstrap_mean([float(r[5]) for r in noev]),  # type: ignore[arg-type]
                tokens=bootstrap_mean([float(r[6]) for r in runs]),  # type: ignore[arg-type]
                model_calls=bootstrap_mean([float(r[7]) for r in runs]),  # type: ignore[arg-type]
                tool_invocations=bootstrap_mean([float(r[8]) for r in runs]),  # type: ignore[arg-type]
                pass_rate=sum(1 for r in runs if r[9]) / len(runs),
            )
        )  # fmt: skip
    return out


def pareto_front(stats: list[ConfigStats], objective: Objective) -> list[ConfigStats]:
    """Configurations no other configuration beats on recall, honest fallback and cost at once."""

    def dominates(a: ConfigStats, b: ConfigStats) -> bool:
        ge = a.recall.value >= b.recall.value and _honest(a) >= _honest(b) and a.cost(objective) <= b.cost(objective)
        gt = a.recall.value > b.recall.value or _honest(a) > _honest(b) or a.cost(objective) < b.cost(objective)
        return ge and gt

    return [s for s in stats if not any(dominates(o, s) for o in stats if o is not s)]


def _honest(s: ConfigStats) -> float:
    return s.honest_fallback.value if s.honest_n else 1.0


def _recall(s: ConfigStats) -> float:
    return s.recall.value if s.recall_n else 1.0


@dataclass(frozen=True)
class Recommendation:
    """The chosen configuration and why."""

    chosen: ConfigStats
    """The recommended configuration."""
    best_recall: ConfigStats
    """The configuration with the highest recall."""
    eligible: list[ConfigStats]
    """Configurations not significantly below the best on recall and honest fallback."""
    front: list[ConfigStats]
    """The Pareto front."""
    objective: Objective
    """What "cheapest" meant."""
    reasoning: str
    """One paragraph."""


def swept_columns(stats: list[ConfigStats]) -> tuple[str, ...]:
    """The config columns that vary across the sweep (all of them if none varies)."""
    varying = tuple(c for i, c in enumerate(CONFIG_COLUMNS) if len({s.config[i] for s in stats}) > 1)
    return varying or CONFIG_COLUMNS


def recommend(stats: list[ConfigStats], objective: Objective = Objective.TOKENS) -> Recommendation:
    """Pick the cheapest configuration whose recall is not significantly below the best."""
    if not stats:
        raise ValueError("the sweep has no case runs")
    best = max(stats, key=lambda s: (_recall(s), _honest(s), -s.cost(objective)))
    best_honest = max(stats, key=_honest)
    eligible = [
        s
        for s in stats
        if not significantly_below(s.recall_hits, s.recall_n, best.recall_hits, best.recall_n)
        and not significantly_below(s.honest_hits, s.honest_n, best_honest.honest_hits, best_honest.honest_n)
    ]
    chosen = min(eligible, key=lambda s: (s.cost(objective), s.wasted.value if s.wasted.n else 0.0, s.config))
    front = pareto_front(stats, objective)
    dropped = [s for s in stats if s not in eligible]
    cols = swept_columns(stats)
    reasoning = (
        f"The best diagnosis recall is {best.recall.fmt(pct=True)} at {best.label(cols)}. "
        f"{len(eligible)} of {len(stats)} configurations are not significantly below it on recall or on the "
        f"honest-fallback rate (one-sided two-proportion z-test, α=0.05)"
        + (
            f"; {len(dropped)} are, e.g. {dropped[0].label(cols)} with recall {dropped[0].recall.fmt(pct=True)}"
            if dropped
            else ""
        )
        + f". Among the eligible ones, {chosen.label(cols)} is the cheapest by {objective.value} "
        f"({chosen.cost(objective):.1f} per case run; tokens {chosen.tokens.fmt()}, model calls "
        f"{chosen.model_calls.fmt()}, wasted invocations on no-evidence cases {chosen.wasted.fmt()}) "
        f"with recall {chosen.recall.fmt(pct=True)} and honest fallback {chosen.honest_fallback.fmt(pct=True)}"
        + (", and it is on the Pareto front." if chosen in front else ".")
    )
    return Recommendation(chosen, best, eligible, front, objective, reasoning)

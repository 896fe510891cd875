"""The bench's interval over cases, one typed value (`Interval`): a point estimate with its 95% interval.

`t_interval` is the mean with its Student t interval (scipy.stats) that `what-if`, `compare-stops` and the real-models
report use; `share_interval` is a share of events with its exact (Clopper-Pearson) interval, for rates over labelled
items (`guard-check`); `recommend` fills the same type with a Wilson score or a case-bootstrap interval
(runners/decisions/recommend.py). The case is the unit: each case's runs are averaged first.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from scipy import stats

from runners.decisions._model import Frozen

__all__ = ["CONFIDENCE", "Interval", "share_interval", "t_interval"]

CONFIDENCE = 0.95
"""The level of every t interval."""


class Interval(Frozen):
    """A mean over cases with its 95% t interval."""

    mean: float | None
    """The mean (None: no case)."""
    low: float | None
    """Lower end (None: under two cases)."""
    high: float | None
    """Upper end (None: under two cases)."""
    cases: int
    """Cases it is over."""

    @property
    def value(self) -> float:
        """The point estimate as a float (nan: no case)."""
        return math.nan if self.mean is None else self.mean

    @property
    def n(self) -> int:
        """The sample size: cases."""
        return self.cases

    def bounds(self) -> tuple[float, float, float]:
        """(estimate, low, high) as floats, nan where not known: for arithmetic and plots."""
        low = math.nan if self.low is None else self.low
        high = math.nan if self.high is None else self.high
        return self.value, low, high

    def fmt(self, pct: bool = False, digits: int = 2) -> str:
        """`0.83 [0.71, 0.91]`, `83% [71%, 91%]` with pct, `4810 [4702, 4950]` with digits=0; `n/a` without a case."""
        if self.cases == 0:
            return "n/a"
        value, low, high = self.bounds()
        if pct:
            return f"{value:.0%} [{low:.0%}, {high:.0%}]"
        return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def t_interval(values: Sequence[float]) -> Interval:
    """The mean of `values` and its 95% Student t interval (scipy.stats); values all equal: no spread."""
    if not values:
        return Interval(mean=None, low=None, high=None, cases=0)
    n = len(values)
    mean = float(sum(values) / n)
    if n < 2:
        return Interval(mean=mean, low=None, high=None, cases=n)
    sem = float(stats.sem(values))
    if sem == 0.0:  # (scipy answers nan for a zero scale)
        return Interval(mean=mean, low=mean, high=mean, cases=n)
    low, high = stats.t.interval(CONFIDENCE, n - 1, loc=mean, scale=sem)
    return Interval(mean=mean, low=float(low), high=float(high), cases=n)


def share_interval(events: int, n: int) -> Interval:
    """`events / n` with its exact 95% Clopper-Pearson interval (scipy.stats); `cases` is `n` (n 0: no estimate)."""
    if n == 0:
        return Interval(mean=None, low=None, high=None, cases=0)
    if not 0 <= events <= n:
        raise ValueError(f"{events} events of {n}")
    ci = stats.binomtest(events, n).proportion_ci(confidence_level=CONFIDENCE, method="exact")
    return Interval(mean=events / n, low=float(ci.low), high=float(ci.high), cases=n)

"""The bench's interval over cases: a mean with its 95% Student t interval (scipy.stats), as one typed value.

The case is the unit: `what-if`, `compare-stops` and the real-models report average each case's runs first and
hand the per-case values here.
"""

from __future__ import annotations

from collections.abc import Sequence

from scipy import stats

from runners.decisions._model import Frozen

__all__ = ["CONFIDENCE", "Interval", "t_interval"]

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

"""How often a SemanticGuard is wrong on labelled conclusions (`harness-bench guard-check`): the share of `unsupported`
conclusions it passed (SUPPORTED) and of `supported` ones it blocked (UNSUPPORTED), each with its counts and a 95%
interval (`runners/decisions/intervals.py`)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from harness import SemanticVerdict
from runners.decisions.intervals import Interval, share_interval
from runners.domain.labelled_conclusions import ConclusionLabel

__all__ = ["GuardRates", "LabelVerdicts", "guard_rates"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LabelVerdicts(_Frozen):
    """A guard on the conclusions of one label."""

    n: int
    """Conclusions with this label."""
    passed: int
    """Of them, the ones the guard said SUPPORTED for."""
    error: int
    """The guard's mistakes among them: passed for `unsupported`, blocked for `supported`."""
    error_share: Interval
    """`error / n` with its 95% interval."""


class GuardRates(_Frozen):
    """One guard on a labelled set."""

    guard: str
    """The guard's name (`off`, `model:<name>`)."""
    by_label: dict[ConclusionLabel, LabelVerdicts]
    """Per label: how many, how many passed, the mistakes and their share."""

    @property
    def unsupported_passed(self) -> LabelVerdicts:
        """The `unsupported` conclusions, the passed ones its mistakes."""
        return self.by_label[ConclusionLabel.UNSUPPORTED]

    @property
    def supported_blocked(self) -> LabelVerdicts:
        """The `supported` conclusions, the blocked ones its mistakes."""
        return self.by_label[ConclusionLabel.SUPPORTED]


def _verdicts(label: ConclusionLabel, n: int, passed: int) -> LabelVerdicts:
    error = passed if label is ConclusionLabel.UNSUPPORTED else n - passed
    return LabelVerdicts(n=n, passed=passed, error=error, error_share=share_interval(error, n))


def guard_rates(guard: str, judged: Iterable[tuple[ConclusionLabel, SemanticVerdict]]) -> GuardRates:
    """The rates of `guard` from its verdict on each labelled conclusion."""
    n = dict.fromkeys(ConclusionLabel, 0)
    passed = dict.fromkeys(ConclusionLabel, 0)
    for label, verdict in judged:
        n[label] += 1
        passed[label] += verdict is SemanticVerdict.SUPPORTED
    return GuardRates(
        guard=guard, by_label={label: _verdicts(label, n[label], passed[label]) for label in ConclusionLabel}
    )

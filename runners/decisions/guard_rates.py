"""How often a SemanticGuard is wrong on labelled conclusions (`harness-bench guard-check`): the share of `unsupported`
conclusions it passed (SUPPORTED) and of `supported` ones it blocked (UNSUPPORTED), each with its counts and a 95%
interval (`runners/decisions/intervals.py`)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

from harness import SemanticGuardResult, SemanticVerdict
from runners.decisions.intervals import Interval, share_interval
from runners.domain.labelled_conclusions import ConclusionLabel, LabelledConclusion

__all__ = ["GuardMistake", "GuardRates", "LabelVerdicts", "guard_rates"]


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


class GuardMistake(_Frozen):
    """A conclusion the guard judged against its label."""

    case_id: str
    """Its case."""
    conclusion: str
    """The conclusion."""
    label: ConclusionLabel
    """What it is."""
    reason: str
    """The guard's reason for its verdict (its own words, or why it failed closed)."""


class GuardRates(_Frozen):
    """One guard on a labelled set."""

    guard: str
    """The guard's name (`off`, `model:<name>`)."""
    by_label: dict[ConclusionLabel, LabelVerdicts]
    """Per label: how many, how many passed, the mistakes and their share."""
    mistakes: tuple[GuardMistake, ...] = ()
    """Each conclusion it got wrong, in the file's order."""

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


def guard_rates(guard: str, judged: Iterable[tuple[LabelledConclusion, SemanticGuardResult]]) -> GuardRates:
    """The rates of `guard` from its verdict on each labelled conclusion."""
    n = dict.fromkeys(ConclusionLabel, 0)
    passed = dict.fromkeys(ConclusionLabel, 0)
    mistakes: list[GuardMistake] = []
    for item, result in judged:
        supported = result.verdict is SemanticVerdict.SUPPORTED
        n[item.label] += 1
        passed[item.label] += supported
        if supported != (item.label is ConclusionLabel.SUPPORTED):
            mistakes.append(GuardMistake(case_id=item.case_id, conclusion=item.conclusion, label=item.label,
                                         reason=result.reason))  # fmt: skip
    by_label = {label: _verdicts(label, n[label], passed[label]) for label in ConclusionLabel}
    return GuardRates(guard=guard, by_label=by_label, mistakes=tuple(mistakes))

"""How often a judge is wrong on labelled answers (`harness-bench judge-check`): the share of `wrong` and of `vague`
answers it passes and of `correct` answers it fails, each with its count and a 95% Clopper-Pearson interval
(`runners/decisions/intervals.py`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from runners.decisions.intervals import share_interval
from runners.domain.case_model import EvalCase
from runners.domain.judge import Judge
from runners.domain.labelled_answers import Label, LabelledAnswer, root_cause_of

__all__ = ["JudgeRates", "LabelRate", "judge_rates"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LabelRate(_Frozen):
    """A judge on the answers of one label."""

    n: int
    """Answers with this label."""
    passed: int
    """Of them, the ones the judge passed."""
    error: int
    """The judge's mistakes among them: passed for `wrong` and `vague`, failed for `correct`."""
    error_share: float | None
    """`error / n` (None without answers)."""
    ci95: tuple[float, float] | None
    """The 95% Clopper-Pearson interval of `error_share`."""


class JudgeRates(_Frozen):
    """One judge on a labelled set."""

    judge: str
    """The judge's name."""
    default: bool
    """Whether it is the bench's default judge."""
    by_label: dict[Label, LabelRate]
    """Per label: how many, how many passed, the mistakes and their share."""


def _rate(label: Label, n: int, passed: int) -> LabelRate:
    error = passed if label is not Label.CORRECT else n - passed
    if n == 0:
        return LabelRate(n=0, passed=0, error=0, error_share=None, ci95=None)
    share = share_interval(error, n)
    assert share.low is not None and share.high is not None  # n > 0: an exact interval always exists
    return LabelRate(n=n, passed=passed, error=error, error_share=error / n, ci95=(share.low, share.high))


def judge_rates(
    judge: Judge,
    answers: Sequence[LabelledAnswer],
    cases: Mapping[str, EvalCase],
    *,
    default: bool,
    progress: Callable[[int], None] | None = None,
) -> JudgeRates:
    """`judge` on every answer (`progress` is told after each)."""
    n = dict.fromkeys(Label, 0)
    passed = dict.fromkeys(Label, 0)
    for i, answer in enumerate(answers, start=1):
        case = cases[answer.case_id]
        cause = root_cause_of(case)
        assert cause is not None  # parse_labelled_answers refuses a case without one
        verdict = judge.judge(cause, answer.answer, question=case.question)
        n[answer.label] += 1
        passed[answer.label] += verdict.states_root_cause
        if progress is not None:
            progress(i)
    return JudgeRates(judge=judge.name, default=default,
                      by_label={label: _rate(label, n[label], passed[label]) for label in Label})  # fmt: skip

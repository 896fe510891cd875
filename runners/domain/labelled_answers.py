"""Labelled answers, the judge's test data: one JSON object a line, `{"case_id", "answer", "label"}`, the label
saying what a careful person decided the answer is (`correct`, `wrong`, `vague`). `evalsets/judge/` holds two sets:
`dev.jsonl`, written for the development split and developed against, and `held-out.jsonl`, written first for
held-out cases, frozen and never developed against.

A line that is not such an object, names a case that declares no root cause or has another label is refused with one
line naming the file, the line and the field (`LabelledAnswersError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from pydantic import ConfigDict, Field

from runners.domain.case_model import EvalCase
from runners.domain.labelled_lines import LabelledLine, parse_labelled_lines
from runners.domain.root_cause import RootCause

__all__ = ["Label", "LabelledAnswer", "LabelledAnswersError", "parse_labelled_answers", "root_cause_of"]


class Label(StrEnum):
    """What a careful person decided an answer is."""

    CORRECT = "correct"
    """States the case's root cause (in any words)."""
    WRONG = "wrong"
    """States another cause, or denies the root cause."""
    VAGUE = "vague"
    """Names no cause precise enough to act on."""


class LabelledAnswer(LabelledLine):
    """One labelled answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case_id: str = Field(min_length=1)
    """The case it answers (one that declares a root cause)."""
    answer: str
    """The conclusion, as an agent would publish it."""
    label: Label
    """What it is."""


class LabelledAnswersError(ValueError):
    """A labelled-answers file is unusable: one line naming the file, the line and what is wrong."""


def root_cause_of(case: EvalCase) -> RootCause | None:
    """The root cause a SUCCESS conclusion of `case` must state: the case's own, or the one a model without the case's
    mistake would state (None: the case accepts no SUCCESS)."""
    if case.expect.root_cause is not None:
        return case.expect.root_cause
    clean = case.expect.without_mistake
    return clean.root_cause if clean is not None else None


def parse_labelled_answers(text: str, source: str, cases: Mapping[str, EvalCase]) -> list[LabelledAnswer]:
    """The answers of a JSON-lines `text` (blank lines skipped); `source` names the file in errors."""
    return parse_labelled_lines(text, source, LabelledAnswer, Label, cases, _judgeable, LabelledAnswersError)


def _judgeable(case: EvalCase) -> str | None:
    """Why the judge cannot be checked on `case` (None: it can)."""
    return None if root_cause_of(case) is not None else "declares no root cause (it accepts no SUCCESS)"

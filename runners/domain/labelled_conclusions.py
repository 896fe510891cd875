"""Labelled conclusions, the SemanticGuard's test data: one JSON object a line, `{"case_id", "conclusion", "label"}`,
the label saying what a careful person decided the conclusion is against the evidence the guard is shown for that case
(`supported`, `unsupported`). The evidence is not in the line: it is what the case's reference run shows the
SemanticGuard (`runners/run/guard_evidence.py`). `evalsets/guard/` holds two sets: `held-out.jsonl`, written first
for held-out cases and never developed against, and `dev.jsonl`, for the development split.

A line that is not such an object, names no case, or has another label is refused with one line naming the file, the
line and the field (`LabelledConclusionsError`); `GuardSetting` names the guards `guard-check` measures.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import StrEnum
from typing import TYPE_CHECKING

from pydantic import ConfigDict, Field

from runners.domain.labelled_lines import LabelledLine, parse_labelled_lines

if TYPE_CHECKING:  # the cases' model (and its parsers) load only where lines are read
    from runners.domain.case_model import EvalCase

__all__ = ["ConclusionLabel", "GuardSetting", "LabelledConclusion", "LabelledConclusionsError",
           "parse_labelled_conclusions"]  # fmt: skip


class ConclusionLabel(StrEnum):
    """What a careful person decided a conclusion is, against the evidence the guard is shown."""

    SUPPORTED = "supported"
    """Every assertion of the conclusion (entity, mechanism, number, causal link) is stated by the evidence."""
    UNSUPPORTED = "unsupported"
    """It asserts something the evidence does not state, or that the evidence contradicts."""


class GuardSetting(StrEnum):
    """The guards `guard-check` can measure."""

    OFF = "off"
    """The SemanticGuard switched off (the ablation's setting): every conclusion passes."""
    MODEL = "model"
    """The SemanticGuard asked over an OpenAI-compatible endpoint (--guard-model), under cassettes."""


class LabelledConclusion(LabelledLine):
    """One labelled conclusion."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case_id: str = Field(min_length=1)
    """The case whose reference run's verified evidence the conclusion is judged against."""
    conclusion: str = Field(min_length=1)
    """The conclusion, as an agent's Draft would state it."""
    label: ConclusionLabel
    """What it is."""


class LabelledConclusionsError(ValueError):
    """A labelled-conclusions file is unusable: one line naming the file, the line and what is wrong."""


def parse_labelled_conclusions(
    text: str, source: str, cases: Mapping[str, EvalCase], unusable: Callable[[EvalCase], str | None]
) -> list[LabelledConclusion]:
    """The conclusions of a JSON-lines `text` (blank lines skipped); `source` names the file in errors; `unusable`
    says why a case cannot be judged by the guard (None: it can)."""
    return parse_labelled_lines(
        text, source, LabelledConclusion, ConclusionLabel, cases, unusable, LabelledConclusionsError
    )

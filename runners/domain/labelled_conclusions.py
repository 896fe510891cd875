"""Labelled conclusions, the SemanticGuard's test data: one JSON object a line, `{"case_id", "conclusion", "label"}`,
the label saying what a careful person decided the conclusion is against the evidence the guard is shown for that case
(`supported`, `unsupported`). The evidence is not in the line: it is what the case's reference run shows the
SemanticGuard (`runners/run/guard_evidence.py`). `evalsets/guard/` holds two sets: `held-out.jsonl`, written first
for held-out cases and never developed against, and `dev.jsonl`, for the development split.

A line that is not such an object, names no case, or has another label is refused with one line naming the file, the
line and the field (`LabelledConclusionsError`); `GuardSetting` names the guards `guard-check` measures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

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


class LabelledConclusion(BaseModel):
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
    out: list[LabelledConclusion] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        try:
            raw = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise LabelledConclusionsError(f"{where}: not a JSON object ({str(exc)[:80]})") from None
        if not isinstance(raw, dict):
            raise LabelledConclusionsError(f"{where}: not a JSON object")
        try:
            item = LabelledConclusion.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "line"
            if field == "label":
                message = f"label {str(raw.get('label'))[:40]!r} is not one of {[v.value for v in ConclusionLabel]}"
            else:
                message = f"{field}: {first['msg']}"
            raise LabelledConclusionsError(f"{where}: {message}") from None
        case = cases.get(item.case_id)
        if case is None:
            raise LabelledConclusionsError(f"{where}: case_id {item.case_id[:80]!r} is not a case")
        why = unusable(case)
        if why is not None:
            raise LabelledConclusionsError(f"{where}: case_id {item.case_id!r} {why}")
        out.append(item)
    return out

"""What each observation of a reference trajectory really held: its truth grade, declared on the step that made it.

A gain tag is a judgment of one observation, so its truth is graded observation by observation, on four grades
(docs/evaluation-cases.md gives the rule for each):

- `root_cause` — a record holding the root cause's evidence (what the reference Draft's conclusion rests on);
- `excludes` — a record ruling a hypothesis out (a healthy check, a dependency shown not to be involved);
- `symptom` — records restating or confirming the complaint (the errors the operator reported), nothing of the cause;
- `nothing_new` — nothing, or nothing relevant: an empty result, a failure, a rejection, a repeat, generic text.

A grade other than `nothing_new` names the records it rests on (`records`: text each of them contains, compared as
the evidence marks are); a test checks every name against what the step's call returns on the case's fixtures.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness import InformationGain

__all__ = ["GRADE_DOCS", "ObservationTruth", "TruthGrade", "right_tags"]


class TruthGrade(StrEnum):
    """What an observation held, for the tag a model gives it."""

    ROOT_CAUSE = "root_cause"
    """A record holding the root cause's evidence."""
    EXCLUDES = "excludes"
    """A record ruling a hypothesis out."""
    SYMPTOM = "symptom"
    """Records restating or confirming the complaint."""
    NOTHING_NEW = "nothing_new"
    """Nothing, or nothing relevant (empty, failed, rejected, a repeat, generic text)."""


GRADE_DOCS: dict[TruthGrade, str] = {
    TruthGrade.ROOT_CAUSE: "holds the root cause's evidence (GAINED is right)",
    TruthGrade.EXCLUDES: "rules a hypothesis out (GAINED is right)",
    TruthGrade.SYMPTOM: "restates or confirms the complaint (either tag is right)",
    TruthGrade.NOTHING_NEW: "nothing, or nothing relevant (NO_GAIN is right)",
}
"""One line per grade, for the tables' legends."""


def right_tags(grade: TruthGrade) -> frozenset[InformationGain]:
    """The tags that are right on an observation of `grade`: the envelope's GAINED means "confirmed, excluded or
    narrowed a hypothesis", so evidence and exclusions are GAINED, nothing new is NO_GAIN, and a confirmation of
    the complaint may be read either way."""
    if grade in (TruthGrade.ROOT_CAUSE, TruthGrade.EXCLUDES):
        return frozenset({InformationGain.GAINED})
    if grade is TruthGrade.NOTHING_NEW:
        return frozenset({InformationGain.NO_GAIN})
    return frozenset(InformationGain)


class ObservationTruth(BaseModel):
    """A step's observation, graded: what it held and the records that show it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    grade: TruthGrade
    """What the observation held."""
    records: list[str] = Field(default_factory=list)
    """Text each record the grade rests on contains (case-insensitive, whitespace collapsed); none for
    `nothing_new`, at least one for the others."""

    @model_validator(mode="after")
    def _records_fit(self) -> ObservationTruth:
        if self.grade is TruthGrade.NOTHING_NEW and self.records:
            raise ValueError("truth.records: a nothing_new observation names no records")
        if self.grade is not TruthGrade.NOTHING_NEW and not self.records:
            raise ValueError(f"truth.records: a {self.grade.value} observation names the records it rests on")
        for text in self.records:
            if len(text.strip()) < 4:
                raise ValueError(f"truth.records: {text!r} is too short to name a record (4 characters at least)")
        return self

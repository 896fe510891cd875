"""The built-in cases' truth grades against their fixtures.

Every step of every reference trajectory declares what its observation held (`truth`: root_cause, excludes, symptom
or nothing_new, `runners/domain/truth_grades.py`); the tag probe scores a model's GAINED / NO_GAIN on it. These tests
hold the declarations to the data:

- every step has a grade;
- a grade other than `nothing_new` names records, and every name is found in a record the step's call returns when
  the reference is played through the Harness on the case's fixtures (a name that matches nothing is a typo that
  would grade an observation on text it never showed);
- an observation that came back empty (or failed, or was rejected) is `nothing_new`: nothing came back to hold more;
- the grade model refuses what a grade cannot be (records on `nothing_new`, none on the others).
"""

from __future__ import annotations

from functools import cache

import pytest
from pydantic import ValidationError

from harness import InformationGain
from runners.domain.evalset import EvalCase, load_cases
from runners.domain.evidence_marks import _norm, _strings
from runners.domain.truth_grades import ObservationTruth, TruthGrade, right_tags
from runners.run.tag_probe import StepObservation, step_observations

CASES = load_cases()


@cache
def _observed(case_id: str) -> dict[int, StepObservation]:
    case = next(c for c in CASES if c.id == case_id)
    return {o.step: o for o in step_observations(case)}


def test_every_step_of_every_reference_trajectory_has_a_grade() -> None:
    missing = [f"{c.id} step {i}" for c in CASES for i, s in enumerate(c.trajectory.steps, 1) if s.truth is None]
    assert not missing, f"steps without a truth grade: {missing}"
    graded = {s.truth.grade for c in CASES for s in c.trajectory.steps if s.truth is not None}
    assert graded == set(TruthGrade)  # every grade is used somewhere


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_named_record_is_in_the_steps_observation(case: EvalCase) -> None:
    observed = _observed(case.id)
    wrong: list[str] = []
    for i, step in enumerate(case.trajectory.steps, 1):
        truth = step.truth
        assert truth is not None
        seen = observed.get(i)
        texts = [_norm(t) for r in (seen.records if seen else ()) for t in _strings(dict(r))]
        if truth.grade is not TruthGrade.NOTHING_NEW and not texts:
            wrong.append(f"step {i}: graded {truth.grade.value}, but its observation holds no record")
        for name in truth.records:
            if not any(_norm(name) in t for t in texts):
                wrong.append(f"step {i}: {name!r} is in no record its call returned")
    assert not wrong, f"{case.id}: " + "; ".join(wrong)


def test_the_grades_that_rest_on_records_name_them() -> None:
    with pytest.raises(ValidationError, match="names the records it rests on"):
        ObservationTruth(grade=TruthGrade.ROOT_CAUSE)
    with pytest.raises(ValidationError, match="names no records"):
        ObservationTruth(grade=TruthGrade.NOTHING_NEW, records=["anything"])
    with pytest.raises(ValidationError, match="too short"):
        ObservationTruth(grade=TruthGrade.SYMPTOM, records=["ab"])


def test_right_tags_follow_the_envelopes_definition() -> None:
    assert right_tags(TruthGrade.ROOT_CAUSE) == right_tags(TruthGrade.EXCLUDES) == {InformationGain.GAINED}
    assert right_tags(TruthGrade.NOTHING_NEW) == {InformationGain.NO_GAIN}
    assert right_tags(TruthGrade.SYMPTOM) == set(InformationGain)

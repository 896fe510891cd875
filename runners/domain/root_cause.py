"""A case's root cause as a judge reads it: a short statement, the facts that make it (the entity at fault and the
mechanism, each with its accepted wordings) and the distractors — the wrong hypotheses the case is built around.

A conclusion states the root cause when it asserts every fact (the entity and the mechanism in one sentence), denies
none and asserts no distractor; how a judge decides that is `runners/domain/judge.py`'s.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

__all__ = ["Distractor", "FactRole", "Phrase", "RootCause", "RootCauseFact"]

Phrase = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"\S")]
"""One accepted wording, matched on whole tokens after normalisation (case, `R-217` = `R217`, `23:00` = `23:00:00`); a
word ending in `*` matches any word it begins (`expir*`: expired, expiry); Chinese matches character by character."""


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FactRole(StrEnum):
    """What a fact is to the root cause."""

    ENTITY = "entity"
    """What is at fault (a component, a rule, a certificate); with the mechanism, in one sentence."""
    MECHANISM = "mechanism"
    """What happened to it (expired, exhausted, lowered); with the entity, in one sentence."""
    DETAIL = "detail"
    """A further fact the root cause needs (a value, an id), anywhere in the conclusion."""


class RootCauseFact(_Strict):
    """One fact of the root cause, with the wordings that state it."""

    role: FactRole = FactRole.DETAIL
    """Entity, mechanism or a further detail."""
    variants: list[Phrase] = Field(min_length=1)
    """Accepted wordings: any one, asserted (not in a negated or hedged clause), states the fact."""


class Distractor(_Strict):
    """A wrong hypothesis the case is built around: a conclusion asserting it does not state the root cause."""

    hypothesis: str = Field(min_length=3, max_length=300)
    """The wrong hypothesis, in a sentence."""
    variants: list[Phrase] = Field(min_length=1)
    """Wordings that assert it (any one, in a clause that is not negated)."""


class RootCause(_Strict):
    """What a SUCCESS conclusion of the case must state."""

    statement: str = Field(min_length=10, max_length=400)
    """The root cause in one sentence, as a person would accept it (a model judge's rubric)."""
    facts: list[RootCauseFact] = Field(min_length=1)
    """The facts a conclusion must assert, each in one of its wordings."""
    distractors: list[Distractor] = Field(default_factory=list)
    """The wrong hypotheses the case is built around."""

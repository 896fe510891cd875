"""The vocabulary of `recommend` and `report` and their choices (`RecommendChoices`: defaults, bounds, refusals),
declared once and light to import (the CLI builds its flags from it, runners/commands/_common.py, before any
analysis module is loaded)."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from runners.plan.flags import Bounded, Flag, FlagModel

__all__ = ["DEFAULT_MARGIN", "Objective", "RecommendChoices", "RecommendInputError", "Rule", "check_margin"]


class Objective(StrEnum):
    """What "cheapest" means."""

    TOKENS = "tokens"
    TOOL_INVOCATIONS = "tool_invocations"
    MODEL_CALLS = "model_calls"
    WASTED = "wasted"


class Rule(StrEnum):
    """How the recommendation trades recall against cost."""

    NON_INFERIORITY = "non-inferiority"
    MAX_RECALL = "max-recall"


class RecommendChoices(FlagModel):
    """How `recommend` and `report` pick the configuration they recommend (their flags show it:
    runners/commands/_common.py)."""

    objective: Objective = Objective.TOKENS
    """What "cheapest" means."""
    rule: Rule = Rule.NON_INFERIORITY
    """How recall is traded against cost."""
    margin: Annotated[float, Flag(reason="a rate margin must be within [0, 1] ({default:g} = {points:g} points)")] = (
        Field(default=0.02, ge=0.0, le=1.0)
    )
    """The non-inferiority margin: 2 points of rate."""


DEFAULT_MARGIN: float = RecommendChoices().margin
"""Default non-inferiority margin (`--margin`), the library's keyword default."""


class RecommendInputError(ValueError):
    """A recommend flag is out of range (exit 2)."""


def check_margin(margin: float) -> float:
    """A rate margin is within [0, 1]; returns it."""
    bounds: Bounded | None = RecommendChoices.field("margin").bounds
    if bounds is not None and not bounds.inside(margin):
        raise RecommendInputError(f"--margin {margin:g}: {bounds.refusal()}")
    return margin

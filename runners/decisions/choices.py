"""The vocabulary of `recommend` and `report`, and their flags (`RecommendChoices`), declared once and light to
import (the CLI builds its choices and defaults from it before any analysis module is loaded)."""

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
    """How `recommend` and `report` pick the configuration they recommend."""

    objective: Annotated[Objective, Flag(help="what 'cheapest' means (default {default})")] = Objective.TOKENS
    """What "cheapest" means."""
    rule: Annotated[
        Rule,
        Flag(help="non-inferiority: the cheapest configuration shown within --margin of the best recall and honest"
                  " fallback (default); max-recall: the highest recall first"),
    ] = Rule.NON_INFERIORITY  # fmt: skip
    """How recall is traded against cost."""
    margin: Annotated[
        float,
        Flag(metavar="RATE", reason="a rate margin must be within [0, 1] ({default:g} = {points:g} points)",
             help="non-inferiority margin in [0, 1] (default {default:g} = {points:g} points)"),
    ] = Field(default=0.02, ge=0.0, le=1.0)  # fmt: skip
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

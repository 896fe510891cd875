"""The vocabulary of `recommend` and `report`, declared once and light to import (the CLI builds its choices
and defaults from it before any analysis module is loaded)."""

from __future__ import annotations

from enum import StrEnum

from runners.plan.flags import bounded_float

__all__ = ["DEFAULT_MARGIN", "MARGIN_RANGE", "Objective", "RecommendInputError", "Rule", "check_margin"]

DEFAULT_MARGIN = 0.02
"""Default non-inferiority margin (`--margin`): 2 points of rate."""
MARGIN_RANGE = bounded_float(
    0.0, 1.0, reason=f"a rate margin must be within [0, 1] ({DEFAULT_MARGIN:g} = {DEFAULT_MARGIN * 100:g} points)"
)
"""`--margin`'s range: a margin of rate, which is a share."""


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


class RecommendInputError(ValueError):
    """A recommend flag is out of range (exit 2)."""


def check_margin(margin: float) -> float:
    """A rate margin is within [0, 1]; returns it."""
    if not MARGIN_RANGE.inside(margin):
        raise RecommendInputError(f"--margin {margin:g}: {MARGIN_RANGE.refusal()}")
    return margin
